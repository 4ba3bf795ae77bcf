package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is the key of ApiVersions, whose unsupported versions are answered (KIP-511) and whose
// response header never carries tagged fields.
const apiVersionsKey = 18

// produceKey is the key of Produce, the one request whose frame buffer a connection gives back to
// framePools: its handler keeps none of its bytes past its Reply (docs/storage.md).
const produceKey = 0

const (
	// sizeLen is the length of the int32 size prefix of every frame.
	sizeLen = 4
	// headerMinLen is the length of a request header with an empty client id: key, version,
	// correlation id and the client id's int16 length.
	headerMinLen = 10
	// frameEagerMax (8 MiB) is the largest frame whose buffer is allocated whole, or taken from
	// framePools, as soon as its size is read: ordinary produce requests fit, so they cost at most one
	// allocation and no copies.
	frameEagerMax = 8 << 20
	// frameChunk is the most a buffer for a larger frame holds before bytes have arrived to fill it: a
	// client that declares a huge frame and then stalls pins at most this much, and the buffer grows
	// fourfold as the declared bytes actually arrive.
	frameChunk = 64 << 10
	// reencodeMax is the largest request body whose trailing bytes are looked for by encoding the
	// decoded request again; a larger one is probed by a second decode, which does not copy its bytes.
	reencodeMax = 4 << 10
)

var (
	errNegativeSize       = errors.New("wire: negative frame size")
	errFrameTooLarge      = errors.New("wire: frame larger than the limit")
	errTruncatedFrame     = errors.New("wire: connection ended inside a frame")
	errMalformedHeader    = errors.New("wire: malformed request header")
	errUnknownKey         = errors.New("wire: unknown api key")
	errUnsupportedVersion = errors.New("wire: unsupported api version")
	errMalformedBody      = errors.New("wire: malformed request body")
	errTrailingBytes      = errors.New("wire: trailing bytes after the request body")
	errResponseTooLarge   = errors.New("wire: response larger than a frame can hold")
	errMalformedResponse  = errors.New("wire: malformed response")
	errWrongCorrelation   = errors.New("wire: response to another request")
)

// readFrame reads one size-prefixed frame from r and returns its bytes without the size. A size
// that is negative or above limit is refused before anything is allocated for it; a frame above
// frameEagerMax gets a buffer that grows as the declared bytes arrive rather than all at once. It returns io.EOF only when r ends
// cleanly between frames.
func readFrame(r io.Reader, limit int32) ([]byte, error) {
	frame, _, err := readFrameFrom(r, limit, nil)
	return frame, err
}

// readPooledFrame is readFrame for a server connection: a Produce frame whose size has a class
// (frameClass) is read into a buffer from framePools, which it also returns (nil otherwise) for the
// caller to give back with putFrameBuf once nothing refers to the frame. Any other request gets a
// buffer of its own, as readFrame gives it: its handler may keep its bytes. The api key is peeked
// before the buffer is chosen. On an error it holds no buffer.
func readPooledFrame(r *bufio.Reader, limit int32) ([]byte, *[]byte, error) {
	return readFrameFrom(r, limit, func(size int) bool {
		if frameClass(size) < 0 {
			return false
		}
		key, err := r.Peek(2)
		return err == nil && int16(binary.BigEndian.Uint16(key)) == produceKey
	})
}

// readFrameFrom is readFrame, taking the buffer from framePools when pooled (nil for never) says so
// of the frame's size.
func readFrameFrom(r io.Reader, limit int32, pooled func(size int) bool) ([]byte, *[]byte, error) {
	size, err := readSize(r)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case size < 0:
		return nil, nil, fmt.Errorf("%w: %d", errNegativeSize, size)
	case size > limit:
		return nil, nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, size, limit)
	}
	want := int(size)
	var pb *[]byte
	pool := pooled != nil && pooled(want)
	if pool {
		pb = getFrameBuf(want)
	}
	var buf []byte
	switch {
	case pb != nil:
		buf = *pb
	case want > frameEagerMax:
		buf = make([]byte, frameChunk)
	default:
		buf = make([]byte, want)
	}
	got := 0
	for {
		n, err := io.ReadFull(r, buf[got:])
		got += n
		if err != nil {
			putFrameBuf(pb)
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, nil, errTruncatedFrame
			}
			return nil, nil, err
		}
		if got == want {
			return buf, pb, nil
		}
		var grown []byte
		if n := min(4*len(buf), want); n == want && pool {
			pb = newFrameBuf(want)
			grown = *pb
		} else {
			grown = make([]byte, n)
		}
		copy(grown, buf)
		buf = grown
	}
}

// readSize reads the size prefix of a frame. A reader that reads single bytes (the connection's
// bufio.Reader) is read byte by byte, so that no buffer escapes to the heap for each frame.
func readSize(r io.Reader) (int32, error) {
	br, ok := r.(io.ByteReader)
	if !ok {
		var prefix [sizeLen]byte
		if n, err := io.ReadFull(r, prefix[:]); err != nil {
			if n > 0 && errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, errTruncatedFrame
			}
			return 0, err
		}
		return int32(binary.BigEndian.Uint32(prefix[:])), nil
	}
	var size uint32
	for i := range sizeLen {
		c, err := br.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, errTruncatedFrame
			}
			return 0, err
		}
		size = size<<8 | uint32(c)
	}
	return int32(size), nil
}

// decoder turns frames into Requests. It keeps what can be reused between the requests of one
// connection: the last client id, and for the trailing-bytes check a buffer for encodings and a
// scratch request per key.
type decoder struct {
	supports func(key, version int16) bool
	clientID *string
	encoded  []byte
	scratch  map[int16]kmsg.Request
}

// decode parses the header and body of one request frame. The returned Request has its header
// fields set whenever the header parsed, even when err is not nil, so that the caller can log them.
// Byte fields of the body (produce records) alias frame, which the caller must not reuse while the
// request can still be read.
func (d *decoder) decode(frame []byte) (*Request, error) {
	if len(frame) < headerMinLen {
		return nil, fmt.Errorf("%w: %d bytes", errMalformedHeader, len(frame))
	}
	req := &Request{
		Key:           int16(binary.BigEndian.Uint16(frame[0:])),
		Version:       int16(binary.BigEndian.Uint16(frame[2:])),
		CorrelationID: int32(binary.BigEndian.Uint32(frame[4:])),
	}
	idLen := int(int16(binary.BigEndian.Uint16(frame[8:])))
	rest := frame[headerMinLen:]
	switch {
	case idLen == -1:
	case idLen < -1 || idLen > len(rest):
		return req, fmt.Errorf("%w: client id length %d", errMalformedHeader, idLen)
	default:
		req.ClientID = d.internClientID(rest[:idLen])
		rest = rest[idLen:]
	}

	body := kmsg.RequestForKey(req.Key)
	if body == nil {
		return req, errUnknownKey
	}
	if req.Version < 0 || req.Version > body.MaxVersion() || !d.supports(req.Key, req.Version) {
		if req.Key == apiVersionsKey {
			req.Unsupported = true
			return req, nil
		}
		return req, errUnsupportedVersion
	}
	body.SetVersion(req.Version)
	if body.IsFlexible() {
		var err error
		if rest, err = skipTags(rest, errMalformedHeader); err != nil {
			return req, err
		}
	}
	if err := body.ReadFrom(rest); err != nil {
		return req, fmt.Errorf("%w: %w", errMalformedBody, err)
	}
	if d.hasTrailingBytes(body, rest) {
		return req, errTrailingBytes
	}
	req.Body = body
	return req, nil
}

// internClientID returns the client id as a string, reusing the previous request's when it is the
// same (it nearly always is on one connection).
func (d *decoder) internClientID(id []byte) *string {
	if d.clientID != nil && *d.clientID == string(id) {
		return d.clientID
	}
	s := string(id)
	d.clientID = &s
	return d.clientID
}

// unsafeReader is implemented by every kmsg request: it decodes without copying strings.
type unsafeReader interface {
	UnsafeReadFrom(src []byte) error
}

// hasTrailingBytes reports whether body, from which req decoded successfully, holds bytes after the
// request; kmsg ignores what follows a message.
//
// A small body is first encoded again: kmsg encodes every field in its shortest form and drops
// tagged fields that hold their default, so the encoding is never longer than the bytes the decode
// read, and an encoding as long as body proves that the decode read all of it. Otherwise (a longer
// encoding is impossible, a shorter one means trailing bytes or a non-shortest input) body minus its
// last byte is decoded again: decoding reads a prefix of its input and takes the same path on the
// same bytes, so it succeeds without the last byte exactly when that byte was never needed.
func (d *decoder) hasTrailingBytes(req kmsg.Request, body []byte) bool {
	if len(body) == 0 {
		return false
	}
	if len(body) <= reencodeMax {
		d.encoded = req.AppendTo(d.encoded[:0])
		if len(d.encoded) == len(body) {
			return false
		}
	}
	key := req.Key()
	probe := d.scratch[key]
	if probe == nil {
		probe = kmsg.RequestForKey(key)
		if d.scratch == nil {
			d.scratch = make(map[int16]kmsg.Request)
		}
		d.scratch[key] = probe
	}
	probe.SetVersion(req.GetVersion())
	truncated := body[:len(body)-1]
	if u, ok := probe.(unsafeReader); ok {
		return u.UnsafeReadFrom(truncated) == nil
	}
	return probe.ReadFrom(truncated) == nil
}

// skipTags skips the tagged fields of a flexible header (a v2 request header, a v1 response header);
// what it cannot parse is reported as malformed, which names the kind of header.
func skipTags(b []byte, malformed error) ([]byte, error) {
	n, b, err := readUvarint(b, malformed)
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		if _, b, err = readUvarint(b, malformed); err != nil {
			return nil, err
		}
		var size uint64
		if size, b, err = readUvarint(b, malformed); err != nil {
			return nil, err
		}
		if size > uint64(len(b)) {
			return nil, fmt.Errorf("%w: tagged field of %d bytes", malformed, size)
		}
		b = b[size:]
	}
	return b, nil
}

// readUvarint reads one unsigned varint of at most 32 bits, as Kafka encodes them.
func readUvarint(b []byte, malformed error) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 || v > math.MaxUint32 {
		return 0, nil, fmt.Errorf("%w: bad tagged fields", malformed)
	}
	return v, b[n:], nil
}

// appendResponse appends the frame of one response to dst: size, correlation id, the empty tagged
// fields of a v1 response header when the response is flexible (never for ApiVersions, whose response
// header is always v0), then the body.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	size := len(dst) - start - sizeLen
	if size > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: %d bytes", errResponseTooLarge, size)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// parseResponse parses one response frame as the answer to req, sent with correlationID: the
// correlation id, the tagged fields of a v1 response header when the response is flexible (never
// for ApiVersions, as in appendResponse), then the body at req's version. Byte fields of the
// response (fetched records) alias frame.
func parseResponse(frame []byte, req kmsg.Request, correlationID int32) (kmsg.Response, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", errMalformedResponse, len(frame))
	}
	if got := int32(binary.BigEndian.Uint32(frame)); got != correlationID {
		return nil, fmt.Errorf("%w: correlation id %d, want %d", errWrongCorrelation, got, correlationID)
	}
	body := frame[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		var err error
		if body, err = skipTags(body, errMalformedResponse); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformedResponse, err)
	}
	return resp, nil
}
