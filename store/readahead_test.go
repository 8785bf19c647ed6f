package store

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestReadAhead reads sealed segments in the ways consumers do and checks
// every payload, and that sequential readers cost a pread per block, not
// per record.
func TestReadAhead(t *testing.T) {
	const n = 4000
	open := func(t *testing.T) (*Stream, *storetest.FaultFS) {
		ffs := storetest.NewFaultFS(storetest.NewMemFS())
		ffs.Match = storetest.IsSegment
		s := mustOpen(t, Options{Dir: memDir, FS: ffs, SegmentBytes: 64 << 10})
		for i := uint64(1); i <= n; i++ {
			_, _, err := s.Append("ra.x", nil, payload(i, 100), 0)
			require.NoError(t, err)
		}
		return s, ffs
	}
	check := func(t *testing.T, m *Msg) {
		t.Helper()
		require.True(t, bytes.Equal(payload(m.Seq, 100), m.Data), "payload of %d", m.Seq)
		m.Release()
	}
	// Each block holds about 450 records of about 140 bytes: a sequential
	// read of n records needs tens of preads, not thousands.
	const sequentialBound = n / 50

	t.Run("one sequential reader", func(t *testing.T) {
		s, ffs := open(t)
		before := ffs.ReadAts()
		for seq := uint64(1); seq <= n; seq++ {
			m, err := s.Next(seq, "")
			require.NoError(t, err)
			require.Equal(t, seq, m.Seq)
			check(t, m)
		}
		require.Less(t, ffs.ReadAts()-before, int64(sequentialBound))
	})
	t.Run("two interleaved sequential readers", func(t *testing.T) {
		s, ffs := open(t)
		before := ffs.ReadAts()
		for i := uint64(0); i < n/2; i++ {
			for _, seq := range []uint64{1 + i, n/2 + 1 + i} {
				m, err := s.Next(seq, "")
				require.NoError(t, err)
				check(t, m)
			}
		}
		require.Less(t, ffs.ReadAts()-before, int64(sequentialBound))
	})
	t.Run("random gets", func(t *testing.T) {
		s, _ := open(t)
		r := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			check(t, mustGet(t, s, 1+r.Uint64N(n)))
		}
	})
	t.Run("a block of a purged segment is not served", func(t *testing.T) {
		s, _ := open(t)
		for seq := uint64(1); seq <= 100; seq++ {
			check(t, mustGet(t, s, seq))
		}
		_, err := s.Purge(PurgeRequest{})
		require.NoError(t, err)
		for i := uint64(n + 1); i <= 2*n; i++ {
			_, _, err := s.Append("ra.x", nil, payload(i, 100), 0)
			require.NoError(t, err)
		}
		for seq := uint64(n + 1); seq <= 2*n; seq++ {
			check(t, mustGet(t, s, seq))
		}
	})
}

// TestReadAheadLargeRecords: records past readAheadMaxRecord are read on
// their own, between small ones that are read ahead.
func TestReadAheadLargeRecords(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 256 << 10})
	size := func(seq uint64) int {
		if seq%7 == 0 {
			return readAheadMaxRecord + 100
		}
		return 50
	}
	for seq := uint64(1); seq <= 300; seq++ {
		_, _, err := s.Append("ra.y", nil, payload(seq, size(seq)), 0)
		require.NoError(t, err)
	}
	for seq := uint64(1); seq <= 300; seq++ {
		m := mustGet(t, s, seq)
		require.True(t, bytes.Equal(payload(seq, size(seq)), m.Data), "payload of %d", seq)
		m.Release()
	}
}
