package api_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestAPIApiVersions(t *testing.T) {
	n := startNode(t)
	rc := dialRaw(t, n)
	for _, v := range []int16{0, 1, 2, 3} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "weir-test", "1.0"
		resp := rc.do(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != 0 {
			t.Fatalf("v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
		}
		keys := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			keys[k.ApiKey] = k
		}
		for key, max := range map[int16]int16{0: 9, 1: 12, 2: 6, 3: 11, 18: 3, 19: 7, 20: 6, 22: 4} {
			if keys[key].MaxVersion < max {
				t.Fatalf("v%d: key %d max %d, want at least %d", v, key, keys[key].MaxVersion, max)
			}
		}
		for key, max := range map[int16]int16{0: 12, 24: 3, 25: 3, 26: 5, 28: 5} {
			if keys[key].MaxVersion != max {
				t.Fatalf("v%d: transaction key %d max %d, want %d (TV2, the default)", v, key, keys[key].MaxVersion, max)
			}
		}
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" && (v < 3 || f.MaxVersionLevel != 2) {
				t.Fatalf("v%d finalizes transaction.version %d, want 2 from v3 (the default)", v, f.MaxVersionLevel)
			}
		}
		if keys[3].MinVersion != 0 || keys[1].MinVersion > 4 || keys[2].MinVersion > 1 {
			t.Fatalf("v%d: minimum versions too high for kafka-python: %+v %+v %+v", v, keys[3], keys[1], keys[2])
		}
	}

	// An unknown version gets a v0 answer with UNSUPPORTED_VERSION and ApiVersions' own range; the
	// connection stays usable.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 127
	corr := rc.send(req)
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	rc.recv(corr, resp)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("v127: %+v", resp)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 1
	if mr := rc.do(md).(*kmsg.MetadataResponse); len(mr.Brokers) != 1 {
		t.Fatalf("metadata after the v127 ApiVersions: %+v", mr)
	}

	bad := kmsg.NewPtrApiVersionsRequest()
	bad.Version = 3
	bad.ClientSoftwareName, bad.ClientSoftwareVersion = "-bad-", "1"
	if resp := rc.do(bad).(*kmsg.ApiVersionsResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("bad software name: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

func TestAPIMetadataOldVersions(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "existing", 2, nil)
	rc := dialRaw(t, n)
	names := func(resp *kmsg.MetadataResponse) map[string]int {
		out := map[string]int{}
		for _, mt := range resp.Topics {
			if mt.Topic != nil {
				out[*mt.Topic] = len(mt.Partitions)
				if mt.ErrorCode != 0 {
					out[*mt.Topic] = -int(mt.ErrorCode)
				}
			}
		}
		return out
	}

	v0 := kmsg.NewPtrMetadataRequest()
	v0.Version = 0
	v0.Topics = []kmsg.MetadataRequestTopic{}
	if got := names(rc.do(v0).(*kmsg.MetadataResponse)); len(got) != 1 || got["existing"] != 2 {
		t.Fatalf("v0 with no topics lists %v, want every topic", got)
	}

	v1 := kmsg.NewPtrMetadataRequest()
	v1.Version = 1
	resp := rc.do(v1).(*kmsg.MetadataResponse)
	if got := names(resp); len(got) != 1 || got["existing"] != 2 {
		t.Fatalf("v1 with null topics lists %v, want every topic", got)
	}
	if resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 1 {
		t.Fatalf("v1 brokers %+v controller %d", resp.Brokers, resp.ControllerID)
	}

	empty := kmsg.NewPtrMetadataRequest()
	empty.Version = 1
	empty.Topics = []kmsg.MetadataRequestTopic{}
	if got := names(rc.do(empty).(*kmsg.MetadataResponse)); len(got) != 0 {
		t.Fatalf("v1 with an empty list lists %v, want none", got)
	}

	// v0–v3 carry no AllowAutoTopicCreation and imply it.
	for _, v := range []int16{0, 1, 3} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		rt := kmsg.NewMetadataRequestTopic()
		topic := "implied-" + string(rune('a'+v))
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		if got := names(rc.do(req).(*kmsg.MetadataResponse)); got[topic] != 1 {
			t.Fatalf("v%d naming a missing topic: %v, want it auto-created with 1 partition", v, got)
		}
	}

	// v4+ creates only when asked.
	for _, allow := range []bool{false, true} {
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 11
		req.AllowAutoTopicCreation = allow
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("flagged")
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req).(*kmsg.MetadataResponse)
		got := names(resp)
		if !allow && got["flagged"] != -int(kerr.UnknownTopicOrPartition.Code) {
			t.Fatalf("v11 without the flag: %v", got)
		}
		if allow && (got["flagged"] != 1 || resp.Topics[0].TopicID == [16]byte{}) {
			t.Fatalf("v11 with the flag: %v, id %v", got, resp.Topics[0].TopicID)
		}
	}

	invalid := kmsg.NewPtrMetadataRequest()
	invalid.Version = 1
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("no spaces allowed")
	invalid.Topics = append(invalid.Topics, rt)
	if got := names(rc.do(invalid).(*kmsg.MetadataResponse)); got["no spaces allowed"] != -int(kerr.InvalidTopicException.Code) {
		t.Fatalf("invalid name: %v", got)
	}
}

func TestAPIProduceErrors(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "small", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("200")})
	rc := dialRaw(t, n)
	good := testBatch(batchSpec{values: []string{"a", "b"}})
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-1] ^= 0xff
	large := testBatch(batchSpec{values: []string{string(make([]byte, 300))}})
	cases := []struct {
		name    string
		version int16
		batch   []byte
		want    *kerr.Error
	}{
		{"corrupt", 9, corrupt, kerr.CorruptMessage},
		{"tooLarge", 9, large, kerr.MessageTooLarge},
		{"twoBatches", 9, append(append([]byte(nil), good...), good...), kerr.InvalidRecord},
		{"truncated", 9, good[:len(good)-3], kerr.CorruptMessage},
		{"control", 9, testBatch(batchSpec{attributes: 0x20, values: []string{"c"}}), kerr.InvalidRecord},
		{"transactionalWithoutProducer", 9, testBatch(batchSpec{attributes: 0x10, values: []string{"t"}}), kerr.InvalidRecord},
		{"logAppendTime", 9, testBatch(batchSpec{attributes: 0x08, values: []string{"l"}}), kerr.InvalidTimestamp},
		{"zstdBeforeV7", 3, testBatch(batchSpec{attributes: 0x04, values: []string{"z"}}), kerr.UnsupportedCompressionType},
		{"unknownPartition", 9, good, kerr.UnknownTopicOrPartition},
	}
	for _, c := range cases {
		part := int32(0)
		if c.name == "unknownPartition" {
			part = 7
		}
		p := produceRaw(t, rc, c.version, "small", part, c.batch)
		if p.ErrorCode != c.want.Code {
			t.Errorf("%s: %v, want %v", c.name, kerr.ErrorForCode(p.ErrorCode), c.want)
		}
	}
	// Nothing of the refused batches was stored.
	if p := produceRaw(t, rc, 9, "small", 0, good); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("good batch after the bad ones: %v at offset %d, want offset 0", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}

	acks := kmsg.NewPtrProduceRequest()
	acks.Version = 9
	acks.Acks = 2
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "small"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = good
	rt.Partitions = append(rt.Partitions, rp)
	acks.Topics = append(acks.Topics, rt)
	if resp := rc.do(acks).(*kmsg.ProduceResponse); resp.Topics[0].Partitions[0].ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: %v", kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode))
	}
}

func TestAPIProduceAcksZeroKeepsOrder(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "fire", 1, nil)
	rc := dialRaw(t, n)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "fire"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = testBatch(batchSpec{values: []string{"x"}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.send(req)
	// acks=0 gets no response, so the next one on the connection is the fetch's (recv checks the
	// correlation id); the fetch parks until the record is durable, then returns it.
	fetch := fetchRequest(12, "fire", 0, 120_000, 1)
	resp := rc.do(fetch).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch after an acks=0 produce: %v, hw %d, %d bytes", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches))
	}
}

func TestAPIIdempotentProduce(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "idem", 1, nil)
	rc := dialRaw(t, n)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.Version = 4
	first := rc.do(init).(*kmsg.InitProducerIDResponse)
	second := rc.do(init).(*kmsg.InitProducerIDResponse)
	if first.ErrorCode != 0 || first.ProducerID < 0 || first.ProducerEpoch != 0 || second.ProducerID == first.ProducerID {
		t.Fatalf("init producer ids: %+v then %+v", first, second)
	}
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.Version = 4
	txn.TransactionalID = kmsg.StringPtr("tx")
	if r := rc.do(txn).(*kmsg.InitProducerIDResponse); r.ErrorCode == 0 {
		t.Fatal("a transactional id was accepted before its coordinator was found (no __transaction_state yet)")
	}

	pid := first.ProducerID
	batch := func(epoch int16, seq int32, vals ...string) []byte {
		return testBatch(batchSpec{idempotent: true, producerID: pid, producerEpoch: epoch, sequence: seq, values: vals})
	}
	steps := []struct {
		name   string
		batch  []byte
		want   *kerr.Error
		offset int64
	}{
		{"first", batch(0, 0, "a", "b"), nil, 0},
		{"next", batch(0, 2, "c"), nil, 2},
		{"retryOfFirst", batch(0, 0, "a", "b"), nil, 0},
		{"gap", batch(0, 5, "x"), kerr.OutOfOrderSequenceNumber, -1},
		{"newEpoch", batch(1, 0, "d"), nil, 3},
		{"oldEpoch", batch(0, 3, "y"), kerr.InvalidProducerEpoch, -1},
	}
	for _, s := range steps {
		p := produceRaw(t, rc, 9, "idem", 0, s.batch)
		if s.want != nil {
			if p.ErrorCode != s.want.Code {
				t.Fatalf("%s: %v, want %v", s.name, kerr.ErrorForCode(p.ErrorCode), s.want)
			}
			continue
		}
		if p.ErrorCode != 0 || p.BaseOffset != s.offset {
			t.Fatalf("%s: %v at offset %d, want offset %d", s.name, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, s.offset)
		}
	}
}

// fetchRequest asks for topic[0] from offset.
func fetchRequest(version int16, topic string, offset int64, maxWaitMillis, minBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxWaitMillis = maxWaitMillis
	req.MinBytes = minBytes
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = 1 << 20
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func TestAPIFetchParksUntilData(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "park", 1, nil)
	fetcher := dialRaw(t, n)
	// A fetch that would wait far longer than the test: only a produce can end it.
	corr := fetcher.send(fetchRequest(12, "park", 0, 120_000, 1))
	producer := dialRaw(t, n)
	if p := produceRaw(t, producer, 9, "park", 0, testBatch(batchSpec{values: []string{"wake"}})); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	fetcher.recv(corr, resp)
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.HighWatermark != 1 || len(p.RecordBatches) == 0 || resp.SessionID != 0 {
		t.Fatalf("woken fetch: err %v, hw %d, %d bytes, session %d", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark, len(p.RecordBatches), resp.SessionID)
	}
}

func TestAPIFetchEdges(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "edges", 1, nil)
	rc := dialRaw(t, n)
	for i := range 3 {
		if p := produceRaw(t, rc, 9, "edges", 0, testBatch(batchSpec{values: []string{string(rune('a' + i))}})); p.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}

	// Nothing new and no wait: an empty (not null) record set at once.
	resp := rc.do(fetchRequest(11, "edges", 3, 0, 1)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.RecordBatches == nil || len(p.RecordBatches) != 0 || p.HighWatermark != 3 {
		t.Fatalf("fetch at the end: %+v", p)
	}

	resp = rc.do(fetchRequest(4, "edges", 1, 0, 1)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 || p.LastStableOffset != 3 {
		t.Fatalf("fetch v4 from 1: %+v", p)
	}

	resp = rc.do(fetchRequest(12, "edges", 9, 0, 1)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.OffsetOutOfRange.Code || p.HighWatermark != 3 {
		t.Fatalf("fetch past the end: %v hw %d", kerr.ErrorForCode(p.ErrorCode), p.HighWatermark)
	}

	resp = rc.do(fetchRequest(12, "nope", 0, 0, 1)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch of a missing topic: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	fenced := fetchRequest(12, "edges", 0, 0, 1)
	fenced.Topics[0].Partitions[0].CurrentLeaderEpoch = 5
	if p := rc.do(fenced).(*kmsg.FetchResponse).Topics[0].Partitions[0]; p.ErrorCode != kerr.UnknownLeaderEpoch.Code {
		t.Fatalf("fetch with a future leader epoch: %v", kerr.ErrorForCode(p.ErrorCode))
	}

	session := fetchRequest(12, "edges", 0, 0, 1)
	session.SessionID = 42
	if r := rc.do(session).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("fetch in a session weir never made: %v", kerr.ErrorForCode(r.ErrorCode))
	}

	// MinBytes not reached: the wait ends it, with what there is.
	resp = rc.do(fetchRequest(12, "edges", 0, 10, 1<<20)).(*kmsg.FetchResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch with unreachable MinBytes: %+v", p)
	}
}

func TestAPIListOffsetsAndLeaderEpochs(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "lo", 1, nil)
	rc := dialRaw(t, n)
	for i := range 4 {
		ts := int64(1_000_000 + i*1000)
		if p := produceRaw(t, rc, 9, "lo", 0, testBatch(batchSpec{timestamp: ts, values: []string{"v"}})); p.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}
	for _, c := range []struct {
		version   int16
		timestamp int64
		offset    int64
	}{
		{1, -1, 4}, {1, -2, 0}, {2, 1_002_000, 2}, {6, 1_001_500, 2}, {6, 9_000_000, -1},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = c.version
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "lo"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = c.timestamp
		rp.CurrentLeaderEpoch = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := rc.do(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || p.Offset != c.offset {
			t.Fatalf("v%d timestamp %d: offset %d (%v), want %d", c.version, c.timestamp, p.Offset, kerr.ErrorForCode(p.ErrorCode), c.offset)
		}
	}

	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 4
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.CurrentLeaderEpoch = 0
	rp.LeaderEpoch = 0
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	p := rc.do(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
	if p.ErrorCode != 0 || p.LeaderEpoch != 0 || p.EndOffset != 4 {
		t.Fatalf("offset for leader epoch 0: epoch %d end %d (%v), want epoch 0 end 4", p.LeaderEpoch, p.EndOffset, kerr.ErrorForCode(p.ErrorCode))
	}
}

// TestAPIEveryAdvertisedVersionAnswers sends an empty request of every advertised key at its lowest
// and highest version: each gets a response on the same connection.
func TestAPIEveryAdvertisedVersionAnswers(t *testing.T) {
	n := startNode(t)
	rc := dialRaw(t, n)
	vreq := kmsg.NewPtrApiVersionsRequest()
	vreq.Version = 0
	for _, k := range rc.do(vreq).(*kmsg.ApiVersionsResponse).ApiKeys {
		for _, v := range []int16{k.MinVersion, k.MaxVersion} {
			req := kmsg.RequestForKey(k.ApiKey)
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = -1
			}
			rc.do(req)
		}
	}
}

func TestAPIFetchByteLimits(t *testing.T) {
	n := startNode(t)
	createTopic(t, newAdmin(t, n), "limits", 2, nil)
	rc := dialRaw(t, n)
	big := string(make([]byte, 2000))
	for p := range int32(2) {
		for range 3 {
			if r := produceRaw(t, rc, 9, "limits", p, testBatch(batchSpec{values: []string{big}})); r.ErrorCode != 0 {
				t.Fatalf("produce: %v", kerr.ErrorForCode(r.ErrorCode))
			}
		}
	}
	batchSize := len(testBatch(batchSpec{values: []string{big}}))
	req := fetchRequest(12, "limits", 0, 0, 1)
	second := req.Topics[0].Partitions[0]
	second.Partition = 1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, second)
	sizes := func() (int, int) {
		resp := rc.do(req).(*kmsg.FetchResponse)
		ps := resp.Topics[0].Partitions
		return len(ps[0].RecordBatches), len(ps[1].RecordBatches)
	}

	// A response limit below one batch still returns the first partition's first batch, whole,
	// and nothing of the second.
	req.MaxBytes = 10
	if a, b := sizes(); a != batchSize || b != 0 {
		t.Fatalf("MaxBytes 10: %d and %d bytes, want %d and 0", a, b, batchSize)
	}
	// Room for two batches in all: the first partition takes both, up to its own limit.
	req.MaxBytes = int32(2 * batchSize)
	if a, b := sizes(); a != 2*batchSize || b != 0 {
		t.Fatalf("MaxBytes of two batches: %d and %d bytes, want %d and 0", a, b, 2*batchSize)
	}
	// A per-partition limit of one batch leaves room for the second partition.
	req.MaxBytes = 1 << 20
	req.Topics[0].Partitions[0].PartitionMaxBytes = int32(batchSize)
	if a, b := sizes(); a != batchSize || b != 3*batchSize {
		t.Fatalf("partition limit of one batch: %d and %d bytes, want %d and %d", a, b, batchSize, 3*batchSize)
	}
}
