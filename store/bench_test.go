package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// Benchmarks for checking that the hot paths work and allocate what they
// should. They run on the real file system; absolute numbers depend on the
// machine and its disk.

// BenchmarkAppend appends from parallel goroutines, each waiting for
// durability after every append as a publisher awaiting its ack would;
// under SyncAlways, group commit shares each fsync among the waiters.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []SyncPolicy{SyncAlways, SyncInterval, SyncNever} {
		for _, size := range []int{256, 1024, 5120} {
			b.Run(fmt.Sprintf("sync=%s/size=%d", sync, size), func(b *testing.B) {
				s := mustOpen(b, Options{Dir: b.TempDir(), Durability: Durability{Sync: sync}})
				data := payload(1, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.SetParallelism(4)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						seq, _, err := s.Append("bench.append", nil, data, 0)
						if err == nil {
							err = s.WaitDurable(seq)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkAppendAt applies messages as a replica does: AppendAt at the
// sequence and time the leader chose, into a file stream whose appends are
// buffered (Options.WriteBuffer) and flushed once per 256 messages, one
// applied batch, or into a memory stream.
func BenchmarkAppendAt(b *testing.B) {
	for _, storage := range []string{"file", "memory"} {
		for _, size := range []int{16, 1024} {
			b.Run(fmt.Sprintf("storage=%s/size=%d", storage, size), func(b *testing.B) {
				o := Options{Dir: b.TempDir(), WriteBuffer: 1 << 20, Durability: Durability{Sync: SyncNever}}
				if storage == "memory" {
					o = Options{Storage: MemoryStorage}
				}
				s := mustOpen(b, o)
				data := payload(1, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				seq := uint64(0)
				for b.Loop() {
					seq++
					if err := s.AppendAt(seq, int64(seq), "bench.append", nil, data, 0); err != nil {
						b.Fatal(err)
					}
					if seq%256 == 0 {
						if err := s.Flush(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// fillBench appends n messages of 256 bytes, round-robin over subjects
// bench.<a>.<b>.<c>, where a, b and c are the digits of k < subjects.
func fillBench(b *testing.B, s *Stream, n, subjects int) {
	data := payload(1, 256)
	for i := 0; i < n; i++ {
		k := i % subjects
		if _, _, err := s.Append(fmt.Sprintf("bench.%d.%d.%d", k/100, k/10%10, k%10), nil, data, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet reads random messages.
func BenchmarkGet(b *testing.B) {
	for _, st := range []Storage{FileStorage, MemoryStorage} {
		b.Run("storage="+st.String(), func(b *testing.B) {
			s := mustOpen(b, Options{Storage: st, Dir: b.TempDir(), Durability: Durability{Sync: SyncNever}})
			const n = 50000
			fillBench(b, s, n, 100)
			rng := rand.New(rand.NewPCG(1, 1))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := s.Get(1 + uint64(rng.IntN(n))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNext walks a stream of 100,000 messages over 1,000 subjects with
// a consumer's filter: one subject (0.1% of the messages), a narrow
// wildcard (10 subjects, 1%), a broad one (100 subjects, 10%) and none.
func BenchmarkNext(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir(), Durability: Durability{Sync: SyncNever}})
	fillBench(b, s, 100000, 1000)
	for _, c := range []struct{ name, filter string }{
		{"literal", "bench.1.2.3"},
		{"narrow", "bench.1.2.*"},
		{"broad", "bench.1.*.*"},
		{"all", ""},
	} {
		b.Run("filter="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			from := uint64(0)
			for i := 0; i < b.N; i++ {
				m, err := s.Next(from, c.filter)
				if err != nil {
					from = 0 // start over at the end
					continue
				}
				from = m.Seq + 1
			}
		})
	}
}
