package multiraft

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFrameBufVectored builds the same frames with and without parts
// left in place, and checks that both write the same bytes, which decode
// back into the envelopes with their checksums good.
func TestFrameBufVectored(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	piece := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for round := range 200 {
		var es []Envelope
		for range 1 + r.IntN(5) {
			e := Envelope{Group: r.Uint64() >> r.IntN(64)}
			if r.IntN(2) == 0 {
				e.Data = piece(r.IntN(3 * minPartBytes))
			} else {
				for range 1 + r.IntN(4) {
					e.Parts = append(e.Parts, piece(r.IntN(3*minPartBytes)))
				}
			}
			es = append(es, e)
		}
		build := func(vectored bool) ([]byte, int) {
			f := frameBuf{vectored: vectored}
			f.frame(framePing, nil)
			// The envelopes over two msgs frames, to check that each
			// frame's checksum covers only its own parts.
			half := len(es) / 2
			for _, group := range [][]Envelope{es[:half], es[half:]} {
				if len(group) == 0 {
					continue
				}
				f.begin(frameMsgs)
				for i := range group {
					f.msg(&group[i])
				}
				f.finish()
			}
			f.frame(frameApp, []byte("after"))
			var out bytes.Buffer
			vec := f.buffers()
			_, err := vec.WriteTo(&out)
			require.NoError(t, err)
			require.Equal(t, f.size(), out.Len())
			return out.Bytes(), len(f.ext)
		}
		flat, noParts := build(false)
		vec, _ := build(true)
		require.Zero(t, noParts)
		require.Equal(t, flat, vec, "round %d", round)

		var got []Envelope
		b := vec
		for len(b) > 0 {
			kind, payload, n, err := decodeFrame(b)
			require.NoError(t, err, "round %d", round)
			if kind == frameMsgs {
				got, err = decodeMsgs(payload, got, nil)
				require.NoError(t, err)
			}
			b = b[n:]
		}
		require.Len(t, got, len(es))
		for i := range es {
			require.Equal(t, es[i].Group, got[i].Group)
			require.Equal(t, es[i].Bytes(), got[i].Data, "round %d envelope %d", round, i)
		}
	}
}

// TestFrameBufVectoredKeepsLargeParts checks what is written in place: a
// part of minPartBytes or more is its own piece, a smaller one is copied.
func TestFrameBufVectoredKeepsLargeParts(t *testing.T) {
	large, small := make([]byte, minPartBytes), make([]byte, minPartBytes-1)
	f := frameBuf{vectored: true}
	f.begin(frameMsgs)
	f.msg(&Envelope{Group: 1, Parts: [][]byte{small, large, small}})
	f.finish()
	require.Len(t, f.ext, 1)
	vec := f.buffers()
	require.Len(t, vec, 3) // header and small part, the large part, the small part
	require.Same(t, &large[0], &vec[1][0])

	f.reset(1 << 20)
	require.Zero(t, f.size())
	require.Empty(t, f.ext)
	require.Empty(t, f.vec)
}
