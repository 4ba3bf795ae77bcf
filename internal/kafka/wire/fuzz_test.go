package wire

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadRequest reads a stream of frames and decodes each as a request, as a connection does. The
// seed corpus in testdata/fuzz/FuzzReadRequest holds valid frames of several keys and header
// versions, the unsupported ApiVersions case and a few malformed ones.
func FuzzReadRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		d := decoder{supports: func(int16, int16) bool { return true }}
		for {
			frame, err := readFrame(r, 1<<20)
			if err != nil {
				return
			}
			req, err := d.decode(frame)
			if err != nil {
				continue
			}
			if req.Unsupported {
				if req.Key != apiVersionsKey || req.Body != nil {
					t.Fatalf("unsupported request %+v", req)
				}
				continue
			}
			if req.Body == nil || req.Body.Key() != req.Key || req.Body.GetVersion() != req.Version {
				t.Fatalf("request %+v with body %v", req, req.Body)
			}
			again := kmsg.RequestForKey(req.Key)
			again.SetVersion(req.Version)
			if err := again.ReadFrom(req.Body.AppendTo(nil)); err != nil {
				t.Fatalf("key %d v%d does not decode after re-encoding: %v", req.Key, req.Version, err)
			}
		}
	})
}

// FuzzReadResponse reads a frame and parses it as the response to a request of key at version, as a
// Client does, with correlation id 1. A response that parses must encode and parse again. The seeds
// are responses to what weir's follower sends (Fetch v12 with records, OffsetForLeaderEpoch v4),
// ApiVersions at a flexible version, a response header with a tagged field, and a few malformed ones.
func FuzzReadResponse(f *testing.F) {
	fetch := kmsg.NewPtrFetchResponse()
	fetch.Version = 12
	ft := kmsg.NewFetchResponseTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchResponseTopicPartition()
	fp.HighWatermark = 3
	fp.DivergingEpoch.Epoch, fp.DivergingEpoch.EndOffset = 1, 2
	fp.RecordBatches = []byte("batch bytes")
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	epoch := kmsg.NewPtrOffsetForLeaderEpochResponse()
	epoch.Version = 4
	et := kmsg.NewOffsetForLeaderEpochResponseTopic()
	et.Topic = "t"
	et.Partitions = append(et.Partitions, kmsg.NewOffsetForLeaderEpochResponseTopicPartition())
	epoch.Topics = append(epoch.Topics, et)
	versions := kmsg.NewPtrApiVersionsResponse()
	versions.Version = 3
	versions.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MinVersion: 4, MaxVersion: 12}}
	for _, resp := range []kmsg.Response{fetch, epoch, versions} {
		b, err := appendResponse(nil, 1, resp)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(resp.Key(), resp.GetVersion(), b)
		f.Add(resp.Key(), resp.GetVersion(), b[:len(b)-1])
	}
	f.Add(int16(3), int16(12), []byte("\x00\x00\x00\x15\x00\x00\x00\x01\x01\x00\x02hi\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x01\x00"))
	f.Add(int16(3), int16(12), []byte("\x00\x00\x00\x07\x00\x00\x00\x01\x01\x00\x7f"))
	f.Add(int16(1), int16(12), []byte("\x00\x00\x00\x04\x00\x00\x00\x02"))
	f.Add(int16(1), int16(12), []byte("\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, key, version int16, data []byte) {
		req := kmsg.RequestForKey(key)
		if req == nil || version < 0 || version > req.MaxVersion() {
			return
		}
		req.SetVersion(version)
		frame, err := readFrame(bytes.NewReader(data), 1<<20)
		if err != nil {
			return
		}
		resp, err := parseResponse(frame, req, 1)
		if err != nil {
			return
		}
		if resp.Key() != key || resp.GetVersion() != version {
			t.Fatalf("key %d v%d parsed as key %d v%d", key, version, resp.Key(), resp.GetVersion())
		}
		again, err := appendResponse(nil, 1, resp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseResponse(again[sizeLen:], req, 1); err != nil {
			t.Fatalf("key %d v%d does not parse after re-encoding: %v", key, version, err)
		}
	})
}
