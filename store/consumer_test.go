package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

func openTestConsumer(dir string, fs FS, sync SyncPolicy) (*ConsumerState, error) {
	return OpenConsumerStateOptions(ConsumerOptions{Dir: dir, FS: fs, Durability: Durability{Sync: sync}, Logger: quiet})
}

// consumerStep is one operation and the state it should leave.
type consumerStep struct {
	op         string // "d" delivered, "a" ack, "all" ack all
	dseq, sseq uint64
	dc         uint64
	wantErr    error
	floor      SeqPair
	pending    []uint64
	redeliv    map[uint64]uint64
}

func applyStep(c *ConsumerState, s consumerStep) error {
	switch s.op {
	case "d":
		return c.Delivered(s.dseq, s.sseq, max(s.dc, 1), int64(s.dseq)*1000)
	case "a":
		return c.Ack(s.dseq, s.sseq)
	default:
		return c.AckAll(s.dseq, s.sseq)
	}
}

func TestConsumerStateSteps(t *testing.T) {
	steps := []consumerStep{
		{op: "d", dseq: 1, sseq: 10, pending: []uint64{10}},
		{op: "d", dseq: 2, sseq: 12, pending: []uint64{10, 12}},
		{op: "d", dseq: 3, sseq: 15, pending: []uint64{10, 12, 15}},
		{op: "a", dseq: 2, sseq: 12, pending: []uint64{10, 15}, floor: SeqPair{0, 9}}, // 10 still pending
		{op: "d", dseq: 4, sseq: 10, dc: 2, pending: []uint64{10, 15}, floor: SeqPair{0, 9}, redeliv: map[uint64]uint64{10: 1}},
		{op: "a", dseq: 1, sseq: 10, pending: []uint64{15}, floor: SeqPair{2, 14}},
		{op: "a", dseq: 1, sseq: 10, wantErr: ErrNotPending, pending: []uint64{15}, floor: SeqPair{2, 14}},
		{op: "a", dseq: 3, sseq: 15, floor: SeqPair{4, 15}}, // nothing pending: floor = delivered
		{op: "d", dseq: 5, sseq: 20, pending: []uint64{20}, floor: SeqPair{4, 15}},
		{op: "d", dseq: 6, sseq: 21, pending: []uint64{20, 21}, floor: SeqPair{4, 15}},
		{op: "d", dseq: 7, sseq: 22, pending: []uint64{20, 21, 22}, floor: SeqPair{4, 15}},
		{op: "all", dseq: 6, sseq: 21, pending: []uint64{22}, floor: SeqPair{6, 21}},
		{op: "all", dseq: 2, sseq: 12, pending: []uint64{22}, floor: SeqPair{6, 21}}, // never back
		{op: "d", dseq: 3, sseq: 30, pending: []uint64{22}, floor: SeqPair{6, 21}},   // replay below the floor: ignored
		{op: "all", dseq: 7, sseq: 22, floor: SeqPair{7, 22}},
	}
	for _, kind := range []string{"memory", "file"} {
		t.Run(kind, func(t *testing.T) {
			fsys := storetest.NewMemFS()
			open := func() *ConsumerState {
				if kind == "memory" {
					return NewMemoryConsumerState()
				}
				c, err := openTestConsumer("/c", fsys, SyncAlways)
				require.NoError(t, err)
				return c
			}
			c := open()
			for i, s := range steps {
				err := applyStep(c, s)
				if s.wantErr != nil {
					require.ErrorIs(t, err, s.wantErr, "step %d", i)
				} else {
					require.NoError(t, err, "step %d", i)
				}
				st, err := c.Load()
				require.NoError(t, err)
				require.Equal(t, s.floor, st.AckFloor, "step %d", i)
				require.ElementsMatch(t, s.pending, sortedKeys(st.Pending), "step %d", i)
				if s.redeliv == nil {
					s.redeliv = map[uint64]uint64{}
				}
				require.Equal(t, s.redeliv, st.Redelivered, "step %d", i)
				if kind == "file" { // every state survives a reopen
					require.NoError(t, c.Close())
					c = open()
					again, err := c.Load()
					require.NoError(t, err)
					require.Equal(t, st, again, "step %d after reopen", i)
				}
			}
			require.NoError(t, c.Close())
			_, err := c.Load()
			require.ErrorIs(t, err, ErrClosed)
		})
	}
}

// TestConsumerStateCompaction drives enough changes through the log to
// compact it several times, with random acks, and checks that a reopen
// (clean, after a process crash, and after a crash between writing the
// snapshot and emptying the log) restores exactly the same state.
func TestConsumerStateCompaction(t *testing.T) {
	fsys := storetest.NewMemFS()
	c, err := openTestConsumer("/c", fsys, SyncNever)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 3))
	var pending []uint64
	var next uint64 = 1
	var oldLog []byte
	for i := 0; i < 60000; i++ {
		if len(pending) < 100 || rng.IntN(2) == 0 {
			require.NoError(t, c.Delivered(next, next, 1, int64(i)))
			pending = append(pending, next)
			next++
			continue
		}
		j := rng.IntN(len(pending))
		if rng.IntN(10) == 0 { // a redelivery
			require.NoError(t, c.Delivered(next, pending[j], 2, int64(i)))
			continue
		}
		require.NoError(t, c.Ack(0, pending[j]))
		pending = append(pending[:j], pending[j+1:]...)
		if i%500 == 0 {
			if st, _ := fsys.Stat("/c/" + consumerLogName); st.Size() > int64(len(oldLog)) {
				oldLog = fsys.Contents("/c/" + consumerLogName)
			}
		}
	}
	require.NotEmpty(t, fsys.Contents("/c/"+consumerSnapName), "the log was compacted")
	require.Less(t, len(fsys.Contents("/c/"+consumerLogName)), 2*compactMinBytes)
	want, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, pending[0]-1, want.AckFloor.Stream)

	crashed := fsys.Clone()
	require.NoError(t, c.Close())
	for name, fs := range map[string]*storetest.MemFS{"clean": fsys, "crashed": crashed} {
		c2, err := openTestConsumer("/c", fs, SyncNever)
		require.NoError(t, err, name)
		got, err := c2.Load()
		require.NoError(t, err)
		require.Equal(t, want, got, name)
		require.NoError(t, c2.Close())
	}
	// A crash after the snapshot's rename but before the log was emptied:
	// the log's records are older than the snapshot and are skipped.
	stale := fsys.Clone()
	stale.SetContents("/c/"+consumerLogName, append(oldLog, fsys.Contents("/c/"+consumerLogName)...))
	c3, err := openTestConsumer("/c", stale, SyncNever)
	require.NoError(t, err)
	got, err := c3.Load()
	require.NoError(t, err)
	require.Equal(t, want.AckFloor, got.AckFloor)
	require.NoError(t, c3.Close())
}

func TestConsumerStateTornAndCorrupt(t *testing.T) {
	fsys := storetest.NewMemFS()
	c, err := openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	for q := uint64(1); q <= 5; q++ {
		require.NoError(t, c.Delivered(q, q, 1, 0))
	}
	require.NoError(t, c.Ack(1, 1))
	require.NoError(t, c.Ack(2, 2))
	require.NoError(t, c.Close())
	log := fsys.Contents("/c/" + consumerLogName)
	ackSize := opSize(opAck)
	for cut := len(log) - ackSize + 1; cut < len(log); cut++ {
		torn := fsys.Clone()
		torn.SetContents("/c/"+consumerLogName, log[:cut])
		c, err := openTestConsumer("/c", torn, SyncAlways)
		require.NoError(t, err)
		st, err := c.Load()
		require.NoError(t, err)
		require.Equal(t, SeqPair{1, 1}, st.AckFloor, "the torn ack is gone, cut %d", cut)
		require.Len(t, torn.Contents("/c/"+consumerLogName), len(log)-ackSize)
		require.NoError(t, c.Ack(2, 2), "and the stream of changes continues")
		require.NoError(t, c.Close())
	}
	// A corrupt snapshot is an error, not a silent reset.
	require.NoError(t, func() error {
		c, err := openTestConsumer("/c", fsys, SyncAlways)
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		return c.Update(func(st *ConsumerSnapshot) { st.Delivered.Consumer = 99 })
	}())
	snap := fsys.Contents("/c/" + consumerSnapName)
	snap[10] ^= 1
	fsys.SetContents("/c/"+consumerSnapName, snap)
	_, err = openTestConsumer("/c", fsys, SyncAlways)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestConsumerStateUpdateAndDestroy(t *testing.T) {
	fsys := storetest.NewMemFS()
	c, err := openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	require.NoError(t, c.Delivered(1, 1, 1, 0))
	require.NoError(t, c.Update(func(st *ConsumerSnapshot) {
		st.Delivered = SeqPair{10, 100}
		st.AckFloor = SeqPair{10, 100}
		st.Pending = nil
	}))
	require.NoError(t, c.Delivered(11, 101, 1, 0))
	require.NoError(t, c.Close())
	c, err = openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	st, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, SeqPair{11, 101}, st.Delivered)
	require.Equal(t, SeqPair{10, 100}, st.AckFloor)
	require.Equal(t, map[uint64]PendingEntry{101: {ConsumerSeq: 11}}, st.Pending)
	require.NoError(t, c.Destroy())
	names, _ := fsys.ReadDir("/")
	require.NotContains(t, names, "c")
}

// TestConsumerStateFloorNeverBack: a floor set by Update above what the
// pending messages imply stays put when they are acknowledged.
func TestConsumerStateFloorNeverBack(t *testing.T) {
	c := NewMemoryConsumerState()
	require.NoError(t, c.Update(func(st *ConsumerSnapshot) {
		st.Delivered, st.AckFloor = SeqPair{20, 200}, SeqPair{10, 100}
		st.Pending = map[uint64]PendingEntry{50: {ConsumerSeq: 5}, 60: {ConsumerSeq: 6}}
	}))
	require.NoError(t, c.Ack(6, 60))
	st, _ := c.Load()
	require.Equal(t, SeqPair{10, 100}, st.AckFloor)
	require.NoError(t, c.Ack(5, 50))
	st, _ = c.Load()
	require.Equal(t, SeqPair{20, 200}, st.AckFloor, "nothing pending: the floor is what was delivered")
}

// TestConsumerStateNoWait: AckNoWait and AckAllNoWait change the state
// like Ack and AckAll; Sync then makes them durable.
func TestConsumerStateNoWait(t *testing.T) {
	mem := storetest.NewMemFS()
	c, err := openTestConsumer("/c", mem, SyncAlways)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	for q := uint64(1); q <= 4; q++ {
		require.NoError(t, c.Delivered(q, q, 1, 0))
	}
	require.NoError(t, c.AckNoWait(1, 1))
	require.ErrorIs(t, c.AckNoWait(1, 1), ErrNotPending)
	require.NoError(t, c.AckAllNoWait(3, 3))
	st, _ := c.Load()
	require.Equal(t, SeqPair{3, 3}, st.AckFloor)
	require.Equal(t, []uint64{4}, sortedKeys(st.Pending))
	require.NoError(t, c.Sync())
	c2, err := openTestConsumer("/c", mem.CrashClone(), SyncAlways)
	require.NoError(t, err)
	defer func() { _ = c2.Close() }()
	got, _ := c2.Load()
	require.Equal(t, st, got)
}

// TestConsumerStateFaults: a failed write changes nothing; a failed fsync
// fails the Ack and makes the next change rewrite the state whole.
func TestConsumerStateFaults(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	c, err := openTestConsumer("/c", ffs, SyncAlways)
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	require.NoError(t, c.Delivered(1, 1, 1, 0))
	require.NoError(t, c.Delivered(2, 2, 1, 0))
	ffs.SetBudget(10)
	require.ErrorIs(t, c.Ack(1, 1), syscall.ENOSPC)
	st, _ := c.Load()
	require.Len(t, st.Pending, 2, "nothing applied")
	ffs.SetBudget(-1)
	ffs.FailSync(syscall.EIO)
	require.ErrorIs(t, c.Ack(1, 1), ErrSync)
	ffs.FailSync(nil)
	require.NoError(t, c.Ack(2, 2))
	require.NotEmpty(t, mem.Contents(path.Join("/c", consumerSnapName)), "rewritten whole after the failed fsync")
	c2, err := openTestConsumer("/c", mem.CrashClone(), SyncAlways)
	require.NoError(t, err)
	defer func() { _ = c2.Close() }()
	st, _ = c2.Load()
	require.Equal(t, SeqPair{2, 2}, st.AckFloor)
}

func TestConsumerStateConcurrent(t *testing.T) {
	c, err := OpenConsumerState(t.TempDir(), nil, Durability{Sync: SyncAlways})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	const n = 8
	done := make(chan error, n)
	var deliver sync.Mutex // a consumer delivers in stream order
	var next uint64
	for g := 0; g < n; g++ {
		go func() {
			for i := 0; i < 100; i++ {
				deliver.Lock()
				next++
				q := next
				err := c.Delivered(q, q, 1, 0)
				deliver.Unlock()
				if err != nil {
					done <- err
					return
				}
				if err := c.Ack(q, q); err != nil {
					done <- fmt.Errorf("ack %d: %w", q, err)
					return
				}
			}
			done <- nil
		}()
	}
	for g := 0; g < n; g++ {
		require.NoError(t, <-done)
	}
	st, err := c.Load()
	require.NoError(t, err)
	require.Empty(t, st.Pending)
}

// A flipped byte in the middle of a consumer log is damage, not a torn
// tail: replay goes on past the bad record, so the ack floor recovered is
// the one written, not the one before the damage (issue: floor from 600
// to 300), and the damaged log is kept aside.
func TestConsumerStateDamagedLogMiddle(t *testing.T) {
	fsys := storetest.NewMemFS()
	c, err := openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	for seq := uint64(1); seq <= 600; seq++ {
		require.NoError(t, c.Delivered(seq, seq, 1, int64(seq)))
		require.NoError(t, c.Ack(seq, seq))
	}
	want, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, SeqPair{600, 600}, want.AckFloor)
	require.NoError(t, c.Close())

	log := fsys.Contents("/c/" + consumerLogName)
	if len(log) == 0 {
		t.Skip("compacted into the snapshot: nothing in the log to damage")
	}
	// Damage the delivery record of sequence 300. (Damage to an ack
	// record loses that ack: the message stays pending, and the floor
	// stays below it until a later AckAll, which the JetStream layer
	// writes every round, moves it.)
	off, at := 0, -1
	_, err = decodeOps(log, func(o consumerOp) {
		if o.op == opDelivered && o.sseq == 300 {
			at = off
		}
		off += opSize(o.op)
	})
	require.NoError(t, err)
	require.Positive(t, at)
	log[at+opHeaderSize+3] ^= 0x40
	fsys.SetContents("/c/"+consumerLogName, log)

	c, err = openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	got, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, SeqPair{600, 600}, got.AckFloor, "the records after the damage are replayed")
	require.NotEmpty(t, fsys.Contents("/c/"+consumerLogName+".damaged"), "the damaged log is kept")
	require.NoError(t, c.Delivered(601, 601, 1, 601), "and the stream of changes continues")
	require.NoError(t, c.Close())

	c, err = openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	got, err = c.Load()
	require.NoError(t, err)
	require.Equal(t, uint64(600), got.AckFloor.Stream)
	require.NoError(t, c.Close())
}

// A consumer log that is gone while its snapshot is there is detected and
// logged with what the snapshot still says: the log is created with the
// state and only ever emptied, never removed.
func TestConsumerStateMissingLogIsReported(t *testing.T) {
	fsys := storetest.NewMemFS()
	c, err := openTestConsumer("/c", fsys, SyncAlways)
	require.NoError(t, err)
	require.NoError(t, c.Update(func(st *ConsumerSnapshot) {
		st.Delivered, st.AckFloor = SeqPair{100, 100}, SeqPair{100, 100}
	}))
	for seq := uint64(101); seq <= 120; seq++ {
		require.NoError(t, c.Delivered(seq, seq, 1, int64(seq)))
		require.NoError(t, c.Ack(seq, seq))
	}
	require.NoError(t, c.Close())
	require.NoError(t, fsys.Remove("/c/"+consumerLogName))

	var logged bytes.Buffer
	c, err = OpenConsumerStateOptions(ConsumerOptions{Dir: "/c", FS: fsys, Durability: Durability{Sync: SyncAlways},
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	st, err := c.Load()
	require.NoError(t, err)
	require.Equal(t, uint64(100), st.AckFloor.Stream, "what the snapshot holds")
	require.Contains(t, logged.String(), "consumer log missing")
	require.Contains(t, logged.String(), "ack_floor=100")
}

// TestConsumerStateIntervalSync: under SyncInterval the state's own
// background goroutine fsyncs what was written within an interval, and
// nothing while nothing is written; WaitDurable does not wait for it.
func TestConsumerStateIntervalSync(t *testing.T) {
	mem := storetest.NewMemFS()
	fsys := storetest.NewFaultFS(mem)
	c, err := OpenConsumerStateOptions(ConsumerOptions{Dir: "/c", FS: fsys, Logger: quiet,
		Durability: Durability{Sync: SyncInterval, Interval: 5 * time.Millisecond}})
	require.NoError(t, err)
	logName := "/c/" + consumerLogName
	require.NoError(t, c.Delivered(1, 1, 1, 1))
	require.NoError(t, c.AckNoWait(1, 1))
	require.NoError(t, c.WaitDurable())
	require.Eventually(t, func() bool {
		return len(mem.CrashClone().Contents(logName)) == len(mem.Contents(logName))
	}, 5*time.Second, time.Millisecond, "fsynced in the background")
	syncs := fsys.Syncs()
	time.Sleep(30 * time.Millisecond)
	require.Equal(t, syncs, fsys.Syncs(), "no fsync while idle")
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
}
