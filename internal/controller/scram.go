package controller

import (
	"context"
	"fmt"
	"maps"
)

// ScramCredential is one user's stored SCRAM credential for one mechanism, as Kafka's
// UserScramCredentialRecord holds it: never the password, only what a server needs to check a proof
// (docs/security.md, Users).
type ScramCredential struct {
	User string
	// Mechanism is Kafka's ScramMechanism number: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
	Mechanism  int8
	Salt       []byte
	Iterations int32
	StoredKey  []byte
	ServerKey  []byte
}

// ScramCredentialKey names one user's credential for one mechanism.
type ScramCredentialKey struct {
	User      string
	Mechanism int8
}

// AlterScramCredentials upserts and deletes SCRAM credentials, all or none. Deleting a credential
// that does not exist changes nothing. With IfUserAbsent (the bootstrap user of a node's start), the
// command changes nothing when the image already has a credential of any mechanism for a user it
// upserts.
type AlterScramCredentials struct {
	Upserts      []ScramCredential    `json:",omitempty"`
	Deletes      []ScramCredentialKey `json:",omitempty"`
	IfUserAbsent bool                 `json:",omitempty"`
}

func (AlterScramCredentials) command() {}

// Kafka's bounds on a SCRAM credential's iterations.
const (
	ScramIterationsMin = 4096
	ScramIterationsMax = 16384
)

// scramKeyBytes is the size of the keys of each SCRAM mechanism (its hash's output).
var scramKeyBytes = map[int8]int{1: 32, 2: 64}

// ValidateScramCredential checks a credential's user, mechanism, iterations and key sizes; it returns
// ErrInvalidCommand otherwise.
func ValidateScramCredential(c ScramCredential) error {
	size, ok := scramKeyBytes[c.Mechanism]
	switch {
	case c.User == "":
		return fmt.Errorf("%w: SCRAM credential without a user", ErrInvalidCommand)
	case !ok:
		return fmt.Errorf("%w: SCRAM mechanism %d", ErrInvalidCommand, c.Mechanism)
	case c.Iterations < ScramIterationsMin || c.Iterations > ScramIterationsMax:
		return fmt.Errorf("%w: %d SCRAM iterations, want %d to %d", ErrInvalidCommand, c.Iterations, ScramIterationsMin, ScramIterationsMax)
	case len(c.Salt) == 0 || len(c.StoredKey) != size || len(c.ServerKey) != size:
		return fmt.Errorf("%w: SCRAM credential of %q with a malformed salt or keys", ErrInvalidCommand, c.User)
	}
	return nil
}

func (img *Image) alterScramCredentials(c AlterScramCredentials) error {
	for _, u := range c.Upserts {
		if err := ValidateScramCredential(u); err != nil {
			return err
		}
	}
	creds := make(map[string]map[int8]ScramCredential, len(img.ScramCredentials)+len(c.Upserts))
	maps.Copy(creds, img.ScramCredentials)
	for _, d := range c.Deletes {
		byMech, ok := creds[d.User]
		if _, has := byMech[d.Mechanism]; !ok || !has {
			continue
		}
		byMech = maps.Clone(byMech)
		delete(byMech, d.Mechanism)
		if len(byMech) == 0 {
			delete(creds, d.User)
		} else {
			creds[d.User] = byMech
		}
	}
	for _, u := range c.Upserts {
		if c.IfUserAbsent && len(img.ScramCredentials[u.User]) > 0 {
			continue
		}
		byMech := maps.Clone(creds[u.User])
		if byMech == nil {
			byMech = map[int8]ScramCredential{}
		}
		byMech[u.Mechanism] = u
		creds[u.User] = byMech
	}
	img.ScramCredentials = creds
	return nil
}

// ScramCredential returns user's credential for mechanism.
func (img *Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	c, ok := img.ScramCredentials[user][mechanism]
	return c, ok
}

// AlterScramCredentials proposes an AlterScramCredentials command.
func (s *Store) AlterScramCredentials(ctx context.Context, c AlterScramCredentials) error {
	_, _, err := s.propose(ctx, func(*Image) Command { return c }, false)
	return err
}
