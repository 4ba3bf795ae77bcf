package sasl

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// store holds one user's SCRAM-SHA-256 credential, as the controller image would.
func store(t testing.TB, user, password string) Lookup {
	t.Helper()
	salt := []byte("salt-of-" + user)
	salted, err := SaltPassword(SCRAMSHA256, password, salt, IterationsMin)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := NewCredential(SCRAMSHA256, salted, salt, IterationsMin)
	if err != nil {
		t.Fatal(err)
	}
	return func(u string) (Credential, bool) { return cred, u == user }
}

// exchange runs franz-go's SCRAM client (an implementation of its own) against a Scram.
func exchange(t *testing.T, m Mechanism, lookup Lookup, user, password string) error {
	t.Helper()
	auth := scram.Auth{User: user, Pass: password}
	mech := auth.AsSha256Mechanism()
	if m == SCRAMSHA512 {
		mech = auth.AsSha512Mechanism()
	}
	session, msg, err := mech.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewScram(m, lookup, "servernonce")
	for {
		out, done, err := srv.Step(msg)
		if err != nil {
			return err
		}
		clientDone, next, cerr := session.Challenge(out)
		if cerr != nil {
			t.Fatalf("the client refused the server's message %q: %v", out, cerr)
		}
		if done != clientDone {
			t.Fatalf("server done %v, client done %v", done, clientDone)
		}
		if done {
			if srv.User() != user {
				t.Fatalf("User() = %q, want %q", srv.User(), user)
			}
			return nil
		}
		msg = next
	}
}

func TestScramWithFranzGoClient(t *testing.T) {
	for _, m := range []Mechanism{SCRAMSHA256, SCRAMSHA512} {
		t.Run(m.String(), func(t *testing.T) {
			creds := map[Mechanism]Credential{}
			for _, mm := range []Mechanism{SCRAMSHA256, SCRAMSHA512} {
				salt := []byte("0123456789abcdef")
				salted, err := SaltPassword(mm, "pa,ss=word", salt, 4096)
				if err != nil {
					t.Fatal(err)
				}
				creds[mm], _ = NewCredential(mm, salted, salt, 4096)
			}
			lookup := func(u string) (Credential, bool) {
				c, ok := creds[m]
				return c, ok && u == "al,i=ce"
			}
			if err := exchange(t, m, lookup, "al,i=ce", "pa,ss=word"); err != nil {
				t.Fatalf("right password: %v", err)
			}
			if err := exchange(t, m, lookup, "al,i=ce", "wrong"); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("wrong password: %v, want ErrAuthFailed", err)
			}
			if err := exchange(t, m, lookup, "bob", "pa,ss=word"); !errors.Is(err, ErrAuthFailed) {
				t.Fatalf("unknown user: %v, want ErrAuthFailed", err)
			}
		})
	}
}

func TestScramCredentialOfOtherMechanismFails(t *testing.T) {
	lookup := store(t, "alice", "secret") // SHA-256 credentials only
	if err := exchange(t, SCRAMSHA512, lookup, "alice", "secret"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("SHA-512 exchange against a SHA-256 credential: %v, want ErrAuthFailed", err)
	}
	if err := exchange(t, SCRAMSHA256, lookup, "alice", "secret"); err != nil {
		t.Fatal(err)
	}
}

func TestScramRefusesMalformedAndExtensions(t *testing.T) {
	lookup := store(t, "alice", "secret")
	for _, first := range []string{
		"", "n", "n,,", "p=tls-unique,,n=alice,r=abc", "n,,n=alice,r=abc,tokenauth=true", "n,,m=ext,n=alice,r=abc",
		"n,,n=alice", "n,,n=,r=abc", "n,,n=al=ice,r=abc", "n,x=bob,n=alice,r=abc", "n,,n=alice,r=",
	} {
		_, _, err := NewScram(SCRAMSHA256, lookup, "srv").Step([]byte(first))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("client-first %q: %v, want ErrMalformed", first, err)
		}
	}
	if _, _, err := NewScram(SCRAMSHA256, lookup, "srv").Step([]byte("n,a=bob,n=alice,r=abc")); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("authzid of another user: %v, want ErrAuthFailed", err)
	}
	s := NewScram(SCRAMSHA256, lookup, "srv")
	if _, _, err := s.Step([]byte("n,,n=alice,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Step([]byte("c=biws,r=abcsrv")); !errors.Is(err, ErrMalformed) {
		t.Errorf("client-final without proof: %v", err)
	}
	if _, _, err := s.Step([]byte("anything")); !errors.Is(err, ErrMalformed) {
		t.Errorf("a third message: %v", err)
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		msg       string
		user, pwd string
		err       error
	}{
		{msg: "\x00alice\x00secret", user: "alice", pwd: "secret"},
		{msg: "alice\x00alice\x00secret", user: "alice", pwd: "secret"},
		{msg: "bob\x00alice\x00secret", err: ErrAuthFailed},
		{msg: "\x00alice\x00", err: ErrMalformed},
		{msg: "\x00\x00secret", err: ErrMalformed},
		{msg: "alice\x00secret", err: ErrMalformed},
		{msg: "", err: ErrMalformed},
		{msg: "\x00a\x00b\x00c", err: ErrMalformed},
	} {
		user, pwd, err := ParsePlain([]byte(tc.msg))
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%q: %v, want %v", tc.msg, err, tc.err)
			}
			continue
		}
		if err != nil || user != tc.user || pwd != tc.pwd {
			t.Errorf("%q: %q %q %v", tc.msg, user, pwd, err)
		}
	}
}

func TestCredentialCheckPassword(t *testing.T) {
	salt := []byte("salty")
	for _, m := range []Mechanism{SCRAMSHA256, SCRAMSHA512} {
		salted, err := SaltPassword(m, "secret", salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCredential(m, salted, salt, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if !c.CheckPassword("secret") || c.CheckPassword("Secret") {
			t.Errorf("%s: CheckPassword is wrong", m)
		}
	}
	if _, err := NewCredential(SCRAMSHA256, []byte("short"), salt, 4096); !errors.Is(err, ErrMalformed) {
		t.Errorf("short salted password: %v", err)
	}
	if _, err := NewCredential(3, make([]byte, 32), salt, 4096); !errors.Is(err, ErrUnknownMechanism) {
		t.Errorf("mechanism 3: %v", err)
	}
}

func FuzzScramServer(f *testing.F) {
	f.Add("n,,n=alice,r=abc", "c=biws,r=abcsrv,p=AAAA")
	f.Add("y,a=alice,n=alice,r=x", "c=eSxhPWFsaWNlLA==,r=xsrv,p=")
	f.Add("n,,n=a=2Cb,r=abc", "")
	lookup := store(f, "alice", "secret")
	f.Fuzz(func(t *testing.T, first, final string) {
		for _, m := range []Mechanism{SCRAMSHA256, SCRAMSHA512} {
			s := NewScram(m, lookup, "srv")
			if _, _, err := s.Step([]byte(first)); err != nil {
				continue
			}
			if _, done, err := s.Step([]byte(final)); done || err == nil {
				t.Fatalf("a fuzzed client-final %q authenticated", final)
			}
		}
	})
}

func FuzzPlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00secret"))
	f.Add([]byte("alice\x00alice\x00secret"))
	f.Add([]byte("\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, password, err := ParsePlain(msg)
		if err == nil && (user == "" || password == "") {
			t.Fatalf("%q parsed to an empty user or password", msg)
		}
	})
}
