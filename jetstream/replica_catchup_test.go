package jetstream

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCatchupCodec: requests and answers read back as written; answers
// whose sequences are out of order or out of their range are refused.
func TestCatchupCodec(t *testing.T) {
	q := catchupRequest{account: "A", stream: "S", group: 7, index: 99, from: 3, dataFrom: 10, maxBytes: 1 << 20}
	got, err := decodeCatchupRequest(q.encode())
	require.NoError(t, err)
	require.Equal(t, q, got)

	ok := catchupAnswer{applied: 99, first: 3, last: 20, lastTS: 5, end: 13, present: []uint64{3, 5},
		msgs: []replicaMsg{{seq: 10, ts: 4, subj: "a", data: []byte("x")}, {seq: 12, ts: 5, subj: "b", hdr: []byte("h")}}}
	a, err := decodeCatchupAnswer(ok.encode())
	require.NoError(t, err)
	require.Equal(t, ok, a)

	for _, tc := range []struct {
		name string
		a    catchupAnswer
	}{
		{"out of order", catchupAnswer{first: 1, last: 9, end: 9, present: []uint64{4, 2}}},
		{"a message before a listed sequence", catchupAnswer{first: 1, last: 9, end: 9, present: []uint64{4},
			msgs: []replicaMsg{{seq: 3, subj: "a"}}}},
		{"past end", catchupAnswer{first: 1, last: 9, end: 5, msgs: []replicaMsg{{seq: 5, subj: "a"}}}},
		{"before first", catchupAnswer{first: 4, last: 9, end: 9, present: []uint64{3}}},
		{"past last", catchupAnswer{first: 1, last: 4, end: 9, msgs: []replicaMsg{{seq: 6, subj: "a"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeCatchupAnswer(tc.a.encode())
			require.ErrorIs(t, err, errBadOp)
		})
	}
	_, err = decodeCatchupRequest(append(q.encode(), 0))
	require.ErrorIs(t, err, errBadOp, "bytes after")
	_, err = decodeCatchupRequest([]byte{'{', '}'})
	require.ErrorIs(t, err, errBadOp, "not a catch-up request")
}

// FuzzDecodeCatchup: a peer's bytes (a request or an answer) are read or
// refused with errBadOp, never a panic, and what is read encodes back to
// the same.
func FuzzDecodeCatchup(f *testing.F) {
	f.Add((&catchupRequest{account: "$G", stream: "S", group: 2, index: 5, from: 1, dataFrom: 4, maxBytes: 64}).encode())
	f.Add((&catchupAnswer{first: 1, last: 4, end: 5, present: []uint64{1, 2},
		msgs: []replicaMsg{{seq: 4, ts: 1, subj: "s", data: []byte("d")}}}).encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		roundTrip(t, b, decodeCatchupRequest, (*catchupRequest).encode)
		roundTrip(t, b, decodeCatchupAnswer, (*catchupAnswer).encode)
	})
}

// roundTrip checks that decode refuses b with errBadOp, or reads
// something that encode writes back to the same.
func roundTrip[T any](t *testing.T, b []byte, decode func([]byte) (T, error), encode func(*T) []byte) {
	v, err := decode(b)
	if err != nil {
		require.ErrorIs(t, err, errBadOp)
		return
	}
	again, err := decode(encode(&v))
	require.NoError(t, err)
	require.Equal(t, v, again)
}
