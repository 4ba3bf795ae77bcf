package api_test

import (
	"errors"
	"maps"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func quotaEntity(pairs ...*string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	types := []string{"user", "client-id"}
	for i, name := range pairs {
		if name != nil && *name == "" {
			continue
		}
		e = append(e, kadm.ClientQuotaEntityComponent{Type: types[i], Name: name})
	}
	return e
}

// noEntity marks an absent component for quotaEntity.
var noEntity = kmsg.StringPtr("")

func TestQuotaAdminRoundTrip(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	alter := func(entries ...kadm.AlterClientQuotaEntry) kadm.AlteredClientQuotas {
		t.Helper()
		res, err := adm.AlterClientQuotas(ctx, entries)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	set := func(key string, v float64) kadm.AlterClientQuotaOp {
		return kadm.AlterClientQuotaOp{Key: key, Value: v}
	}
	for _, r := range alter(
		kadm.AlterClientQuotaEntry{Entity: quotaEntity(kmsg.StringPtr("alice"), nil), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity(kmsg.StringPtr("alice")), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 2048), set("request_percentage", 25.5)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity(noEntity, nil), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 4096)}},
		kadm.AlterClientQuotaEntry{Entity: quotaEntity(noEntity, kmsg.StringPtr("app")), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 8192)}},
	) {
		if r.Err != nil {
			t.Fatalf("alter %s: %v %s", r.Entity, r.Err, r.ErrMessage)
		}
	}
	describe := func(strict bool, comps ...kadm.DescribeClientQuotaComponent) map[string]string {
		t.Helper()
		res, err := adm.DescribeClientQuotas(ctx, strict, comps)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, q := range res {
			out[q.Entity.String()] = kadmValues(q.Values)
		}
		return out
	}
	all := describe(false)
	want := map[string]string{
		"{user=alice, client-id=<default>}": "producer_byte_rate=1024",
		"{user=alice}":                      "consumer_byte_rate=2048 request_percentage=25.5",
		"{client-id=<default>}":             "producer_byte_rate=4096",
		"{client-id=app}":                   "consumer_byte_rate=8192",
	}
	if !maps.Equal(all, want) {
		t.Fatalf("describe all: %v, want %v", all, want)
	}
	strictAlice := describe(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: kmsg.StringPtr("alice")})
	if !maps.Equal(strictAlice, map[string]string{"{user=alice}": want["{user=alice}"]}) {
		t.Fatalf("strict user=alice: %v", strictAlice)
	}
	defaults := describe(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: kmsg.QuotasMatchTypeDefault})
	if len(defaults) != 2 || defaults["{client-id=<default>}"] == "" || defaults["{user=alice, client-id=<default>}"] == "" {
		t.Fatalf("client-id default match: %v", defaults)
	}
	anyClient := describe(true, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchType: kmsg.QuotasMatchTypeAny})
	if len(anyClient) != 2 || anyClient["{client-id=app}"] == "" {
		t.Fatalf("strict any client-id: %v", anyClient)
	}

	alter(kadm.AlterClientQuotaEntry{Entity: quotaEntity(kmsg.StringPtr("alice")), Ops: []kadm.AlterClientQuotaOp{
		{Key: "consumer_byte_rate", Remove: true}, {Key: "request_percentage", Remove: true}}})
	if got := describe(true, kadm.DescribeClientQuotaComponent{Type: "user", MatchName: kmsg.StringPtr("alice")}); len(got) != 0 {
		t.Fatalf("user=alice after removing its keys: %v", got)
	}

	res, err := adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity(noEntity, kmsg.StringPtr("v")), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("validate only: %+v, %v", res, err)
	}
	if got := describe(false, kadm.DescribeClientQuotaComponent{Type: "client-id", MatchName: kmsg.StringPtr("v")}); len(got) != 0 {
		t.Fatalf("validate_only changed the quotas: %v", got)
	}
}

func TestQuotaAdminRefusals(t *testing.T) {
	n := startNode(t)
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	bad := []kadm.AlterClientQuotaEntry{
		{Entity: quotaEntity(noEntity, kmsg.StringPtr("c")), Ops: []kadm.AlterClientQuotaOp{{Key: "not_a_quota", Value: 1}}},
		{Entity: quotaEntity(noEntity, kmsg.StringPtr("c")), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 10.5}}},
		{Entity: quotaEntity(noEntity, kmsg.StringPtr("c")), Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: -1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: kmsg.StringPtr("10.0.0.1")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}, {Type: "user", Name: kmsg.StringPtr("x")}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
		{Entity: nil, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}},
	}
	good := kadm.AlterClientQuotaEntry{Entity: quotaEntity(noEntity, kmsg.StringPtr("ok")), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 100}}}
	res, err := adm.AlterClientQuotas(ctx, append(bad, good))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:len(bad)] {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("entry %d (%s): %v, want INVALID_REQUEST", i, r.Entity, r.Err)
		}
	}
	if r := res[len(bad)]; r.Err != nil {
		t.Fatalf("the valid entry beside the bad ones: %v", r.Err)
	}
	got, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(got) != 1 || got[0].Entity.String() != "{client-id=ok}" {
		t.Fatalf("quotas after the refusals: %v, %v", got, err)
	}
	for _, comps := range [][]kadm.DescribeClientQuotaComponent{
		{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}, {Type: "user", MatchType: kmsg.QuotasMatchTypeAny}},
		{{Type: "user", MatchType: kmsg.QuotasMatchTypeExact}},
		{{Type: "user", MatchType: 7}},
		{{Type: "group", MatchType: kmsg.QuotasMatchTypeAny}},
	} {
		if _, err := adm.DescribeClientQuotas(ctx, false, comps); !errors.Is(err, kerr.InvalidRequest) {
			t.Errorf("describe %+v: %v, want INVALID_REQUEST", comps, err)
		}
	}
}

func kadmValues(vs kadm.ClientQuotaValues) string {
	var s string
	for i, v := range vs {
		if i > 0 {
			s += " "
		}
		s += v.Key + "=" + strconv.FormatFloat(v.Value, 'f', -1, 64)
	}
	return s
}
