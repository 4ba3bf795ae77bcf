package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/weir-mq/weir/internal/kafka/wire"
	"github.com/weir-mq/weir/internal/sasl"
)

// errSASLFailed is what a client is told about any failed exchange: whether the user exists or the
// password was wrong is not said (the node's log says it).
var errSASLFailed = errors.New("authentication failed: invalid credentials")

// saslAuthenticate answers SaslAuthenticate (key 36): one step of the exchange SaslHandshake chose.
// PLAIN ends in one step, SCRAM in two. On success the connection becomes the user's principal from
// its next request on, for SessionLifetimeMs when a lifetime is set (v1+). A failure answers
// SASL_AUTHENTICATION_FAILED after the failure delay, is logged and counted, and closes the
// connection; an authenticate without a handshake gets ILLEGAL_SASL_STATE and closes it too. On a
// listener without SASL it gets ILLEGAL_SASL_STATE, as in Kafka.
func (b *Broker) saslAuthenticate(req *wire.Request, body *kmsg.SASLAuthenticateRequest) wire.Reply {
	resp := body.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s := req.Session
	if s == nil || !s.Protocol.SASL() {
		// s is nil for a request not from a wire connection (a test driving Handle).
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return ready(resp)
	}
	st, ok := s.SASL.(*saslState)
	if !ok {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = errorMessage(errors.New("SaslAuthenticate before SaslHandshake"))
		s.CloseAfterReply()
		return ready(resp)
	}
	user, out, done, err := b.saslStep(st, body.SASLAuthBytes)
	if err == nil && done && s.Authenticated() && s.Principal() != "User:"+user {
		err = fmt.Errorf("%w: re-authentication as %q on a connection of %s", sasl.ErrAuthFailed, user, s.Principal())
	}
	if err != nil {
		s.SASL = nil
		s.CloseAfterReply()
		b.sasl.observe(st.mechanism, "failed")
		b.log.Warn("api: SASL authentication failed; closing the connection", "mechanism", st.mechanism,
			"user", user, "remote", remoteString(req), "listener", req.Listener, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = errorMessage(errSASLFailed)
		return b.afterFailureDelay(resp)
	}
	resp.SASLAuthBytes = out
	if done {
		s.SASL = nil
		var expiry time.Time
		if b.sasl.lifetime > 0 {
			expiry = b.clock.Now().Add(b.sasl.lifetime)
			resp.SessionLifetimeMillis = b.sasl.lifetime.Milliseconds()
		}
		s.Authenticate("User:"+user, expiry)
		b.sasl.observe(st.mechanism, "ok")
		b.log.Debug("api: SASL authentication succeeded", "mechanism", st.mechanism, "user", user,
			"remote", remoteString(req), "listener", req.Listener)
	}
	return ready(resp)
}

// saslStep runs one step of the exchange st: it returns the user named so far, the server's answer
// and whether the exchange has succeeded.
func (b *Broker) saslStep(st *saslState, msg []byte) (user string, out []byte, done bool, err error) {
	if st.mechanism == sasl.NamePlain {
		user, password, err := sasl.ParsePlain(msg)
		if err != nil {
			return user, nil, false, err
		}
		cred, ok := plainCredential(b.meta.Image(), user)
		if !ok {
			return user, nil, false, fmt.Errorf("%w: unknown user", sasl.ErrAuthFailed)
		}
		if !cred.CheckPassword(password) {
			return user, nil, false, fmt.Errorf("%w: wrong password", sasl.ErrAuthFailed)
		}
		return user, nil, true, nil
	}
	if st.scram == nil {
		m, _ := sasl.MechanismByName(st.mechanism)
		nonce, err := b.sasl.nonce()
		if err != nil {
			return "", nil, false, fmt.Errorf("api: server nonce: %w", err)
		}
		st.scram = sasl.NewScram(m, scramLookup(b.meta, m), nonce)
	}
	out, done, err = st.scram.Step(msg)
	return st.scram.User(), out, done, err
}

// afterFailureDelay answers resp once the failure delay has passed (or the connection ended).
func (b *Broker) afterFailureDelay(resp kmsg.Response) wire.Reply {
	delay := b.sasl.failureDelay
	return func(ctx context.Context) kmsg.Response {
		select {
		case <-b.clock.After(delay):
		case <-ctx.Done():
		}
		return resp
	}
}

// remoteString is the client's address for logs.
func remoteString(req *wire.Request) string {
	if req.Remote == nil {
		return ""
	}
	return req.Remote.String()
}
