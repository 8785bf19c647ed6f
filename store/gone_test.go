package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// A segment file lost from the middle or the front of a stream is reported
// at start with the sequences it held; a segment removed because all its
// messages were is not (its marker says so, until the floor does).
func TestMissingMiddleSegmentIsReported(t *testing.T) {
	open := func(dir string) *Stream {
		s, err := Open(Options{Dir: dir, SegmentBytes: 4096, Logger: quiet})
		require.NoError(t, err)
		return s
	}
	fill := func(t *testing.T) (string, []string) {
		dir := t.TempDir()
		s := open(dir)
		for i := 0; i < 200; i++ {
			_, _, err := s.Append("a", nil, make([]byte, 200), 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		logs, err := filepath.Glob(filepath.Join(dir, "*"+logExt))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(logs), 4)
		return dir, logs
	}

	t.Run("lost", func(t *testing.T) {
		dir, logs := fill(t)
		victim := logs[1]
		first, _ := parseSegmentName(filepath.Base(victim), logExt)
		next, _ := parseSegmentName(filepath.Base(logs[2]), logExt)
		require.NoError(t, os.Remove(victim))
		s := open(dir)
		defer func() { _ = s.Close() }()
		require.Equal(t, []MissingRange{{First: first, Last: next - 1}}, s.Recovery().Missing)
	})

	t.Run("first lost", func(t *testing.T) {
		dir, logs := fill(t)
		next, _ := parseSegmentName(filepath.Base(logs[1]), logExt)
		require.NoError(t, os.Remove(logs[0]))
		s := open(dir)
		defer func() { _ = s.Close() }()
		require.Equal(t, []MissingRange{{First: 1, Last: next - 1}}, s.Recovery().Missing)
		require.Equal(t, next-1, s.Recovery().LostRecords())
	})

	t.Run("first removed by limits", func(t *testing.T) {
		// The floor that replaces a removed first segment is written at
		// the next sync round: a crash before it leaves only the marker
		// to say the segment went on purpose. Once the floor is on disk,
		// the marker goes.
		mem := storetest.NewMemFS()
		o := Options{Dir: memDir, FS: mem, SegmentBytes: 4096, MaxMsgs: 50, Durability: Durability{Interval: time.Hour}, Logger: quiet}
		s, err := Open(o)
		require.NoError(t, err)
		for i := 0; i < 200; i++ {
			_, _, err := s.Append("a", nil, make([]byte, 200), 0)
			require.NoError(t, err)
		}
		require.NotEmpty(t, mem.Names(memDir, goneExt), "the segments removed from the front are marked")
		o.FS = mem.Clone() // a crash now: the floor on disk is still 0
		crashed, err := Open(o)
		require.NoError(t, err)
		require.Empty(t, crashed.Recovery().Missing)
		require.NoError(t, crashed.Close())

		require.NoError(t, s.Close()) // a sync round: the floor is on disk
		require.Empty(t, mem.Names(memDir, goneExt), "markers below the floor are removed")
		o.FS = mem
		s, err = Open(o)
		require.NoError(t, err)
		defer func() { _ = s.Close() }()
		require.Empty(t, s.Recovery().Missing)
		require.Equal(t, uint64(50), s.State().Msgs)
	})

	t.Run("emptied", func(t *testing.T) {
		dir, logs := fill(t)
		first, _ := parseSegmentName(filepath.Base(logs[1]), logExt)
		next, _ := parseSegmentName(filepath.Base(logs[2]), logExt)
		s := open(dir)
		for seq := first; seq < next; seq++ {
			require.NoError(t, s.Delete(seq))
		}
		require.NoError(t, s.Close())
		_, err := os.Stat(logs[1])
		require.ErrorIs(t, err, os.ErrNotExist, "the emptied segment is removed")
		s = open(dir)
		defer func() { _ = s.Close() }()
		require.Empty(t, s.Recovery().Missing)
		require.Equal(t, uint64(200-(next-first)), s.State().Msgs)
	})

	t.Run("emptied, then an operating system crash", func(t *testing.T) {
		// The removal of the emptied segment may outlive the crash while
		// the delete records and a marker never fsynced do not: the marker
		// is fsynced first.
		mem := storetest.NewMemFS()
		o := Options{Dir: memDir, FS: mem, SegmentBytes: 4096, Durability: Durability{Interval: time.Hour}, Logger: quiet}
		s, err := Open(o)
		require.NoError(t, err)
		defer func() { _ = s.Close() }()
		for i := 0; i < 200; i++ {
			_, _, err := s.Append("a", nil, make([]byte, 200), 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.Sync(200))
		logs := mem.Names(memDir, logExt)
		require.GreaterOrEqual(t, len(logs), 4)
		first, _ := parseSegmentName(logs[1], logExt)
		next, _ := parseSegmentName(logs[2], logExt)
		for seq := first; seq < next; seq++ {
			require.NoError(t, s.Delete(seq))
		}
		require.NotContains(t, mem.Names(memDir, logExt), logs[1], "the emptied segment is removed")
		o.FS = mem.CrashClone()
		crashed, err := Open(o)
		require.NoError(t, err)
		defer func() { _ = crashed.Close() }()
		require.Empty(t, crashed.Recovery().Missing)
	})

	t.Run("cut short, with deletes past the cut", func(t *testing.T) {
		// Deletes of records in a sealed segment's unreadable rest are no
		// Skip (segment.skipTo): the whole rest is reported lost.
		dir, logs := fill(t)
		first, _ := parseSegmentName(filepath.Base(logs[1]), logExt)
		next, _ := parseSegmentName(filepath.Base(logs[2]), logExt)
		s := open(dir)
		require.NoError(t, s.Delete(next-1)) // the segment's last record
		require.NoError(t, s.Close())
		info, err := os.Stat(logs[1])
		require.NoError(t, err)
		require.NoError(t, os.Truncate(logs[1], info.Size()/2))
		require.NoError(t, os.Remove(logs[1][:len(logs[1])-len(logExt)]+idxExt))
		s = open(dir)
		defer func() { _ = s.Close() }()
		rep := s.Recovery()
		require.Empty(t, rep.Missing)
		require.Len(t, rep.Corrupt, 1)
		require.Greater(t, rep.Corrupt[0].FirstLost, first)
		require.Equal(t, next-rep.Corrupt[0].FirstLost, rep.Corrupt[0].Lost, "up to the next segment")
		require.Equal(t, rep.Corrupt[0].Lost, rep.LostRecords())
	})

	t.Run("a skip into an empty last segment", func(t *testing.T) {
		// A crash left the last segment created and empty; a Skip is
		// recorded there, and the next append drops that segment for one
		// named after the skip: its marker covers the skipped sequences.
		dir := t.TempDir()
		s := open(dir)
		require.NoError(t, s.AppendAt(1, 1, "a", nil, []byte("x"), 0))
		require.NoError(t, s.Close())
		require.NoError(t, os.WriteFile(filepath.Join(dir, segmentBase(2)+logExt), nil, 0o644))
		s = open(dir)
		require.NoError(t, s.Skip(7, 7))
		require.NoError(t, s.AppendAt(8, 8, "a", nil, []byte("y"), 0))
		require.NoError(t, s.Close())
		s = open(dir)
		defer func() { _ = s.Close() }()
		require.Empty(t, s.Recovery().Missing)
		require.Equal(t, uint64(8), s.State().LastSeq)
		require.Equal(t, uint64(2), s.State().Msgs)
	})
}
