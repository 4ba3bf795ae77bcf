package api_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkACLProduceRatio produces b.N records of 1 KiB to 4 partitions (acks=all, idempotent)
// twice per round over sixteen rounds, in alternating order: to a node without an authorizer and to a
// node with --authorizer acl holding 1,000 ACLs, one of which lets the producer write. The metric
// acl-cpu/none-cpu is the ratio of the process CPU time (user and system, both nodes and the
// clients are in this process) spent on each; acl/none the ratio of the wall times.
func BenchmarkACLProduceRatio(b *testing.B) {
	const topic = "bench-acl"
	plainNode := startNodeWith(b, nodeConfig(b.TempDir()))
	createBenchTopicNamed(b, plainNode.KafkaAddr(), topic)

	// The ACL node starts open where no ACL names a resource, so the benchmark can create its
	// ACLs; none names the cluster, and the one on the topic decides the producer's requests.
	cfg := aclConfig(b.TempDir())
	cfg.AllowEveryoneIfNoACLFound = true
	aclNode := startNodeWith(b, cfg)
	createBenchTopicNamed(b, aclNode.KafkaAddr(), topic)
	adm := kadm.NewClient(newBenchClientOpts(b, kgo.SeedBrokers(aclNode.KafkaAddr())))
	n := 0
	for i := 0; n < 999; i++ {
		users := []string{fmt.Sprintf("User:u%d", i), fmt.Sprintf("User:v%d", i), fmt.Sprintf("User:w%d", i)}
		builders := []*kadm.ACLBuilder{
			kadm.NewACLs().Allow(users...).Topics(fmt.Sprintf("topic-%d", i), fmt.Sprintf("orders-%d", i)).
				Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
			kadm.NewACLs().Allow(users...).Topics(fmt.Sprintf("team%d-", i)).Groups(fmt.Sprintf("team%d-", i)).
				Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed),
			kadm.NewACLs().Deny(users[0]).Topics(topic).Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral),
		}
		for _, bl := range builders {
			res, err := adm.CreateACLs(context.Background(), bl)
			if err != nil {
				b.Fatal(err)
			}
			n += len(res)
		}
	}
	res, err := adm.CreateACLs(context.Background(), kadm.NewACLs().Allow(aclPrincipal).Topics(topic).
		Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || res[0].Err != nil {
		b.Fatalf("grant the producer: %v %v", res, err)
	}
	described, err := adm.DescribeACLs(context.Background(), kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().
		Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described[0].Described) < 1000 {
		b.Fatalf("want 1,000 ACLs: %v", err)
	}

	opts := func(addr string) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())}
	}
	plain := newBenchClientOpts(b, opts(plainNode.KafkaAddr())...)
	withACL := newBenchClientOpts(b, opts(aclNode.KafkaAddr())...)
	value := make([]byte, 1024)
	// One record each first: the producers' ids and metadata, and the authorizer's index of the
	// ACLs, built on the first request after they changed.
	producePlain(b, withACL, value, 1)
	producePlain(b, plain, value, 1)
	b.SetBytes(2 * int64(len(value)))
	b.ResetTimer()
	var cpuACL, cpuPlain, wallACL, wallPlain time.Duration
	measure := func(cl *kgo.Client, count int, cpu, wall *time.Duration) {
		before := processCPU(b)
		*wall += producePlain(b, cl, value, count)
		*cpu += processCPU(b) - before
	}
	const rounds = 16
	for r := range rounds {
		count := b.N / rounds
		if r < b.N%rounds {
			count++
		}
		if count == 0 {
			continue
		}
		if r%2 == 0 {
			measure(withACL, count, &cpuACL, &wallACL)
			measure(plain, count, &cpuPlain, &wallPlain)
		} else {
			measure(plain, count, &cpuPlain, &wallPlain)
			measure(withACL, count, &cpuACL, &wallACL)
		}
	}
	b.StopTimer()
	if cpuPlain > 0 && wallPlain > 0 {
		b.ReportMetric(float64(cpuACL)/float64(cpuPlain), "acl-cpu/none-cpu")
		b.ReportMetric(float64(wallACL)/float64(wallPlain), "acl/none")
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
