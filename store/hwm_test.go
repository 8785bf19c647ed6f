package store

import (
	"path"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLostLastSegment: the segment taking appends is lost (its file
// removed), the only one or after others. Open reports the sequences it
// held as lost, and new messages do not take them again: a consumer may
// have seen them. A last segment that is there but shorter (what an
// operating system crash leaves under SyncInterval) is not reported, and
// its lost tail's sequences are given again, as before.
func TestLostLastSegment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		segBytes int64
		lose     func(t *testing.T, f *fixture) (lost uint64)
		reported bool
	}{
		{"only segment removed", 1 << 20, func(t *testing.T, f *fixture) uint64 {
			segs := f.segments(nil)
			require.Len(t, segs, 1)
			require.NoError(t, f.fs.Remove(path.Join(memDir, segs[0])))
			for q := range f.want {
				delete(f.want, q)
			}
			return f.last
		}, true},
		{"last of several removed", 2048, func(t *testing.T, f *fixture) uint64 {
			segs := f.segments(nil)
			require.Greater(t, len(segs), 2)
			victim := segs[len(segs)-1]
			first, _ := parseSegmentName(victim, logExt)
			require.NoError(t, f.fs.Remove(path.Join(memDir, victim)))
			for q := first; q <= f.last; q++ {
				delete(f.want, q)
			}
			return f.last - first + 1
		}, true},
		{"last two removed", 2048, func(t *testing.T, f *fixture) uint64 {
			segs := f.segments(nil)
			require.Greater(t, len(segs), 2)
			first, _ := parseSegmentName(segs[len(segs)-2], logExt)
			for _, victim := range segs[len(segs)-2:] {
				require.NoError(t, f.fs.Remove(path.Join(memDir, victim)))
				_ = f.fs.Remove(path.Join(memDir, victim[:len(victim)-len(logExt)]+idxExt))
			}
			for q := first; q <= f.last; q++ {
				delete(f.want, q)
			}
			return f.last - first + 1
		}, true},
		{"last segment shorter", 2048, func(t *testing.T, f *fixture) uint64 {
			segs := f.segments(nil)
			name := path.Join(memDir, segs[len(segs)-1])
			b := f.fs.Contents(name)
			f.fs.SetContents(name, b[:lastRecordStart(t, b)])
			delete(f.want, f.last)
			f.last--
			return 0
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 60, 60, tc.segBytes)
			last := f.last
			lost := tc.lose(t, f)
			s := f.open(t, nil)
			f.check(t, s, f.last)
			rep := s.Recovery()
			if !tc.reported {
				require.Nil(t, rep.LostTail)
				require.Zero(t, rep.LostRecords())
				require.Equal(t, f.last, s.State().LastSeq, "given again")
				return
			}
			require.NotNil(t, rep.LostTail)
			require.Equal(t, MissingRange{First: last - lost + 1, Last: last}, *rep.LostTail)
			require.Equal(t, lost, rep.LostRecords())
			require.Equal(t, last, s.State().LastSeq)
			seq, _, err := s.Append("after", nil, []byte("x"), 0)
			require.NoError(t, err)
			require.Equal(t, last+1, seq, "no sequence used again")
			require.Equal(t, "x", string(mustGet(t, s, seq).Data))
			require.NoError(t, s.Close())

			s = f.open(t, nil)
			require.Nil(t, s.Recovery().LostTail, "the new segment is there")
			require.Equal(t, "x", string(mustGet(t, s, seq).Data))
			require.Equal(t, seq, s.State().LastSeq)
		})
	}
}

// TestMetaWithoutHighWater: a meta file written by a version without the
// high water slots (64 bytes) still gives its floor, and gains them.
func TestMetaWithoutHighWater(t *testing.T) {
	f := newFixture(t, 20, 20, 1<<20)
	s := f.open(t, nil)
	_, err := s.Purge(PurgeRequest{Seq: 5})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	name := path.Join(memDir, metaName)
	b := f.fs.Contents(name)
	require.Len(t, b, hwOffset+2*hwSlotSize)
	f.fs.SetContents(name, b[:hwOffset])
	for q := uint64(1); q < 5; q++ {
		delete(f.want, q)
	}
	s = f.open(t, nil)
	f.check(t, s, f.last)
	require.Nil(t, s.Recovery().LostTail)
	mustAppend(t, s, "a", "b")
	require.NoError(t, s.Close())
	require.Len(t, f.fs.Contents(name), hwOffset+2*hwSlotSize)
}
