package multiraft

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame decoder and to the
// payload decoders: they never panic, refuse with ErrFrame (or want more
// bytes), and what they accept encodes back to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(appendFrame(nil, frameMsgs, msgsPayload(Envelope{Group: 7, Data: []byte("abc")}, Envelope{Group: 300})))
	f.Add(appendFrame(nil, frameBeats, beatsPayload(Beat{Group: 1, Term: 2, Commit: 3}, Beat{Group: 2, Term: 2, Resp: true})))
	f.Add(appendFrame(nil, framePing, nil))
	f.Add(appendFrame(appendFrame(nil, framePong, nil), frameMsgs, nil))
	f.Add(msgsPayload(Envelope{Group: 1, Data: []byte("x")}))
	f.Add(beatsPayload(Beat{Group: 5, Term: 6, Commit: 7}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		kind, payload, n, err := decodeFrame(data)
		_, _, _, rerr := readFrame(bytes.NewReader(data), nil)
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			if rerr == nil {
				t.Fatalf("readFrame read a frame decodeFrame found incomplete")
			}
		case err != nil:
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error not wrapping ErrFrame: %v", err)
			}
			if !errors.Is(rerr, ErrFrame) {
				t.Fatalf("readFrame: %v, decodeFrame: %v", rerr, err)
			}
		default:
			if rerr != nil {
				t.Fatalf("readFrame: %v on a frame decodeFrame took", rerr)
			}
			if again := appendFrame(nil, kind, payload); !bytes.Equal(again, data[:n]) {
				t.Fatalf("frame re-encodes differently:\n%x\n%x", again, data[:n])
			}
			checkPayload(t, kind, payload)
		}
		checkPayload(t, frameMsgs, data)
		checkPayload(t, frameBeats, data)
	})
}

// checkPayload decodes payload as kind and, if it is accepted, checks it
// encodes back to the same bytes.
func checkPayload(t *testing.T, kind frameKind, payload []byte) {
	var again []byte
	switch kind {
	case frameMsgs:
		es, err := decodeMsgs(payload, nil)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("msgs: error not wrapping ErrFrame: %v", err)
			}
			return
		}
		again = msgsPayload(es...)
	case frameBeats:
		bs, err := decodeBeats(payload, nil)
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("beats: error not wrapping ErrFrame: %v", err)
			}
			return
		}
		again = beatsPayload(bs...)
	default:
		return
	}
	// A uvarint may be written with redundant continuation bytes; the
	// encoder writes the shortest form, so compare what the bytes mean.
	if kind == frameMsgs {
		es1, _ := decodeMsgs(payload, nil)
		es2, err := decodeMsgs(again, nil)
		if err != nil || len(es1) != len(es2) {
			t.Fatalf("msgs re-encode: %v", err)
		}
		for i := range es1 {
			if es1[i].Group != es2[i].Group || !bytes.Equal(es1[i].Data, es2[i].Data) {
				t.Fatalf("msgs re-encode differs at %d", i)
			}
		}
		return
	}
	if !bytes.Equal(again, payload) {
		t.Fatalf("%s re-encodes differently", kind)
	}
}
