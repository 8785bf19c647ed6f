package store

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// opener opens a fresh stream of one storage kind with the given options.
type opener func(t *testing.T, o Options) *Stream

var storages = []struct {
	name string
	open opener
}{
	{"file", func(t *testing.T, o Options) *Stream {
		o.Storage = FileStorage
		if o.Dir == "" {
			o.Dir = t.TempDir()
		}
		return mustOpen(t, o)
	}},
	{"file-handlecache", func(t *testing.T, o Options) *Stream {
		// At most one descriptor: every file is closed and reopened
		// between uses (handlecache.go).
		o.Storage, o.FS, o.SegmentBytes = FileStorage, tinyHandleCache(OSFS), 4096
		if o.Dir == "" {
			o.Dir = t.TempDir()
		}
		return mustOpen(t, o)
	}},
	{"memory", func(t *testing.T, o Options) *Stream {
		o.Storage = MemoryStorage
		return mustOpen(t, o)
	}},
}

// TestConformance runs every behaviour of the Stream API against both
// storage kinds: they must not differ.
func TestConformance(t *testing.T) {
	cases := []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		{"AppendGet", testAppendGet},
		{"AppendAt", testAppendAt},
		{"Skip", testSkip},
		{"AppendAtLimits", testAppendAtLimits},
		{"LogClock", testLogClock},
		{"KeepBound", testKeepBound},
		{"InvalidInput", testInvalidInput},
		{"WildcardTokensAreLiteral", testWildcardTokensAreLiteral},
		{"Limits", testLimits},
		{"PerSubjectWithTotals", testPerSubjectWithTotals},
		{"MaxAge", testMaxAge},
		{"Delete", testDelete},
		{"Remove", testRemove},
		{"Purge", testPurge},
		{"PurgeMovesSequenceOn", testPurgeMovesSequenceOn},
		{"Next", testNext},
		{"NextManySubjects", testNextManySubjects},
		{"NumPending", testNumPending},
		{"LastBySubject", testLastBySubject},
		{"SeqAtOrAfterTime", testSeqAtOrAfterTime},
		{"State", testState},
		{"Subjects", testSubjects},
		{"UpdateConfig", testUpdateConfig},
		{"Closed", testClosed},
	}
	for _, st := range storages {
		t.Run(st.name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.fn(t, st.open) })
			}
		})
	}
}

func testAppendGet(t *testing.T, open opener) {
	clock := newFakeClock()
	s := open(t, Options{Now: clock.Now})
	msgs := []struct {
		subj      string
		hdr, data []byte
	}{
		{"a", nil, []byte("one")},
		{"a.b", []byte("NATS/1.0\r\nK: V\r\n\r\n"), []byte("two")},
		{"c.d.e", nil, nil},
		{"a", []byte("NATS/1.0\r\n\r\n"), bytes.Repeat([]byte("x"), 10000)},
		// Around the size past which the payload is written from the
		// caller's buffer and read into a pooled one.
		{"big", nil, payload(5, inlineDataMax)},
		{"big", []byte("NATS/1.0\r\nK: V\r\n\r\n"), payload(6, inlineDataMax+1)},
		{"big.1m", nil, payload(7, 1<<20+3)},
	}
	var lastTS int64
	for i, m := range msgs {
		if i == 2 {
			clock.Advance(-time.Second) // a clock step back must not reorder timestamps
		} else {
			clock.Advance(time.Millisecond)
		}
		seq, ts, err := s.Append(m.subj, m.hdr, m.data, 0)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), seq)
		require.GreaterOrEqual(t, ts, lastTS)
		lastTS = ts
	}
	for i, m := range msgs {
		got, err := s.Get(uint64(i + 1))
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), got.Seq)
		require.Equal(t, m.subj, got.Subject)
		require.Equal(t, m.hdr, got.Header)
		require.Equal(t, m.data, got.Data)
		require.Equal(t, uint64(recordSize(m.subj, m.hdr, m.data)), got.Size())
		got.Release()
		require.Nil(t, got.Data, "released")
	}
	for i, m := range msgs { // again, into buffers given back by Release
		got, err := s.Get(uint64(i + 1))
		require.NoError(t, err)
		require.Equal(t, m.hdr, got.Header)
		require.Equal(t, m.data, got.Data)
	}
	// The caller owns returned bytes.
	got, err := s.Get(1)
	require.NoError(t, err)
	got.Data[0] = 'X'
	again, err := s.Get(1)
	require.NoError(t, err)
	require.Equal(t, []byte("one"), again.Data)

	for _, seq := range []uint64{0, uint64(len(msgs) + 1), 1 << 40} {
		_, err := s.Get(seq)
		require.ErrorIs(t, err, ErrNotFound, "seq %d", seq)
	}
}

// Wildcard-looking tokens are literal in a stored subject, as in a publish:
// a filter's wildcards match them, a literal filter only itself.
func testWildcardTokensAreLiteral(t *testing.T, open opener) {
	s := open(t, Options{})
	for _, subj := range []string{"w.*", "w.>", "w.#"} {
		_, _, err := s.Append(subj, nil, nil, 0)
		require.NoError(t, err, "subject %q", subj)
	}
	m, err := s.Next(1, "w.*")
	require.NoError(t, err)
	require.Equal(t, "w.*", m.Subject)
	m.Release()
	_, err = s.LastBySubject("w.x")
	require.ErrorIs(t, err, ErrNotFound)
	m, err = s.LastBySubject("w.>")
	require.NoError(t, err)
	require.Equal(t, "w.#", m.Subject)
	m.Release()
}

func testInvalidInput(t *testing.T, open opener) {
	s := open(t, Options{MaxMsgSize: 100})
	for _, subj := range []string{"", "a..b", "a b", string(make([]byte, 70000))} {
		_, _, err := s.Append(subj, nil, nil, 0)
		require.ErrorIs(t, err, ErrInvalidSubject, "subject %q", subj)
	}
	_, _, err := s.Append("a", nil, make([]byte, 100), 0)
	require.ErrorIs(t, err, ErrMaxMsgSize)
	_, _, err = s.Append("a", make([]byte, 50), make([]byte, 50), 0)
	require.ErrorIs(t, err, ErrMaxMsgSize) // 1 + 50 + 50 = 101 bytes
	_, _, err = s.Append("a", make([]byte, 50), make([]byte, 49), 0)
	require.NoError(t, err) // exactly 100
	_, err = s.Next(1, "a.>.b")
	require.ErrorIs(t, err, ErrInvalidFilter)
	_, err = s.Purge(PurgeRequest{Seq: 2, Keep: 1})
	require.ErrorIs(t, err, ErrInvalidPurge)
	_, err = s.Purge(PurgeRequest{Subject: "a..b"})
	require.ErrorIs(t, err, ErrInvalidFilter)
	require.Equal(t, uint64(1), s.State().LastSeq, "refused messages consume no sequence")

	_, err = Open(Options{Storage: MemoryStorage, MaxMsgs: -1})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = Open(Options{Storage: FileStorage})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// testLimits checks every limit under both discard policies: which
// messages remain and which appends fail.
func testLimits(t *testing.T, open opener) {
	size := uint64(recordSize("s.1", nil, []byte("0123456789"))) // every message below has this size
	cases := []struct {
		name    string
		opts    Options
		appends []string // subjects, each with 10 bytes of data
		wantErr map[int]error
		want    []uint64 // stored sequences afterwards
	}{
		{name: "MaxMsgs/old", opts: Options{MaxMsgs: 3},
			appends: []string{"s.1", "s.2", "s.3", "s.4", "s.5"}, want: []uint64{3, 4, 5}},
		{name: "MaxMsgs/new", opts: Options{MaxMsgs: 3, Discard: DiscardNew},
			appends: []string{"s.1", "s.2", "s.3", "s.4", "s.5"},
			wantErr: map[int]error{3: ErrMaxMsgs, 4: ErrMaxMsgs}, want: []uint64{1, 2, 3}},
		{name: "MaxBytes/old", opts: Options{MaxBytes: int64(3*size + size/2)},
			appends: []string{"s.1", "s.2", "s.3", "s.4", "s.5"}, want: []uint64{3, 4, 5}},
		{name: "MaxBytes/new", opts: Options{MaxBytes: int64(3*size + size/2), Discard: DiscardNew},
			appends: []string{"s.1", "s.2", "s.3", "s.4", "s.5"},
			wantErr: map[int]error{3: ErrMaxBytes, 4: ErrMaxBytes}, want: []uint64{1, 2, 3}},
		{name: "MaxBytes/larger than limit/old", opts: Options{MaxBytes: int64(size - 1)},
			appends: []string{"s.1"}, wantErr: map[int]error{0: ErrMaxBytes}},
		{name: "MaxMsgsPerSubject/old", opts: Options{MaxMsgsPerSubject: 2},
			appends: []string{"s.1", "s.2", "s.1", "s.1", "s.2", "s.3", "s.2"}, want: []uint64{3, 4, 5, 6, 7}},
		// Under DiscardNew alone the per-subject limit still removes the
		// subject's oldest (as nats-server does).
		{name: "MaxMsgsPerSubject/new", opts: Options{MaxMsgsPerSubject: 2, Discard: DiscardNew},
			appends: []string{"s.1", "s.2", "s.1", "s.1", "s.2", "s.3", "s.2"}, want: []uint64{3, 4, 5, 6, 7}},
		{name: "MaxMsgsPerSubject/new per subject", opts: Options{MaxMsgsPerSubject: 2, Discard: DiscardNew, DiscardNewPerSubject: true},
			appends: []string{"s.1", "s.2", "s.1", "s.1", "s.2", "s.3", "s.2"},
			wantErr: map[int]error{3: ErrMaxMsgsPerSubject, 6: ErrMaxMsgsPerSubject}, want: []uint64{1, 2, 3, 4, 5}},
		{name: "MaxMsgSize", opts: Options{MaxMsgSize: 13},
			appends: []string{"s.1", "s.22", "s.3"}, wantErr: map[int]error{1: ErrMaxMsgSize}, want: []uint64{1, 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, c.opts)
			for i, subj := range c.appends {
				_, _, err := s.Append(subj, nil, []byte("0123456789"), 0)
				if want := c.wantErr[i]; want != nil {
					require.ErrorIs(t, err, want, "append %d", i)
				} else {
					require.NoError(t, err, "append %d", i)
				}
			}
			require.Equal(t, c.want, liveSeqs(t, s))
			st := s.State()
			require.Equal(t, uint64(len(c.want)), st.Msgs)
			require.Equal(t, uint64(len(c.want))*size, st.Bytes)
		})
	}
}

func testPerSubjectWithTotals(t *testing.T, open opener) {
	// KV-style: one value per key, plus an overall cap.
	s := open(t, Options{MaxMsgsPerSubject: 1, MaxMsgs: 3})
	for _, k := range []string{"kv.a", "kv.b", "kv.a", "kv.c", "kv.d", "kv.b"} {
		mustAppend(t, s, k, k)
	}
	require.Equal(t, []uint64{4, 5, 6}, liveSeqs(t, s))
	require.Equal(t, map[string]uint64{"kv.c": 1, "kv.d": 1, "kv.b": 1}, s.Subjects(""))
	st := s.State()
	require.Equal(t, uint64(4), st.FirstSeq)
	require.Equal(t, 0, st.NumDeleted)
}

func testMaxAge(t *testing.T, open opener) {
	clock := newFakeClock()
	s := open(t, Options{MaxAge: 10 * time.Second, Now: clock.Now})
	mustAppend(t, s, "a", "1") // t=0
	clock.Advance(4 * time.Second)
	mustAppend(t, s, "b", "2") // t=4
	clock.Advance(4 * time.Second)
	mustAppend(t, s, "a", "3") // t=8
	clock.Advance(3 * time.Second)
	// t=11: message 1 has expired.
	_, err := s.Get(1)
	require.ErrorIs(t, err, ErrNotFound)
	m, err := s.Next(0, "a")
	require.NoError(t, err)
	require.Equal(t, uint64(3), m.Seq)
	require.Equal(t, uint64(2), s.State().FirstSeq)
	require.Equal(t, uint64(2), s.SeqAtOrAfterTime(time.Time{}))

	clock.Advance(4 * time.Second) // t=15: message 2 too
	_, err = s.Get(2)
	require.ErrorIs(t, err, ErrNotFound)
	st := s.State()
	require.Equal(t, uint64(1), st.Msgs)
	require.Equal(t, 1, st.NumSubjects)

	clock.Advance(10 * time.Second) // all gone
	_, err = s.LastBySubject("a")
	require.ErrorIs(t, err, ErrNotFound)
	st = s.State()
	require.Equal(t, uint64(0), st.Msgs)
	require.Equal(t, uint64(4), st.FirstSeq)
	require.Equal(t, uint64(3), st.LastSeq)
	// Expired messages do not count against DiscardNew limits.
	o := s.Options()
	o.MaxMsgs, o.Discard = 1, DiscardNew
	require.NoError(t, s.UpdateConfig(o))
	require.Equal(t, uint64(4), mustAppend(t, s, "a", "4"))
	clock.Advance(11 * time.Second)
	require.Equal(t, uint64(5), mustAppend(t, s, "a", "5"))
}

func testDelete(t *testing.T, open opener) { testRemoval(t, open, (*Stream).Delete) }

// testRemove: Remove removes as Delete does; only its persistence differs.
func testRemove(t *testing.T, open opener) { testRemoval(t, open, (*Stream).Remove) }

func testRemoval(t *testing.T, open opener, remove func(*Stream, uint64) error) {
	s := open(t, Options{})
	for i := 0; i < 5; i++ {
		mustAppend(t, s, fmt.Sprintf("d.%d", i%2), "x")
	}
	cases := []struct {
		seq     uint64
		wantErr error
		live    []uint64
		first   uint64
		deleted int
	}{
		{seq: 3, live: []uint64{1, 2, 4, 5}, first: 1, deleted: 1},
		{seq: 3, wantErr: ErrNotFound, live: []uint64{1, 2, 4, 5}, first: 1, deleted: 1},
		{seq: 1, live: []uint64{2, 4, 5}, first: 2, deleted: 1},
		{seq: 2, live: []uint64{4, 5}, first: 4, deleted: 0},
		{seq: 5, live: []uint64{4}, first: 4, deleted: 1}, // LastSeq stays 5
		{seq: 9, wantErr: ErrNotFound, live: []uint64{4}, first: 4, deleted: 1},
		{seq: 0, wantErr: ErrNotFound, live: []uint64{4}, first: 4, deleted: 1},
		{seq: 4, live: nil, first: 6},
	}
	for _, c := range cases {
		err := remove(s, c.seq)
		if c.wantErr != nil {
			require.ErrorIs(t, err, c.wantErr)
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, c.live, liveSeqs(t, s), "after deleting %d", c.seq)
		for seq := uint64(0); seq <= 7; seq++ {
			require.Equal(t, slices.Contains(c.live, seq), s.Has(seq), "Has(%d) after deleting %d", seq, c.seq)
		}
		st := s.State()
		require.Equal(t, c.first, st.FirstSeq, "after deleting %d", c.seq)
		require.Equal(t, uint64(5), st.LastSeq)
		require.Equal(t, c.deleted, st.NumDeleted, "after deleting %d", c.seq)
		gaps := s.Deleted(100)
		require.Len(t, gaps, c.deleted, "after deleting %d", c.seq)
		for _, g := range gaps {
			require.NotContains(t, c.live, g)
			require.True(t, g >= c.first && g <= st.LastSeq, "gap %d outside %d..%d", g, c.first, st.LastSeq)
		}
		if c.deleted > 0 {
			require.Equal(t, gaps[:1], s.Deleted(1), "bounded by max")
		}
	}
	require.Equal(t, uint64(6), mustAppend(t, s, "d.0", "y"))
}

// purgeFixture appends, in order: 1 a.x, 2 a.y, 3 b.x, 4 a.x, 5 b.y.z,
// 6 a.y, 7 c, 8 a.x.
func purgeFixture(t *testing.T, open opener) *Stream {
	s := open(t, Options{})
	for _, subj := range []string{"a.x", "a.y", "b.x", "a.x", "b.y.z", "a.y", "c", "a.x"} {
		mustAppend(t, s, subj, subj)
	}
	return s
}

func testPurge(t *testing.T, open opener) {
	cases := []struct {
		name   string
		req    PurgeRequest
		purged uint64
		live   []uint64
		first  uint64
	}{
		{"all", PurgeRequest{}, 8, nil, 9},
		{"all by >", PurgeRequest{Subject: ">"}, 8, nil, 9},
		{"all by #", PurgeRequest{Subject: "#"}, 8, nil, 9},
		{"literal", PurgeRequest{Subject: "a.x"}, 3, []uint64{2, 3, 5, 6, 7}, 2},
		{"star", PurgeRequest{Subject: "a.*"}, 5, []uint64{3, 5, 7}, 3},
		{"gt", PurgeRequest{Subject: "b.>"}, 2, []uint64{1, 2, 4, 6, 7, 8}, 1},
		{"hash at end", PurgeRequest{Subject: "b.#"}, 2, []uint64{1, 2, 4, 6, 7, 8}, 1},
		{"hash matches zero tokens", PurgeRequest{Subject: "c.#"}, 1, []uint64{1, 2, 3, 4, 5, 6, 8}, 1},
		{"hash in front", PurgeRequest{Subject: "#.x"}, 4, []uint64{2, 5, 6, 7}, 2},
		{"no match", PurgeRequest{Subject: "zzz"}, 0, seqRange(1, 8), 1},
		{"seq", PurgeRequest{Seq: 4}, 3, seqRange(4, 8), 4},
		{"seq 1", PurgeRequest{Seq: 1}, 0, seqRange(1, 8), 1},
		{"seq last+1", PurgeRequest{Seq: 9}, 8, nil, 9},
		{"subject and seq", PurgeRequest{Subject: "a.x", Seq: 8}, 2, []uint64{2, 3, 5, 6, 7, 8}, 2},
		{"keep", PurgeRequest{Keep: 3}, 5, []uint64{6, 7, 8}, 6},
		{"keep all", PurgeRequest{Keep: 8}, 0, seqRange(1, 8), 1},
		{"keep more", PurgeRequest{Keep: 100}, 0, seqRange(1, 8), 1},
		{"subject and keep", PurgeRequest{Subject: "a.*", Keep: 2}, 3, []uint64{3, 5, 6, 7, 8}, 3},
		{"wildcard and keep", PurgeRequest{Subject: "#.x", Keep: 1}, 3, []uint64{2, 5, 6, 7, 8}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := purgeFixture(t, open)
			n, err := s.Purge(c.req)
			require.NoError(t, err)
			require.Equal(t, c.purged, n)
			require.Equal(t, c.live, liveSeqs(t, s))
			st := s.State()
			require.Equal(t, c.first, st.FirstSeq)
			require.Equal(t, uint64(8), st.LastSeq)
			require.Equal(t, uint64(len(c.live)), st.Msgs)
			require.Equal(t, uint64(9), mustAppend(t, s, "a.x", "after"))
		})
	}
}

func testPurgeMovesSequenceOn(t *testing.T, open opener) {
	s := purgeFixture(t, open)
	n, err := s.Purge(PurgeRequest{Seq: 100})
	require.NoError(t, err)
	require.Equal(t, uint64(8), n)
	st := s.State()
	require.Equal(t, uint64(100), st.FirstSeq)
	require.Equal(t, uint64(99), st.LastSeq)
	require.Equal(t, uint64(100), mustAppend(t, s, "a", "x"))
	m, err := s.Next(0, "")
	require.NoError(t, err)
	require.Equal(t, uint64(100), m.Seq)
}

func testNext(t *testing.T, open opener) {
	s := purgeFixture(t, open)
	require.NoError(t, s.Delete(4))
	cases := []struct {
		filter string
		want   []uint64 // every match, walking Next from 0
	}{
		{"", []uint64{1, 2, 3, 5, 6, 7, 8}},
		{">", []uint64{1, 2, 3, 5, 6, 7, 8}},
		{"#", []uint64{1, 2, 3, 5, 6, 7, 8}},
		{"a.x", []uint64{1, 8}},
		{"a.*", []uint64{1, 2, 6, 8}},
		{"*.x", []uint64{1, 3, 8}},
		{"b.>", []uint64{3, 5}},
		{"*.*.*", []uint64{5}},
		{"#.z", []uint64{5}},
		{"c.#", []uint64{7}},
		{"#.y.#", []uint64{2, 5, 6}},
		{"nope", nil},
		{"nope.*", nil},
	}
	for _, c := range cases {
		t.Run(c.filter, func(t *testing.T) {
			var got []uint64
			for from := uint64(0); ; {
				m, err := s.Next(from, c.filter)
				if err != nil {
					require.ErrorIs(t, err, ErrNotFound)
					break
				}
				got = append(got, m.Seq)
				from = m.Seq + 1
			}
			require.Equal(t, c.want, got)
		})
	}
	// A subject that appears after a wildcard filter was first used.
	_, err := s.Next(9, "d.*")
	require.ErrorIs(t, err, ErrNotFound)
	seq := mustAppend(t, s, "d.new", "x")
	m, err := s.Next(0, "d.*")
	require.NoError(t, err)
	require.Equal(t, seq, m.Seq)
	_, err = s.Next(seq+1, "d.*")
	require.ErrorIs(t, err, ErrNotFound)
}

// testNextManySubjects exercises the wildcard path with many matching
// subjects (the linear probe) and a filter whose subjects come and go.
func testNextManySubjects(t *testing.T, open opener) {
	s := open(t, Options{MaxMsgsPerSubject: 2})
	for i := 0; i < 400; i++ {
		mustAppend(t, s, fmt.Sprintf("m.%d.%s", i%50, map[bool]string{true: "even", false: "odd"}[i%2 == 0]), "x")
	}
	// m.<k>.even for even k; each subject keeps its last 2 of 8 messages.
	var got []uint64
	for from := uint64(0); ; {
		m, err := s.Next(from, "m.*.even")
		if err != nil {
			break
		}
		require.Contains(t, m.Subject, ".even")
		got = append(got, m.Seq)
		from = m.Seq + 1
	}
	require.Len(t, got, 50)
	for i := 1; i < len(got); i++ {
		require.Greater(t, got[i], got[i-1])
	}
	// Remove every even subject, then bring one back.
	n, err := s.Purge(PurgeRequest{Subject: "m.*.even"})
	require.NoError(t, err)
	require.Equal(t, uint64(50), n)
	_, err = s.Next(0, "m.*.even")
	require.ErrorIs(t, err, ErrNotFound)
	seq := mustAppend(t, s, "m.4.even", "back")
	m, err := s.Next(0, "m.*.even")
	require.NoError(t, err)
	require.Equal(t, seq, m.Seq)
	require.Equal(t, []byte("back"), m.Data)
}

// testNumPending checks NumPending against counting what Next returns.
func testNumPending(t *testing.T, open opener) {
	s := purgeFixture(t, open)
	require.NoError(t, s.Delete(4))
	for _, filter := range []string{"", ">", "a.x", "a.*", "*.x", "b.>", "#.y.#", "nope", "nope.*", "a..b"} {
		for from := uint64(0); from <= 10; from++ {
			var want uint64
			for q := from; ; {
				m, err := s.Next(q, filter)
				if err != nil {
					break
				}
				want++
				q = m.Seq + 1
			}
			require.Equal(t, want, s.NumPending(from, filter), "filter %q from %d", filter, from)
		}
	}
}

func testLastBySubject(t *testing.T, open opener) {
	s := purgeFixture(t, open)
	cases := []struct {
		subj    string
		want    uint64
		wantErr error
	}{
		{subj: "a.x", want: 8},
		{subj: "a.y", want: 6},
		{subj: "b.y.z", want: 5},
		{subj: "a.*", want: 8},
		{subj: "b.>", want: 5},
		{subj: "", want: 8},
		{subj: "zz", wantErr: ErrNotFound},
		{subj: "a..b", wantErr: ErrInvalidFilter},
	}
	for _, c := range cases {
		m, err := s.LastBySubject(c.subj)
		if c.wantErr != nil {
			require.ErrorIs(t, err, c.wantErr, c.subj)
			continue
		}
		require.NoError(t, err, c.subj)
		require.Equal(t, c.want, m.Seq, c.subj)
	}
	require.NoError(t, s.Delete(8))
	m, err := s.LastBySubject("a.x")
	require.NoError(t, err)
	require.Equal(t, uint64(4), m.Seq)
	m, err = s.LastBySubject("")
	require.NoError(t, err)
	require.Equal(t, uint64(7), m.Seq)
}

func testSeqAtOrAfterTime(t *testing.T, open opener) {
	clock := newFakeClock()
	t0 := clock.Now()
	s := open(t, Options{Now: clock.Now})
	for i := 0; i < 5; i++ { // at t0+0s, 10s, 20s, 30s, 40s
		mustAppend(t, s, "t", "x")
		clock.Advance(10 * time.Second)
	}
	require.NoError(t, s.Delete(3))
	cases := []struct {
		at   time.Duration
		want uint64
	}{
		{-time.Hour, 1}, {0, 1}, {time.Second, 2}, {10 * time.Second, 2},
		{15 * time.Second, 3 + 1}, // 3 is deleted
		{40 * time.Second, 5}, {41 * time.Second, 6}, {time.Hour, 6},
	}
	for _, c := range cases {
		require.Equal(t, c.want, s.SeqAtOrAfterTime(t0.Add(c.at)), "at %v", c.at)
	}
}

func testState(t *testing.T, open opener) {
	clock := newFakeClock()
	s := open(t, Options{Now: clock.Now})
	require.Equal(t, State{FirstSeq: 1}, s.State())
	var bytes uint64
	for i := 0; i < 6; i++ {
		clock.Advance(time.Second)
		mustAppend(t, s, fmt.Sprintf("s.%d", i%3), "data")
		bytes += uint64(recordSize("s.0", nil, []byte("data")))
	}
	st := s.State()
	require.Equal(t, State{Msgs: 6, Bytes: bytes, FirstSeq: 1, LastSeq: 6, NumSubjects: 3,
		FirstTime: newFakeClock().Now().Add(time.Second), LastTime: clock.Now()}, st)
	require.NoError(t, s.Delete(2))
	require.NoError(t, s.Delete(4))
	st = s.State()
	require.Equal(t, 2, st.NumDeleted)
	require.Equal(t, uint64(4), st.Msgs)
	_, err := s.Purge(PurgeRequest{})
	require.NoError(t, err)
	st = s.State()
	require.Equal(t, State{FirstSeq: 7, LastSeq: 6, LastTime: clock.Now()}, st)
}

func testSubjects(t *testing.T, open opener) {
	s := purgeFixture(t, open)
	require.Equal(t, map[string]uint64{"a.x": 3, "a.y": 2, "b.x": 1, "b.y.z": 1, "c": 1}, s.Subjects(""))
	require.Equal(t, map[string]uint64{"a.x": 3, "a.y": 2}, s.Subjects("a.*"))
	require.Equal(t, map[string]uint64{"a.x": 3}, s.Subjects("a.x"))
	require.Equal(t, map[string]uint64{"b.x": 1, "b.y.z": 1}, s.Subjects("b.#"))
	require.Empty(t, s.Subjects("zz"))
	require.Empty(t, s.Subjects("a..b"))
}

func testUpdateConfig(t *testing.T, open opener) {
	clock := newFakeClock()
	s := open(t, Options{Now: clock.Now})
	for i := 0; i < 10; i++ {
		mustAppend(t, s, fmt.Sprintf("u.%d", i%2), "0123456789")
		clock.Advance(time.Second)
	}
	size := int64(recordSize("u.0", nil, []byte("0123456789")))
	steps := []struct {
		opts Options
		want []uint64
	}{
		{Options{MaxMsgs: 8}, seqRange(3, 10)},
		{Options{MaxMsgs: 8, MaxMsgsPerSubject: 3}, seqRange(5, 10)},
		{Options{MaxBytes: 4 * size}, seqRange(7, 10)},
		{Options{MaxAge: 2500 * time.Millisecond}, []uint64{9, 10}}, // now = t0+10s
		{Options{}, []uint64{9, 10}},                                // raising limits brings nothing back
	}
	base := s.Options()
	for i, st := range steps {
		o := base
		o.MaxMsgs, o.MaxBytes, o.MaxMsgsPerSubject, o.MaxAge = st.opts.MaxMsgs, st.opts.MaxBytes, st.opts.MaxMsgsPerSubject, st.opts.MaxAge
		require.NoError(t, s.UpdateConfig(o), "step %d", i)
		require.Equal(t, st.want, liveSeqs(t, s), "step %d", i)
	}
	bad := base
	bad.MaxMsgs = -1
	require.ErrorIs(t, s.UpdateConfig(bad), ErrInvalidConfig)
	bad = base
	bad.Storage ^= 1
	require.ErrorIs(t, s.UpdateConfig(bad), ErrInvalidConfig)
	// DiscardNew takes effect for new messages.
	o := base
	o.MaxMsgs, o.Discard = 2, DiscardNew
	require.NoError(t, s.UpdateConfig(o))
	_, _, err := s.Append("u.0", nil, nil, 0)
	require.ErrorIs(t, err, ErrMaxMsgs)
}

func testClosed(t *testing.T, open opener) {
	s := open(t, Options{})
	seq := mustAppend(t, s, "a", "x")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, _, err := s.Append("a", nil, nil, 0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Get(seq)
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Next(0, "")
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.Delete(seq), ErrClosed)
	_, err = s.Purge(PurgeRequest{})
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, s.WaitDurable(seq), ErrClosed)
	require.ErrorIs(t, s.UpdateConfig(Options{}), ErrClosed)
}
