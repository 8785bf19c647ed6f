package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestENOSPC fills the disk at random points. A failed Append returns
// ErrWrite wrapping ENOSPC, leaves nothing behind and consumes no
// sequence; once space returns the stream works on without a reopen; and a
// reopen finds exactly the messages that were stored, with no partial
// record to truncate.
func TestENOSPC(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			mem := storetest.NewMemFS()
			ffs := storetest.NewFaultFS(mem)
			o := Options{Dir: memDir, FS: ffs, SegmentBytes: 2048, MaxMsgsPerSubject: 20, Logger: quiet}
			s, err := Open(o)
			require.NoError(t, err)
			want := map[uint64][]byte{}
			var last uint64
			failures := 0
			for i := 0; i < 600; i++ {
				if rng.IntN(10) == 0 {
					ffs.SetBudget(int64(rng.IntN(400))) // the disk fills up
					if rng.IntN(3) == 0 {
						ffs.SetBudget(int64(rng.IntN(200_000))) // ... inside a large record, perhaps
					}
				} else if rng.IntN(8) == 0 {
					ffs.SetBudget(-1) // space is freed
				}
				if rng.IntN(20) == 0 && len(want) > 0 {
					q := last - uint64(rng.IntN(10))
					if _, ok := want[q]; ok {
						err := s.Delete(q)
						if err == nil {
							delete(want, q)
						} else {
							require.ErrorIs(t, err, ErrWrite)
							_, gerr := s.Get(q)
							require.NoError(t, gerr, "a failed delete deletes nothing")
						}
					}
					continue
				}
				data := payload(uint64(i), rng.IntN(300))
				if rng.IntN(10) == 0 { // written in two parts
					data = payload(uint64(i), inlineDataMax+1+rng.IntN(60_000))
				}
				subj := fmt.Sprintf("e.%d", rng.IntN(7))
				seq, _, err := s.Append(subj, nil, data, 0)
				if err != nil {
					require.ErrorIs(t, err, ErrWrite)
					require.ErrorIs(t, err, syscall.ENOSPC)
					failures++
					continue
				}
				require.Equal(t, last+1, seq, "no sequence consumed by a failed append")
				last = seq
				want[seq] = data
			}
			require.Greater(t, failures, 20)
			ffs.SetBudget(-1)
			// Per-subject limits removed some; compare against the stream.
			live := liveSeqs(t, s)
			for _, q := range live {
				m, err := s.Get(q)
				require.NoError(t, err)
				require.Equal(t, want[q], m.Data)
			}
			require.NoError(t, s.Close())

			o.FS = mem
			s2, err := Open(o)
			require.NoError(t, err)
			defer func() { _ = s2.Close() }()
			require.Zero(t, s2.Recovery().TruncatedBytes, "no partial record was left")
			require.Empty(t, s2.Recovery().Corrupt)
			require.Equal(t, live, liveSeqs(t, s2))
			require.Equal(t, last, s2.State().LastSeq)
			for _, q := range live {
				m, err := s2.Get(q)
				require.NoError(t, err)
				require.Equal(t, want[q], m.Data)
			}
		})
	}
}

// TestSyncEIO fails fsyncs: WaitDurable reports the failure for exactly
// the sequences the failed fsync covered, later messages go to a new
// segment and become durable once fsync works again, and an operating
// system crash loses nothing that WaitDurable confirmed.
func TestSyncEIO(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	s, err := Open(Options{Dir: memDir, FS: ffs, Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	for i := 1; i <= 5; i++ {
		mustAppend(t, s, "x", fmt.Sprint(i))
	}
	require.NoError(t, s.WaitDurable(5))
	ffs.FailSync(syscall.EIO)
	for i := 6; i <= 7; i++ {
		mustAppend(t, s, "x", fmt.Sprint(i))
	}
	// 8 is appended while the failing fsync runs, into the same file.
	ffs.OnFailedSync(func() { mustAppend(t, s, "x", "8") })
	err = s.WaitDurable(7)
	require.ErrorIs(t, err, ErrSync)
	require.ErrorIs(t, err, syscall.EIO)
	ffs.FailSync(nil)
	require.ErrorIs(t, s.WaitDurable(8), ErrSync, "written after the failure, into the failed file")
	require.ErrorIs(t, s.WaitDurable(6), ErrSync)
	require.NoError(t, s.WaitDurable(5))
	ffs.FailSync(nil)
	seq := mustAppend(t, s, "x", "9")
	require.NoError(t, s.WaitDurable(seq))
	require.ErrorIs(t, s.WaitDurable(7), ErrSync, "a later success does not clear a failure")
	require.Len(t, mem.Names(memDir, logExt), 2, "the failed segment was sealed")
	for q := uint64(1); q <= 9; q++ {
		_, err := s.Get(q)
		require.NoError(t, err, "reads still see %d", q)
	}

	// An OS crash now: 1-5 and 9 were confirmed durable.
	crashed := mem.CrashClone()
	s2, err := Open(Options{Dir: memDir, FS: crashed, Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = s2.Close() }()
	for _, q := range []uint64{1, 2, 3, 4, 5, 9} {
		m, err := s2.Get(q)
		require.NoError(t, err, "seq %d", q)
		require.Equal(t, fmt.Sprint(q), string(m.Data))
	}
	require.Equal(t, uint64(9), s2.State().LastSeq)
	require.Equal(t, 2, s2.Recovery().SegmentsScanned, "the poisoned segment has no index")
}

// TestSyncIntervalReportsFailure: under SyncInterval, WaitDurable does not
// wait, but reports a failed background fsync for the messages it covered.
func TestSyncIntervalReportsFailure(t *testing.T) {
	ffs := storetest.NewFaultFS(storetest.NewMemFS())
	s, err := Open(Options{Dir: memDir, FS: ffs, Durability: Durability{Sync: SyncInterval, Interval: 5 * time.Millisecond}, Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	mustAppend(t, s, "x", "1")
	require.Eventually(t, func() bool { return s.gc.durable.Load() >= 1 }, 5*time.Second, time.Millisecond)
	ffs.FailSync(syscall.EIO)
	seq := mustAppend(t, s, "x", "2")
	require.Eventually(t, func() bool { return errors.Is(s.WaitDurable(seq), ErrSync) }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, s.WaitDurable(1))
}

// TestOSCrashSyncAlways appends with SyncAlways and simulates operating
// system crashes (only fsynced bytes survive) at many points: every
// sequence WaitDurable confirmed is there.
func TestOSCrashSyncAlways(t *testing.T) {
	mem := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: mem, SegmentBytes: 1500, MaxMsgs: 200, Logger: quiet}
	s, err := Open(o)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	rng := rand.New(rand.NewPCG(5, 5))
	durable := map[uint64][]byte{}
	for i := 0; i < 400; i++ {
		data := payload(uint64(i), rng.IntN(200))
		seq, _, err := s.Append(fmt.Sprintf("o.%d", i%3), nil, data, 0)
		require.NoError(t, err)
		if rng.IntN(3) == 0 {
			require.NoError(t, s.WaitDurable(seq))
			for q := range durable {
				if q+200 <= seq {
					delete(durable, q) // MaxMsgs removes them
				}
			}
			durable[seq] = data
		}
		if rng.IntN(25) == 0 {
			o2 := o
			o2.FS = mem.CrashClone()
			c, err := Open(o2)
			require.NoError(t, err)
			for q, d := range durable {
				m, err := c.Get(q)
				require.NoError(t, err, "seq %d confirmed durable", q)
				require.Equal(t, d, m.Data)
			}
			require.NoError(t, c.Close())
		}
	}
}
