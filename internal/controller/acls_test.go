package controller

import (
	"errors"
	"slices"
	"testing"

	"github.com/weir-mq/weir/internal/acl"
)

func testBinding(name string, op acl.Operation) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: name, PatternType: acl.PatternLiteral,
		Principal: "User:alice", Host: "*", Operation: op, Permission: acl.PermissionAllow}
}

func TestControllerApplyAcls(t *testing.T) {
	a, b, c := testBinding("a", acl.OpRead), testBinding("b", acl.OpWrite), testBinding("c", acl.OpAll)
	img := NewImage("cluster", 1)
	img = mustApply(t, img, CreateAcls{Bindings: []acl.Binding{a, b}})
	before := img.ACLs
	img = mustApply(t, img, CreateAcls{Bindings: []acl.Binding{b, c}})
	if want := []acl.Binding{a, b, c}; !slices.Equal(img.ACLs, want) {
		t.Fatalf("ACLs = %v, want %v (b not twice)", img.ACLs, want)
	}
	if !slices.Equal(before, []acl.Binding{a, b}) {
		t.Fatalf("the previous image's ACLs changed: %v", before)
	}
	bad := testBinding("d", acl.OpAny)
	if _, err := Apply(img, CreateAcls{Bindings: []acl.Binding{testBinding("d", acl.OpRead), bad}}); !errors.Is(err, ErrInvalidCommand) || !errors.Is(err, acl.ErrInvalidBinding) {
		t.Fatalf("an invalid binding: %v, want ErrInvalidCommand and acl.ErrInvalidBinding", err)
	}
	img = mustApply(t, img, DeleteAcls{Bindings: []acl.Binding{a, testBinding("gone", acl.OpRead)}})
	if want := []acl.Binding{b, c}; !slices.Equal(img.ACLs, want) {
		t.Fatalf("after delete ACLs = %v, want %v", img.ACLs, want)
	}
	shared := mustApply(t, img, AllocateProducerIDs{N: 1})
	if &shared.ACLs[0] != &img.ACLs[0] {
		t.Fatal("a command other than an ACL one copied the ACLs")
	}
}

func TestControllerAclsEncoding(t *testing.T) {
	for _, cmd := range []Command{CreateAcls{Bindings: []acl.Binding{testBinding("a", acl.OpRead)}}, DeleteAcls{Bindings: []acl.Binding{testBinding("a", acl.OpRead)}}} {
		data, err := EncodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeCommand(data)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(aclsOf(got), aclsOf(cmd)) {
			t.Fatalf("round trip of %T: %v", cmd, got)
		}
	}
	img := mustApply(t, NewImage("cluster", 1), CreateAcls{Bindings: []acl.Binding{testBinding("a", acl.OpRead)}})
	data, err := encodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeMetadata(data)
	if err != nil || !slices.Equal(back.ACLs, img.ACLs) {
		t.Fatalf("image round trip: %v, %v", back, err)
	}
	// An image written before ACLs existed has no ACLs field, and loads with none.
	old, err := encodeImage(NewImage("cluster", 1))
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decodeMetadata(old); err != nil || back.ACLs != nil {
		t.Fatalf("an image without ACLs: %v, %v", back, err)
	}
}

func aclsOf(cmd Command) []acl.Binding {
	switch c := cmd.(type) {
	case CreateAcls:
		return c.Bindings
	case DeleteAcls:
		return c.Bindings
	}
	return nil
}
