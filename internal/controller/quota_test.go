package controller

import (
	"errors"
	"reflect"
	"testing"
)

func TestQuotaApply(t *testing.T) {
	img := NewImage("cluster", 1)
	alice := QuotaEntity{User: QuotaNamed("alice")}
	aliceDefaultClient := QuotaEntity{User: QuotaNamed("alice"), ClientID: QuotaDefault()}
	next, err := Apply(img, AlterClientQuotas{Alterations: []QuotaAlteration{
		{Entity: aliceDefaultClient, Set: map[string]float64{QuotaConsumerByteRate: 2048}},
		{Entity: alice, Set: map[string]float64{QuotaProducerByteRate: 1024, QuotaRequestPercentage: 12.5}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if img.ClientQuotas != nil {
		t.Fatal("Apply modified the image it was given")
	}
	want := []ClientQuota{
		{Entity: alice, Values: map[string]float64{QuotaProducerByteRate: 1024, QuotaRequestPercentage: 12.5}},
		{Entity: aliceDefaultClient, Values: map[string]float64{QuotaConsumerByteRate: 2048}},
	}
	if !reflect.DeepEqual(next.ClientQuotas, want) {
		t.Fatalf("quotas: %+v, want %+v", next.ClientQuotas, want)
	}
	data, err := encodeImage(next)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeMetadata(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.ClientQuotas, want) {
		t.Fatalf("quotas after a snapshot round trip: %+v", back.ClientQuotas)
	}
	removed, err := Apply(next, AlterClientQuotas{Alterations: []QuotaAlteration{
		{Entity: alice, Remove: []string{QuotaProducerByteRate, QuotaRequestPercentage}},
		{Entity: aliceDefaultClient, Remove: []string{QuotaConsumerByteRate}, Set: map[string]float64{QuotaConsumerByteRate: 4096}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want = []ClientQuota{{Entity: aliceDefaultClient, Values: map[string]float64{QuotaConsumerByteRate: 4096}}}
	if !reflect.DeepEqual(removed.ClientQuotas, want) {
		t.Fatalf("quotas after the removal: %+v, want %+v", removed.ClientQuotas, want)
	}
	if len(next.ClientQuotas[0].Values) != 2 {
		t.Fatal("a removal modified the image it was applied to")
	}
}

func TestQuotaApplyRefusesBadAlterations(t *testing.T) {
	client := QuotaEntity{ClientID: QuotaNamed("c")}
	for _, a := range []QuotaAlteration{
		{Entity: QuotaEntity{}, Set: map[string]float64{QuotaProducerByteRate: 1}},
		{Entity: client, Set: map[string]float64{"controller_mutation_rate": 1}},
		{Entity: client, Remove: []string{"nope"}},
		{Entity: client, Set: map[string]float64{QuotaProducerByteRate: 1.5}},
		{Entity: client, Set: map[string]float64{QuotaConsumerByteRate: 0}},
		{Entity: client, Set: map[string]float64{QuotaRequestPercentage: -1}},
		{Entity: QuotaEntity{User: QuotaName{Set: true, Default: true, Name: "x"}}, Set: map[string]float64{QuotaProducerByteRate: 1}},
	} {
		img := NewImage("cluster", 1)
		if _, err := Apply(img, AlterClientQuotas{Alterations: []QuotaAlteration{a}}); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("%+v: %v, want ErrInvalidCommand", a, err)
		}
	}
}

func TestQuotaCommandCodec(t *testing.T) {
	cmd := AlterClientQuotas{Alterations: []QuotaAlteration{{Entity: QuotaEntity{User: QuotaDefault(), ClientID: QuotaNamed("c")},
		Set: map[string]float64{QuotaProducerByteRate: 10}, Remove: []string{QuotaRequestPercentage}}}}
	data, err := EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cmd) {
		t.Fatalf("decoded %+v, want %+v", back, cmd)
	}
}
