package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

func TestParseTTL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"never", TTLNever, true},
		{"NEVER", TTLNever, true},
		{"90s", 90 * time.Second, true},
		{"1.5s", time.Second, true},
		{"1h", time.Hour, true},
		{"500ms", 0, false},
		{"30", 30 * time.Second, true},
		{"0", 0, false}, // a duration below a second, as in the reference server
		{"00", 0, true},
		{"-1", 0, false},
		{"soon", 0, false},
		{"99999999999999", 1<<63 - 1, true},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, ok := ParseTTL(c.in)
			require.Equal(t, c.ok, ok)
			require.Equal(t, c.want, got)
		})
	}
}

func TestDeleteMarkerHeaders(t *testing.T) {
	h := MarkerHeader(time.Minute)
	require.Equal(t, "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1m0s\r\nNats-Rollup: sub\r\n\r\n", string(h))
	require.True(t, isDeleteMarker(h))
	v, ok := headerValue(h, TTLHeader)
	require.True(t, ok)
	require.Equal(t, "1m0s", v)
	require.Equal(t, time.Minute, HeaderTTL(h))
	require.Equal(t, TTLNever, HeaderTTL([]byte("NATS/1.0\r\nNats-TTL: never\r\n\r\n")))
	require.Zero(t, HeaderTTL([]byte("NATS/1.0\r\nNats-TTL: soon\r\n\r\n")))
	require.Zero(t, HeaderTTL(nil))
	require.True(t, isDeleteMarker([]byte("NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n")))
	require.False(t, isDeleteMarker([]byte("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n")))
	_, ok = headerValue([]byte("NATS/1.0 404 Nats-TTL: x\r\n\r\n"), TTLHeader)
	require.False(t, ok, "the status line holds no header")
}

// expiries collects what OnExpire hears, and checks that AppendLock is
// held meanwhile.
type expiries struct {
	lock sync.Mutex // the AppendLock
	mu   sync.Mutex
	got  Expired
}

func (x *expiries) options(o Options) Options {
	o.AppendLock = &x.lock
	o.OnExpire = func(e Expired) {
		if x.lock.TryLock() {
			panic("OnExpire without AppendLock held")
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		x.got.Removed = append(x.got.Removed, e.Removed...)
		x.got.Markers = append(x.got.Markers, e.Markers...)
	}
	return o
}

func (x *expiries) take() Expired {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.got
	x.got = Expired{}
	return e
}

// TestTTLExpires: a message with a TTL goes that long after it was
// stored, OnExpire hears of it, and "never" and no TTL stay.
func TestTTLExpires(t *testing.T) {
	var x expiries
	s := mustOpen(t, x.options(Options{Storage: MemoryStorage, AllowMsgTTL: true}))
	_, _, err := s.Append("a", nil, nil, 30*time.Millisecond)
	require.NoError(t, err)
	mustAppend(t, s, "b", "")
	_, _, err = s.Append("c", nil, nil, TTLNever)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !s.Has(1) }, 5*time.Second, time.Millisecond)
	require.Equal(t, Expired{Removed: []uint64{1}}, x.take())
	require.Equal(t, []uint64{2, 3}, liveSeqs(t, s))
}

// TestTTLRefused: a TTL needs AllowMsgTTL (or markers).
func TestTTLRefused(t *testing.T) {
	s := mustOpen(t, Options{Storage: MemoryStorage})
	_, _, err := s.Append("a", nil, nil, time.Hour)
	require.ErrorIs(t, err, ErrInvalidConfig)
	s = mustOpen(t, Options{Storage: MemoryStorage, AllowMsgTTL: true})
	_, _, err = s.Append("a", nil, nil, -2)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = Open(Options{Storage: MemoryStorage, SubjectDeleteMarkerTTL: time.Millisecond})
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// TestTTLNeverOutlivesMaxAge: a message appended with TTLNever is exempt
// from MaxAge, on a stream without markers too; the others around it go.
func TestTTLNeverOutlivesMaxAge(t *testing.T) {
	clock := newFakeClock()
	s := mustOpen(t, Options{Storage: MemoryStorage, AllowMsgTTL: true, MaxAge: time.Minute, Now: clock.Now})
	_, _, err := s.Append("a", nil, nil, TTLNever)
	require.NoError(t, err)
	mustAppend(t, s, "b", "")
	_, _, err = s.Append("c", nil, nil, TTLNever)
	require.NoError(t, err)
	clock.Advance(2 * time.Minute)
	require.Equal(t, []uint64{1, 3}, liveSeqs(t, s))
	mustAppend(t, s, "d", "")
	require.Equal(t, []uint64{1, 3, 4}, liveSeqs(t, s))
	clock.Advance(2 * time.Minute)
	require.Equal(t, []uint64{1, 3}, liveSeqs(t, s), "a message after exempt ones still expires")
	require.NoError(t, s.Delete(1))
	require.Len(t, s.mu.ttl.never, 1, "a removal forgets the exemption")
}

// TestTTLRebuiltAtOpen: a reopened stream reads its messages' TTLs back
// from their headers, and expires them on time.
func TestTTLRebuiltAtOpen(t *testing.T) {
	clock := newFakeClock()
	mem := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: mem, AllowMsgTTL: true, MaxAge: time.Hour, Now: clock.Now, Logger: quiet}
	s, err := Open(o)
	require.NoError(t, err)
	for _, ttl := range []string{"2s", "never", "1h"} {
		d, ok := ParseTTL(ttl)
		require.True(t, ok)
		_, _, err := s.Append("t", []byte("NATS/1.0\r\nNats-TTL: "+ttl+"\r\n\r\n"), nil, d)
		require.NoError(t, err)
	}
	mustAppend(t, s, "plain", "")
	require.NoError(t, s.Close())

	var x expiries
	o.HoldExpiry = true
	s = mustOpen(t, x.options(o))
	require.Len(t, s.mu.ttl.heap, 2)
	require.Contains(t, s.mu.ttl.never, uint64(2))
	clock.Advance(3 * time.Second)
	s.expireRound()
	require.Empty(t, x.take().Removed, "held until StartExpiry")
	s.StartExpiry()
	s.expireRound()
	require.Eventually(t, func() bool { return !s.Has(1) }, 5*time.Second, time.Millisecond)
	require.Equal(t, []uint64{1}, x.take().Removed)
	clock.Advance(2 * time.Hour)
	require.Equal(t, []uint64{2}, liveSeqs(t, s), "never outlives max_age; 1h and plain do not")
}

// TestDeleteMarkers: with markers, MaxAge and TTLs leave a marker where
// they remove a subject's last message, made durable before what it
// replaces goes; markers and the older messages of a subject go without
// one.
func TestDeleteMarkers(t *testing.T) {
	clock := newFakeClock()
	var x expiries
	mem := storetest.NewMemFS()
	s := mustOpen(t, x.options(Options{Dir: memDir, FS: mem, MaxAge: time.Minute, SubjectDeleteMarkerTTL: 2 * time.Second,
		Now: clock.Now}))
	mustAppend(t, s, "a", "a1")
	mustAppend(t, s, "a", "a2")
	mustAppend(t, s, "b", "b1")
	_, _, err := s.Append("c", []byte("NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n"), nil, 0)
	require.NoError(t, err)
	mustAppend(t, s, "d", "keep")
	_, _, err = s.Append("d", nil, []byte("short"), time.Second) // raised to the marker TTL
	require.NoError(t, err)

	clock.Advance(time.Second + time.Millisecond)
	s.expireRound()
	require.Equal(t, Expired{}, x.take(), "a TTL is not shorter than the marker TTL")
	clock.Advance(time.Second)
	s.expireRound()
	require.Equal(t, Expired{Removed: []uint64{6}}, x.take(), "d keeps an older message: no marker")

	clock.Advance(time.Minute)
	s.expireRound()
	e := x.take()
	at := clock.Now().UnixNano()
	require.Equal(t, []Marker{{Seq: 7, Subject: "a", Replaced: 2, Timestamp: at, TTL: 2 * time.Second},
		{Seq: 8, Subject: "b", Replaced: 3, Timestamp: at, TTL: 2 * time.Second},
		{Seq: 9, Subject: "d", Replaced: 5, Timestamp: at, TTL: 2 * time.Second}}, e.Markers)
	require.ElementsMatch(t, []uint64{1, 4, 2, 3, 5}, e.Removed)
	require.Equal(t, []uint64{7, 8, 9}, liveSeqs(t, s))
	m, err := s.Get(7)
	require.NoError(t, err)
	require.Equal(t, "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n", string(m.Header))
	require.Empty(t, m.Data)
	crashed := mustOpen(t, Options{Dir: memDir, FS: mem.CrashClone()})
	require.Equal(t, []uint64{7, 8, 9}, liveSeqs(t, crashed), "markers and deletes durable")

	clock.Advance(3 * time.Second)
	s.expireRound()
	require.Equal(t, Expired{Removed: []uint64{7, 8, 9}}, x.take(), "markers go by their TTL, leaving none")
	require.Empty(t, liveSeqs(t, s))
}

// TestMarkersOff: turning markers off gives MaxAge back to Append and the
// reads, with the new age.
func TestMarkersOff(t *testing.T) {
	clock := newFakeClock()
	o := Options{Storage: MemoryStorage, MaxAge: time.Second, SubjectDeleteMarkerTTL: time.Second, Now: clock.Now}
	s := mustOpen(t, o)
	mustAppend(t, s, "m", "x")
	clock.Advance(2 * time.Second)
	require.Equal(t, []uint64{1}, liveSeqs(t, s), "with markers, the rounds expire")
	o.SubjectDeleteMarkerTTL, o.MaxAge = 0, time.Hour
	require.NoError(t, s.UpdateConfig(o))
	require.Equal(t, []uint64{1}, liveSeqs(t, s))
	o.MaxAge = time.Second
	require.NoError(t, s.UpdateConfig(o))
	require.Empty(t, liveSeqs(t, s))
}

// TestTTLHeapBounded appends many long-TTL messages to a stream whose
// limits keep only a few: the expiries of messages the limits removed are
// dropped, so the heap follows the stream, not the appends.
func TestTTLHeapBounded(t *testing.T) {
	s := mustOpen(t, Options{Storage: MemoryStorage, AllowMsgTTL: true, MaxMsgs: 10})
	for range 20_000 {
		_, _, err := s.Append("t", nil, nil, time.Hour)
		require.NoError(t, err)
	}
	require.EqualValues(t, 20_000, s.State().LastSeq)
	s.mu.RLock()
	n := len(s.mu.ttl.heap)
	s.mu.RUnlock()
	require.LessOrEqual(t, n, 2*4096+2, "expiries kept for %d messages of a 10-message stream", n)
}

// TestAppendLockKeepsMarkersOut: a caller that reads the last sequence
// and appends under AppendLock never finds a marker in between, while
// rounds append markers all along.
func TestAppendLockKeepsMarkersOut(t *testing.T) {
	clock := newFakeClock()
	var x expiries
	s := mustOpen(t, x.options(Options{Storage: MemoryStorage, MaxAge: time.Second, SubjectDeleteMarkerTTL: time.Second,
		Now: clock.Now}))
	stop, done := make(chan struct{}), make(chan error)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			x.lock.Lock()
			last := s.State().LastSeq
			seq, _, err := s.Append(fmt.Sprint("k.", i), nil, nil, 0)
			x.lock.Unlock()
			if err == nil && seq != last+1 {
				err = fmt.Errorf("appended %d after last sequence %d", seq, last)
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	for markers := 0; markers < 100; markers += len(x.take().Markers) {
		select {
		case err := <-done:
			require.NoError(t, err)
		default:
		}
		clock.Advance(100 * time.Millisecond)
		s.expireRound()
	}
	close(stop)
	require.NoError(t, <-done)
}
