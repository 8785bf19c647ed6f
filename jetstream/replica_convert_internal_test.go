package jetstream

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store"
)

// TestCopyMessages: a memory stream turned replicated gives its new store
// every message at its sequence, with its timestamp, and its first and
// last sequences, whatever gaps it has: before the first message (a
// purge), between messages (deletes) and after the last (the last ones
// deleted), or no message at all.
func TestCopyMessages(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      uint64   // messages appended, 1..n
		purge  uint64   // then purged below this sequence, if not 0
		remove []uint64 // then removed
	}{
		{"none", 0, 0, nil},
		{"some", 5, 0, nil},
		{"purged, empty", 5, 6, nil},
		{"purged, some left", 8, 4, nil},
		{"gaps between", 8, 0, []uint64{2, 5, 6}},
		{"the last ones deleted", 8, 0, []uint64{7, 8}},
		{"the first one deleted", 8, 0, []uint64{1}},
		{"everything deleted", 3, 0, []uint64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := func(replica bool) *store.Stream {
				s, err := store.Open(store.Options{Storage: store.MemoryStorage, LogClock: replica})
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			src := open(false)
			for seq := uint64(1); seq <= tc.n; seq++ {
				subj := fmt.Sprintf("s.%d", seq%3)
				require.NoError(t, src.AppendAt(seq, int64(seq)*1000, subj, []byte("NATS/1.0\r\n\r\n"), []byte(subj), 0))
			}
			if tc.purge > 0 {
				_, err := src.Purge(store.PurgeRequest{Seq: tc.purge})
				require.NoError(t, err)
			}
			for _, seq := range tc.remove {
				require.NoError(t, src.Remove(seq))
			}
			dst := open(true)
			require.NoError(t, copyMessages(dst, src))

			want, got := src.State(), dst.State()
			require.Equal(t, want.FirstSeq, got.FirstSeq, "first sequence")
			require.Equal(t, want.LastSeq, got.LastSeq, "last sequence")
			require.Equal(t, want.Msgs, got.Msgs, "messages")
			require.Equal(t, want.Bytes, got.Bytes, "bytes")
			for seq := uint64(1); seq <= want.LastSeq; seq++ {
				require.Equal(t, src.Has(seq), dst.Has(seq), "sequence %d", seq)
				if !src.Has(seq) {
					continue
				}
				a, err := src.Get(seq)
				require.NoError(t, err)
				b, err := dst.Get(seq)
				require.NoError(t, err)
				require.Equal(t, a.Subject, b.Subject)
				require.Equal(t, a.Timestamp, b.Timestamp)
				require.Equal(t, a.Header, b.Header)
				require.Equal(t, a.Data, b.Data)
			}
			// The next message goes where it would have gone.
			require.NoError(t, dst.AppendAt(want.LastSeq+1, int64(want.LastSeq+1)*1000, "s.x", nil, nil, 0))
		})
	}
}
