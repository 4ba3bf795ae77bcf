package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/controller"
	"github.com/weir-mq/weir/internal/sasl"
)

// userResult is one user's outcome of an AlterUserScramCredentials request.
type userResult struct {
	code int16
	msg  string
}

// alterUserScramCredentials answers AlterUserScramCredentials (key 51): it derives each upserted
// credential from the salted password the client computed (the password never reaches the broker)
// and proposes every user's changes that pass Kafka's checks as one controller command. Per user:
// UNSUPPORTED_SASL_MECHANISM for a mechanism other than SCRAM-SHA-256/512, UNACCEPTABLE_CREDENTIAL
// for an empty name or salt, iterations outside 4096–16384 or a salted password of the wrong size,
// DUPLICATE_RESOURCE for a user and mechanism named twice, RESOURCE_NOT_FOUND for deleting a
// credential that does not exist; a user with any error has none of its changes made.
func (b *Broker) alterUserScramCredentials(ctx context.Context, req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	img := b.meta.Image()
	var order []string
	results := map[string]*userResult{}
	seen := map[controller.ScramCredentialKey]bool{}
	fail := func(user string, code *kerr.Error, format string, args ...any) {
		if r := results[user]; r.code == 0 {
			r.code, r.msg = code.Code, fmt.Sprintf(format, args...)
		}
	}
	note := func(user string, mech int8) {
		if results[user] == nil {
			results[user] = &userResult{}
			order = append(order, user)
		}
		k := controller.ScramCredentialKey{User: user, Mechanism: mech}
		if seen[k] {
			fail(user, kerr.DuplicateResource, "user %q and mechanism %d named more than once", user, mech)
		}
		seen[k] = true
		switch {
		case user == "":
			fail(user, kerr.UnacceptableCredential, "empty user name")
		case !sasl.Mechanism(mech).Valid():
			fail(user, kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism %d", mech)
		}
	}
	var cmd controller.AlterScramCredentials
	for _, d := range req.Deletions {
		note(d.Name, d.Mechanism)
		if _, ok := img.ScramCredential(d.Name, d.Mechanism); !ok {
			fail(d.Name, kerr.ResourceNotFound, "user %q has no %s credential", d.Name, sasl.Mechanism(d.Mechanism))
		}
		cmd.Deletes = append(cmd.Deletes, controller.ScramCredentialKey{User: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		note(u.Name, u.Mechanism)
		if u.Iterations < controller.ScramIterationsMin || u.Iterations > controller.ScramIterationsMax {
			fail(u.Name, kerr.UnacceptableCredential, "%d iterations, want %d to %d", u.Iterations,
				controller.ScramIterationsMin, controller.ScramIterationsMax)
		}
		if len(u.Salt) == 0 {
			fail(u.Name, kerr.UnacceptableCredential, "empty salt")
		}
		c, err := sasl.NewCredential(sasl.Mechanism(u.Mechanism), u.SaltedPassword, u.Salt, int(u.Iterations))
		if err != nil {
			fail(u.Name, kerr.UnacceptableCredential, "%v", err)
		}
		cmd.Upserts = append(cmd.Upserts, controller.ScramCredential{User: u.Name, Mechanism: u.Mechanism,
			Salt: c.Salt, Iterations: u.Iterations, StoredKey: c.StoredKey, ServerKey: c.ServerKey})
	}
	cmd = keepAccepted(cmd, results)
	if len(cmd.Upserts)+len(cmd.Deletes) > 0 {
		if err := b.meta.AlterScramCredentials(ctx, cmd); err != nil {
			code := b.errorCode(err)
			for _, r := range results {
				if r.code == 0 {
					r.code, r.msg = code, err.Error()
				}
			}
		}
	}
	for _, user := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, results[user].code
		if r.ErrorCode != 0 {
			r.ErrorMessage = errorMessage(errors.New(results[user].msg))
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// keepAccepted drops the changes of every user whose result is an error.
func keepAccepted(cmd controller.AlterScramCredentials, results map[string]*userResult) controller.AlterScramCredentials {
	var out controller.AlterScramCredentials
	for _, d := range cmd.Deletes {
		if results[d.User].code == 0 {
			out.Deletes = append(out.Deletes, d)
		}
	}
	for _, u := range cmd.Upserts {
		if results[u.User].code == 0 {
			out.Upserts = append(out.Upserts, u)
		}
	}
	return out
}
