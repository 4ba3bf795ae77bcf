package controller

import (
	"bytes"
	"errors"
	"testing"
)

func scramCred(user string, mech int8) ScramCredential {
	size := scramKeyBytes[mech]
	return ScramCredential{User: user, Mechanism: mech, Salt: []byte("salt"), Iterations: 4096,
		StoredKey: bytes.Repeat([]byte{1}, size), ServerKey: bytes.Repeat([]byte{2}, size)}
}

func TestScramCredentialsApply(t *testing.T) {
	img := NewImage("cluster", 1)
	next, err := Apply(img, AlterScramCredentials{Upserts: []ScramCredential{scramCred("alice", 1), scramCred("alice", 2), scramCred("bob", 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := img.ScramCredential("alice", 1); ok {
		t.Fatal("Apply modified the image it was given")
	}
	if _, ok := next.ScramCredential("alice", 2); !ok || len(next.ScramCredentials) != 2 {
		t.Fatalf("credentials after the upsert: %+v", next.ScramCredentials)
	}
	other := scramCred("alice", 1)
	other.Iterations = 8192
	boot, err := Apply(next, AlterScramCredentials{Upserts: []ScramCredential{other}, IfUserAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := boot.ScramCredential("alice", 1); c.Iterations != 4096 {
		t.Fatalf("IfUserAbsent replaced an existing user's credential: %+v", c)
	}
	del, err := Apply(boot, AlterScramCredentials{Deletes: []ScramCredentialKey{{"alice", 1}, {"bob", 2}, {"carol", 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := del.ScramCredentials["bob"]; ok || len(del.ScramCredentials["alice"]) != 1 {
		t.Fatalf("credentials after the deletes: %+v", del.ScramCredentials)
	}
	if _, ok := boot.ScramCredential("alice", 1); !ok {
		t.Fatal("a delete modified the image it was applied to")
	}
	for _, bad := range []ScramCredential{
		func() ScramCredential { c := scramCred("x", 1); c.Iterations = 4095; return c }(),
		func() ScramCredential { c := scramCred("x", 1); c.Iterations = 16385; return c }(),
		func() ScramCredential { c := scramCred("x", 1); c.StoredKey = c.StoredKey[:31]; return c }(),
		func() ScramCredential { c := scramCred("", 1); return c }(),
		func() ScramCredential { c := scramCred("x", 2); c.Mechanism = 3; return c }(),
	} {
		if _, err := Apply(img, AlterScramCredentials{Upserts: []ScramCredential{bad}}); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%+v: %v, want ErrInvalidCommand", bad, err)
		}
	}
}

func TestScramCommandAndListenersRoundTrip(t *testing.T) {
	cmd := AlterScramCredentials{Upserts: []ScramCredential{scramCred("alice", 2)}, Deletes: []ScramCredentialKey{{"bob", 1}}}
	data, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	if g := got.(AlterScramCredentials); g.Upserts[0].User != "alice" || !bytes.Equal(g.Upserts[0].ServerKey, cmd.Upserts[0].ServerKey) || g.Deletes[0].User != "bob" {
		t.Fatalf("round trip: %+v", g)
	}
	img := NewImage("cluster", 1)
	img, err = Apply(img, RegisterBroker{Broker: Broker{NodeID: 1, Host: "h", Port: 9092,
		Listeners: []Endpoint{{Name: "PLAINTEXT", Host: "h", Port: 9092}, {Name: "SECURE", Host: "s", Port: 9094}}}})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeMetadata(enc)
	if err != nil {
		t.Fatal(err)
	}
	if h, p, ok := back.Brokers[0].Endpoint("SECURE"); !ok || h != "s" || p != 9094 {
		t.Fatalf("SECURE endpoint after a round trip: %s %d %v", h, p, ok)
	}
	if _, _, ok := back.Brokers[0].Endpoint("OTHER"); ok {
		t.Fatal("an unknown listener has an endpoint")
	}
}

// TestImageFromBeforeListenersLoads decodes an image written before brokers had listeners and
// SCRAM credentials existed: its brokers' one endpoint is their PLAINTEXT listener.
func TestImageFromBeforeListenersLoads(t *testing.T) {
	old := Broker{NodeID: 1, Host: "h", Port: 9092}
	img := NewImage("cluster", 1)
	img.Brokers = []Broker{old}
	enc, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc, []byte("Listeners")) || bytes.Contains(enc, []byte("ScramCredentials")) {
		t.Fatalf("an image without listeners or credentials encodes new fields: %s", enc)
	}
	back, err := decodeMetadata(enc)
	if err != nil {
		t.Fatal(err)
	}
	if h, p, ok := back.Brokers[0].Endpoint("PLAINTEXT"); !ok || h != "h" || p != 9092 {
		t.Fatalf("PLAINTEXT endpoint of an old broker record: %s %d %v", h, p, ok)
	}
}
