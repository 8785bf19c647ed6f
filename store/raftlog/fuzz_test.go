package raftlog

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// FuzzDecodeRecord feeds arbitrary bytes to the record decoder: it must
// never panic, and whatever it accepts must re-encode to the same bytes,
// with a header that decodes alone, and an entry or checkpoint body that
// decodes in full.
func FuzzDecodeRecord(f *testing.F) {
	for _, b := range validRecords() {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, ok := decodeHeader(b, testSeed); ok {
			require.GreaterOrEqual(t, h.size, recHeaderSize)
			require.LessOrEqual(t, h.size, MaxRecordSize)
		}
		r, err := decodeRecord(b, testSeed)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, b, appendRecord(nil, testSeed, r.kind, r.group, r.index, r.term, r.body))
		h, ok := decodeHeader(b, testSeed)
		require.True(t, ok)
		require.Equal(t, len(b), h.size)
		switch r.kind {
		case kindEntry:
			e := entryOf(r)
			require.Equal(t, r.body, appendEntryBody(nil, e, e.Data, r.body[0]&entryStripped != 0))
		case kindCheckpoint:
			imgs, err := decodeCheckpoint(r.body)
			require.NoError(t, err)
			require.Equal(t, r.body, appendCheckpoint(nil, imgs))
		}
	})
}

// FuzzRecover opens a log whose last segment holds arbitrary bytes after
// a valid start: Open must not panic, and every group it recovers must
// answer raft.Storage's calls over its whole log.
func FuzzRecover(f *testing.F) {
	mem := storetest.NewMemFS()
	l := mustOpen(f, mem, Options{})
	g := l.Group(3)
	save(f, g, Update{Entries: ents(3, 1, 5, 1), HardState: hardState(1, 1, 3)})
	save(f, l.Group(4), Update{Entries: ents(4, 1, 2, 1)})
	save(f, g, Update{Entries: ents(3, 4, 6, 2)})
	require.NoError(f, l.Close())
	names := mem.Names(walDir, segExt)
	last := walDir + "/" + names[len(names)-1]
	good := mem.Contents(last)
	f.Add(good[len(good)/3:])
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, tail []byte) {
		fs := mem.Clone()
		fs.SetContents(last, append(append([]byte(nil), good[:len(good)/3]...), tail...))
		l, err := Open(withDefaults(fs, Options{}))
		if err != nil {
			return
		}
		defer func() { _ = l.Close() }()
		for _, id := range l.Groups() {
			g := l.Group(id)
			first, err := g.FirstIndex()
			require.NoError(t, err)
			last, err := g.LastIndex()
			require.NoError(t, err)
			if last >= first {
				es, err := g.Entries(first, last+1, 1<<30)
				require.NoError(t, err)
				require.Len(t, es, int(last-first+1))
				for _, e := range es {
					require.True(t, bytes.Equal(entryData(id, e.GetIndex(), e.GetTerm()), e.GetData()) || g.Damaged() != nil)
				}
			}
			_, _, err = g.InitialState()
			require.NoError(t, err)
		}
	})
}
