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
	f.Add(appendFrame(nil, frameApp, []byte("forwarded")))
	f.Add(appendFrame(appendFrame(nil, framePong, nil), frameMsgs, nil))
	f.Add(msgsPayload(Envelope{Group: 1, Data: []byte("x")}))
	f.Add(beatsPayload(Beat{Group: 5, Term: 6, Commit: 7}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		kind, payload, n, err := decodeFrame(data)
		_, _, _, _, rerr := readFrame(bytes.NewReader(data), nil)
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

// checkPayload decodes payload as kind and, if it is accepted, checks that
// it encodes back to the same content: the same bytes for beats (fixed
// width); for msgs, whose uvarints may carry redundant continuation
// bytes, the same envelopes.
func checkPayload(t *testing.T, kind frameKind, payload []byte) {
	var err error
	switch kind {
	case frameMsgs:
		var es, again []Envelope
		if es, err = decodeMsgs(payload, nil, nil); err == nil {
			again, err = decodeMsgs(msgsPayload(es...), nil, nil)
			if err != nil || len(again) != len(es) {
				t.Fatalf("msgs: re-encoded payload decodes to %d envelopes (%v), not %d", len(again), err, len(es))
			}
			for i := range es {
				if es[i].Group != again[i].Group || !bytes.Equal(es[i].Data, again[i].Data) {
					t.Fatalf("msgs: envelope %d changed in a round trip", i)
				}
			}
		}
	case frameBeats:
		var bs []Beat
		if bs, err = decodeBeats(payload, nil); err == nil && !bytes.Equal(beatsPayload(bs...), payload) {
			t.Fatalf("beats: re-encode differently")
		}
	}
	if err != nil && !errors.Is(err, ErrFrame) {
		t.Fatalf("%s: error not wrapping ErrFrame: %v", kind, err)
	}
}
