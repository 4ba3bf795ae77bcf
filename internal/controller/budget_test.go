package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/weir-mq/weir/internal/vfs"
)

// TestControllerPartitionBudget: a creation that would put more replicas on the broker than
// weir.max.partitions.per.broker, or more partitions in the cluster than weir.max.partitions, is refused
// with ErrPolicyViolation before anything is committed; a budget lowered below what exists refuses only
// growth.
func TestControllerPartitionBudget(t *testing.T) {
	s := openStore(t, vfs.NewMem())
	ctx := context.Background()
	before := s.Image().Version
	if _, err := s.CreateTopic(ctx, "huge", MaxPartitions, nil, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("a topic of %d partitions on one broker: %v, want ErrPolicyViolation", MaxPartitions, err)
	}
	if _, err := s.CreateTopic(ctx, "huge", MaxPartitions, nil, true); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("validating it: %v, want ErrPolicyViolation", err)
	}
	if v := s.Image().Version; v != before {
		t.Fatalf("a refused creation changed the image: version %d to %d", before, v)
	}
	if _, err := s.CreateTopic(ctx, "a", 10_000, nil, false); err != nil {
		t.Fatalf("a topic at the default per-broker budget: %v", err)
	}
	if _, err := s.CreateTopic(ctx, "b", 1, nil, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("one partition over the budget: %v", err)
	}
	if err := s.AlterBrokerConfigs(ctx, map[string]string{BrokerConfigMaxPartitionsPerBroker: "100"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := s.CreatePartitions(ctx, "a", 10_001, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("growing a broker already over a lowered budget: %v", err)
	}
	if err := s.DeleteTopic(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic(ctx, "c", 100, nil, false); err != nil {
		t.Fatalf("a topic at the lowered budget: %v", err)
	}
	if err := s.CreatePartitions(ctx, "c", 101, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("CreatePartitions over the budget: %v", err)
	}
	if err := s.AlterBrokerConfigs(ctx, map[string]string{BrokerConfigMaxPartitionsPerBroker: "1000", BrokerConfigMaxPartitions: "150"}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTopic(ctx, "d", 51, nil, false); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("a topic over the cluster's budget: %v", err)
	}
	if _, err := s.CreateTopic(ctx, "d", 50, nil, false); err != nil {
		t.Fatalf("a topic at the cluster's budget: %v", err)
	}
}
