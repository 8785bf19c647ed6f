package multiraft

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// A raft link carries frames, in both directions:
//
//	+---------+-----------+--------+-----------------------+
//	| len u32 | crc32 u32 | kind u8| payload (len-1 bytes) |
//	+---------+-----------+--------+-----------------------+
//
// Integers are little-endian. len counts the kind byte and the payload, at
// most MaxFrameBytes; the CRC-32C covers the len field, the kind and the
// payload. The payload of each kind:
//
//	msgs   repeated | group uvarint | n uvarint | n bytes: proto-marshaled raftpb.Message |
//	beats  repeated | group u64 | term u64 | commit u64 | flags u8 |   (25 bytes; flag 1: response)
//	ping   empty    (the peer answers pong; any frame proves the link alive)
//	pong   empty
//	app    one message of the layer above, opaque here (TCP.SendApp)
//
// Kinds 3 (leader), 4 (snap) and 7 (stats) are reserved for the leader
// cache, snapshot streams and placement statistics of later phases; a
// decoder refuses them, and every unknown kind, as ErrFrame.
type frameKind uint8

const (
	frameMsgs  frameKind = 1
	frameBeats frameKind = 2
	framePing  frameKind = 5
	framePong  frameKind = 6
	frameApp   frameKind = 8
)

func (k frameKind) String() string {
	switch k {
	case frameMsgs:
		return "msgs"
	case frameBeats:
		return "beats"
	case framePing:
		return "ping"
	case framePong:
		return "pong"
	case frameApp:
		return "app"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

const (
	// MaxFrameBytes bounds a frame's len field: a reader refuses a larger
	// frame before allocating for it.
	MaxFrameBytes = 64 << 20

	frameHeaderLen = 9
	beatLen        = 25
	beatFlagResp   = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendBeat appends one beat to a beats payload.
func appendBeat(dst []byte, b *Beat) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, b.Group)
	dst = binary.LittleEndian.AppendUint64(dst, b.Term)
	dst = binary.LittleEndian.AppendUint64(dst, b.Commit)
	var flags byte
	if b.Resp {
		flags |= beatFlagResp
	}
	return append(dst, flags)
}

// decodeFrame decodes the frame at the start of b. It returns the frame's
// kind, its payload (aliasing b) and the bytes it takes; io.ErrUnexpectedEOF
// if b holds only part of a frame, and an error wrapping ErrFrame if it is
// not a frame.
func decodeFrame(b []byte) (kind frameKind, payload []byte, n int, err error) {
	if len(b) < frameHeaderLen {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	size, err := frameLen(b)
	if err != nil {
		return 0, nil, 0, err
	}
	n = 8 + size
	if len(b) < n {
		return 0, nil, 0, io.ErrUnexpectedEOF
	}
	kind, payload, err = checkFrame(b[:8], b[8:n])
	return kind, payload, n, err
}

// frameLen validates the len field of header.
func frameLen(header []byte) (int, error) {
	size := binary.LittleEndian.Uint32(header[0:4])
	if size == 0 || size > MaxFrameBytes {
		return 0, fmt.Errorf("%w: length %d", ErrFrame, size)
	}
	return int(size), nil
}

// checkFrame verifies the CRC of a frame, given its first 8 bytes and the
// rest (kind and payload), and checks its kind.
func checkFrame(head, body []byte) (frameKind, []byte, error) {
	crc := crc32.Update(crc32.Checksum(head[0:4], castagnoli), castagnoli, body)
	if crc != binary.LittleEndian.Uint32(head[4:8]) {
		return 0, nil, fmt.Errorf("%w: checksum mismatch", ErrFrame)
	}
	kind, payload := frameKind(body[0]), body[1:]
	switch kind {
	case frameMsgs, frameBeats, frameApp:
	case framePing, framePong:
		if len(payload) != 0 {
			return 0, nil, fmt.Errorf("%w: %s with a %d-byte payload", ErrFrame, kind, len(payload))
		}
	default:
		return 0, nil, fmt.Errorf("%w: unknown %s", ErrFrame, kind)
	}
	return kind, payload, nil
}

// readFrame reads one frame from r into buf (grown as needed) and returns
// its kind and payload, which alias the returned buffer, unless own is
// not nil: a msgs frame of ownFrameBytes or more is read into a buffer of
// its own from bufpool, own, and buf is returned as it was. The caller
// gives own back to bufpool once nothing aliases it (appdec.go).
func readFrame(r io.Reader, buf []byte) (kind frameKind, payload, next, own []byte, err error) {
	if cap(buf) < frameHeaderLen {
		buf = make([]byte, 0, 64<<10)
	}
	buf = buf[:frameHeaderLen]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, buf, nil, err
	}
	size, err := frameLen(buf)
	if err != nil {
		return 0, nil, buf, nil, err
	}
	into := buf
	switch {
	case frameKind(buf[8]) == frameMsgs && size >= ownFrameBytes:
		into = bufpool.Get(8 + size)[:8+size]
		own = into
		copy(into, buf)
	case cap(buf) < 8+size:
		into = make([]byte, 8+size)
		copy(into, buf)
		buf = into
	}
	into = into[:8+size]
	if _, err := io.ReadFull(r, into[frameHeaderLen:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, buf, own, err
	}
	kind, payload, err = checkFrame(into[:8], into[8:])
	return kind, payload, buf, own, err
}

// decodeMsgs appends the envelopes of a msgs payload to dst. Their Data
// alias payload, and so may their large entries once unmarshaled, if
// alias is not nil (Envelope.alias).
func decodeMsgs(payload []byte, dst []Envelope, alias *frameAlias) ([]Envelope, error) {
	for len(payload) > 0 {
		group, n := binary.Uvarint(payload)
		if n <= 0 {
			return dst, fmt.Errorf("%w: msgs: bad group", ErrFrame)
		}
		payload = payload[n:]
		size, n := binary.Uvarint(payload)
		if n <= 0 || size > uint64(len(payload)-n) {
			return dst, fmt.Errorf("%w: msgs: bad message length", ErrFrame)
		}
		payload = payload[n:]
		dst = append(dst, Envelope{Group: group, Data: payload[:size:size], alias: alias})
		payload = payload[size:]
	}
	return dst, nil
}

// decodeBeats appends the beats of a beats payload to dst.
func decodeBeats(payload []byte, dst []Beat) ([]Beat, error) {
	if len(payload)%beatLen != 0 {
		return dst, fmt.Errorf("%w: beats: %d bytes is not a whole number of beats", ErrFrame, len(payload))
	}
	for ; len(payload) > 0; payload = payload[beatLen:] {
		flags := payload[24]
		if flags&^beatFlagResp != 0 {
			return dst, fmt.Errorf("%w: beats: unknown flags %#x", ErrFrame, flags)
		}
		dst = append(dst, Beat{
			Group:  binary.LittleEndian.Uint64(payload[0:8]),
			Term:   binary.LittleEndian.Uint64(payload[8:16]),
			Commit: binary.LittleEndian.Uint64(payload[16:24]),
			Resp:   flags&beatFlagResp != 0,
		})
	}
	return dst, nil
}
