package api_test

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestElectLeadersAndLogDirs: kadm's ElectLeaders against one node answers ELECTION_NOT_NEEDED for a
// partition its preferred replica leads (preferred and unclean alike) and UNKNOWN_TOPIC_OR_PARTITION
// for one that does not exist; DescribeLogDirs names the node's directory with each partition's size;
// ListPartitionReassignments lists nothing while nothing moves.
func TestElectLeadersAndLogDirs(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	createTopic(t, adm, "e", 2, nil)
	cl := newClient(t, n, kgo.DefaultProduceTopic("e"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: make([]byte, 1000)}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	for _, how := range []kadm.ElectLeadersHow{kadm.ElectPreferredReplica, kadm.ElectLiveReplica} {
		res, err := adm.ElectLeaders(ctx, how, kadm.TopicsSet{"e": {0: {}}, "nope": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		if r := res["e"][0]; !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Errorf("election %d of e-0: %v, want ELECTION_NOT_NEEDED", how, r.Err)
		}
		if r := res["nope"][0]; !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			t.Errorf("election %d of nope-0: %v, want UNKNOWN_TOPIC_OR_PARTITION", how, r.Err)
		}
	}

	dirs, err := adm.DescribeBrokerLogDirs(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		for p := range int32(2) {
			if lp, ok := d.Topics.Lookup("e", p); ok {
				sizes = append(sizes, lp.Size)
			}
		}
	})
	if len(sizes) != 2 || sizes[0] != 0 || sizes[1] < 1000 {
		t.Errorf("sizes of e's partitions %v, want [0 >=1000]; dirs %+v", sizes, dirs)
	}

	moving, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"e": {0: {}, 1: {}}})
	if err != nil || len(moving) != 0 {
		t.Errorf("reassignments listed while nothing moves: %v, %v", moving, err)
	}
}
