package raftlog

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/vfs"
)

// BenchmarkReplicaWrite is the measurement of issue 13's design (§2.1)
// that decides between a separate raft log and the stream's own segment
// store. One op is one batch of messages made durable:
//
//   - path=wal+store: the batch is appended to the raft log as one entry
//     per message with one fsync (SyncAlways), then appended to a stream
//     store that fsyncs only in the background, every second (the
//     replica's store, fsynced at checkpoints);
//   - path=walbatch+store: the same, but the batch is one raft entry, as
//     the design proposes it (§3.1: a leader's batch of publishes is one
//     opMsgs entry), encoded by the proposer and decoded on apply;
//   - path=store-only: the batch is appended to a SyncAlways stream store
//     and waited for with WaitDurable: the lower bound of using the store
//     as the raft log.
//
// Both run on the same disk (the test's temporary directory). Besides
// ns/op (per batch) and MB/s it reports msgs/s, fsyncs/s and the 99th
// percentile of a batch's latency. The decision stands if wal+store
// reaches 85 % of store-only's msgs/s at batch=64.
func BenchmarkReplicaWrite(b *testing.B) {
	for _, path := range []string{"wal+store", "walbatch+store", "store-only"} {
		for _, size := range []struct {
			name string
			n    int
		}{{"16B", 16}, {"1KB", 1024}} {
			for _, batch := range []int{1, 64, 1024} {
				b.Run(fmt.Sprintf("path=%s/size=%s/batch=%d", path, size.name, batch), func(b *testing.B) {
					benchReplicaWrite(b, path, size.n, batch)
				})
			}
		}
	}
}

func benchReplicaWrite(b *testing.B, path string, size, batch int) {
	var fsyncs atomic.Int64
	fs := &hookFS{FS: vfs.OS, onSync: func(string) { fsyncs.Add(1) }}
	dir := b.TempDir()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	const subj = "bench.replica"
	lat := make([]time.Duration, 0, b.N)

	var write func() error
	switch path {
	case "wal+store":
		l, s := openReplica(b, dir, fs)
		g := l.Group(1)
		next := uint64(1)
		write = func() error {
			es := make([]*pb.Entry, batch)
			for k := range es {
				es[k] = &pb.Entry{Index: new(next), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: data}
				next++
			}
			if err := g.SaveWait(Update{Entries: es}); err != nil {
				return err
			}
			for range batch {
				if _, _, err := s.Append(subj, nil, data, 0); err != nil {
					return err
				}
			}
			if next%(64<<10) < uint64(batch) { // what checkpoints would let go
				return g.Compact(next - 1)
			}
			return nil
		}
	case "walbatch+store":
		l, s := openReplica(b, dir, fs)
		g := l.Group(1)
		next := uint64(1)
		per := binary.MaxVarintLen64*2 + len(subj) + size
		write = func() error {
			// The proposer encodes the batch: the entry keeps its bytes
			// (raft and the log's cache hold it), so each is new.
			buf := make([]byte, 0, batch*per)
			for range batch {
				buf = binary.AppendUvarint(buf, uint64(len(subj)))
				buf = append(buf, subj...)
				buf = binary.AppendUvarint(buf, uint64(len(data)))
				buf = append(buf, data...)
			}
			e := &pb.Entry{Index: new(next), Term: new(uint64(1)), Type: pb.EntryNormal.Enum(), Data: buf}
			next++
			if err := g.SaveWait(Update{Entries: []*pb.Entry{e}}); err != nil {
				return err
			}
			// Apply: decode and append each message.
			for rest := e.Data; len(rest) > 0; {
				n, k := binary.Uvarint(rest)
				sub := rest[k : k+int(n)]
				rest = rest[k+int(n):]
				n, k = binary.Uvarint(rest)
				msg := rest[k : k+int(n)]
				rest = rest[k+int(n):]
				if _, _, err := s.Append(unsafe.String(unsafe.SliceData(sub), len(sub)), nil, msg, 0); err != nil {
					return err
				}
			}
			if next%(1<<10) == 0 { // what checkpoints would let go
				return g.Compact(next - 1)
			}
			return nil
		}
	case "store-only":
		s, err := store.Open(store.Options{Dir: dir + "/stream", FS: fs, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		write = func() error {
			var seq uint64
			for range batch {
				var err error
				if seq, _, err = s.Append(subj, nil, data, 0); err != nil {
					return err
				}
			}
			return s.WaitDurable(seq)
		}
	}

	b.SetBytes(int64(size * batch))
	b.ReportAllocs()
	fsyncs.Store(0)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := write(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N*batch)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(fsyncs.Load())/elapsed.Seconds(), "fsyncs/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs/batch")
}

// openReplica opens a replica's raft log and its stream store, which
// fsyncs in the background every second, under dir; b's cleanup closes
// them.
func openReplica(b *testing.B, dir string, fs vfs.FS) (*Log, *store.Stream) {
	l, err := Open(Options{Dir: dir + "/wal", FS: fs, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	s, err := store.Open(store.Options{Dir: dir + "/stream", FS: fs, Logger: quiet,
		Durability: store.Durability{Sync: store.SyncInterval, Interval: time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return l, s
}

// BenchmarkChurn is the measurement behind RecycleSegments: one group
// appends batches of 64 entries of 1 KiB, as a replica under load does,
// under SyncInterval, and compacts all but the last batches after each,
// so that segments (8 MiB here) keep being removed and started. It reports
// the process's CPU time (user and system) per KiB written, with the
// removed segments' files recycled and without.
//
//	go test ./store/raftlog -run '^$' -bench BenchmarkChurn -benchtime 20000x -count 5
func BenchmarkChurn(b *testing.B) {
	for _, recycle := range []int{-1, DefaultRecycleSegments} {
		b.Run(fmt.Sprintf("recycle=%d", recycle), func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir(), SegmentBytes: 8 << 20, RecycleSegments: recycle,
				Durability: store.Durability{Sync: store.SyncInterval}, Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = l.Close() }()
			g := l.Group(1)
			data := make([]byte, 1<<10)
			batch := make([]*pb.Entry, 64)
			b.SetBytes(int64(len(batch) * len(data)))
			start := cpuTime()
			b.ResetTimer()
			for n := range b.N {
				for k := range batch {
					i := uint64(n*len(batch)+k) + 1
					batch[k] = &pb.Entry{Index: &i, Term: new(uint64(1)), Data: data}
				}
				if err := g.SaveWait(Update{Entries: batch}); err != nil {
					b.Fatal(err)
				}
				if last := uint64((n + 1) * len(batch)); last > 1024 {
					if err := g.Compact(last - 1024); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			kib := float64(b.N * len(batch) * len(data) >> 10)
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/kib, "cpu-ns/KiB")
			b.ReportMetric(float64(l.Stats().Recycled), "recycled")
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
