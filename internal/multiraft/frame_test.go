package multiraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendFrame appends a whole frame, as a link builds it (frameBuf).
func appendFrame(dst []byte, kind frameKind, payload []byte) []byte {
	f := frameBuf{buf: dst}
	f.frame(kind, payload)
	return f.buf
}

// msgsPayload is the payload of a msgs frame of es.
func msgsPayload(es ...Envelope) []byte {
	f := frameBuf{}
	for i := range es {
		f.msg(&es[i])
	}
	return f.buf
}

func beatsPayload(bs ...Beat) []byte {
	var b []byte
	for i := range bs {
		b = appendBeat(b, &bs[i])
	}
	return b
}

func TestFrameRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name    string
		kind    frameKind
		payload []byte
	}{
		{"msgs", frameMsgs, msgsPayload(Envelope{Group: 7, Data: []byte("abc")}, Envelope{Group: 1 << 40, Data: nil})},
		{"empty msgs", frameMsgs, nil},
		{"beats", frameBeats, beatsPayload(Beat{Group: 1, Term: 2, Commit: 3}, Beat{Group: 9, Term: 4, Resp: true})},
		{"ping", framePing, nil},
		{"pong", framePong, nil},
		{"app", frameApp, []byte(`{"api":"STREAM.INFO.S"}`)},
		{"empty app", frameApp, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := appendFrame([]byte("prefix"), c.kind, c.payload)[len("prefix"):]
			require.Len(t, f, frameHeaderLen+len(c.payload))
			kind, payload, n, err := decodeFrame(append(f, "next frame"...))
			require.NoError(t, err)
			require.Equal(t, c.kind, kind)
			require.Equal(t, len(f), n)
			require.Equal(t, string(c.payload), string(payload))
			kind, payload, _, _, err = readFrame(bytes.NewReader(f), nil)
			require.NoError(t, err)
			require.Equal(t, c.kind, kind)
			require.Equal(t, string(c.payload), string(payload))
		})
	}
	es, err := decodeMsgs(msgsPayload(Envelope{Group: 7, Data: []byte("abc")}, Envelope{Group: 1 << 40}), nil, nil)
	require.NoError(t, err)
	require.Equal(t, []Envelope{{Group: 7, Data: []byte("abc")}, {Group: 1 << 40, Data: []byte{}}}, es)
	bs, err := decodeBeats(beatsPayload(Beat{Group: 1, Term: 2, Commit: 3}, Beat{Group: 9, Term: 4, Resp: true}), nil)
	require.NoError(t, err)
	require.Equal(t, []Beat{{Group: 1, Term: 2, Commit: 3}, {Group: 9, Term: 4, Resp: true}}, bs)
}

func TestFrameRejects(t *testing.T) {
	good := appendFrame(nil, frameMsgs, msgsPayload(Envelope{Group: 7, Data: []byte("abc")}))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	withLen := func(n uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b, n)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short header", good[:5], io.ErrUnexpectedEOF},
		{"short body", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"zero length", withLen(0), ErrFrame},
		{"huge length", withLen(MaxFrameBytes + 1), ErrFrame},
		{"payload flipped", flip(len(good) - 1), ErrFrame},
		{"kind flipped", flip(8), ErrFrame},
		{"crc flipped", flip(5), ErrFrame},
		{"unknown kind", appendFrame(nil, frameKind(3), nil), ErrFrame},
		{"ping with payload", appendFrame(nil, framePing, []byte{1}), ErrFrame},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := decodeFrame(c.b)
			require.ErrorIs(t, err, c.want)
			_, _, _, _, err = readFrame(bytes.NewReader(c.b), nil)
			if errors.Is(c.want, io.ErrUnexpectedEOF) {
				require.Error(t, err) // io.EOF or io.ErrUnexpectedEOF
				return
			}
			require.ErrorIs(t, err, c.want)
		})
	}
	for _, c := range []struct {
		name    string
		payload []byte
	}{
		{"group varint cut", []byte{0x80}},
		{"length beyond payload", append(binary.AppendUvarint(nil, 7), 5, 'a')},
	} {
		t.Run("msgs "+c.name, func(t *testing.T) {
			_, err := decodeMsgs(c.payload, nil, nil)
			require.ErrorIs(t, err, ErrFrame)
		})
	}
	_, err := decodeBeats(make([]byte, beatLen+1), nil)
	require.ErrorIs(t, err, ErrFrame)
	bad := beatsPayload(Beat{Group: 1})
	bad[24] = 2
	_, err = decodeBeats(bad, nil)
	require.ErrorIs(t, err, ErrFrame)
}
