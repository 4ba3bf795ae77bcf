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
