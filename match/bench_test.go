package match_test

// The matching benchmarks of docs/benchmarks/matching.md. They reproduce the
// workloads of Tyler Treat's "Fast Topic Matching"
// (https://bravenewgeek.com/fast-topic-matching/) with the names below, so that
// runs compare across versions; `skiff bench match` runs them and renders
// the report's tables (numbered below) and charts.
//
//	BenchmarkMatch/algo=A/op=O/state=S      1  ns per subscribe/unsubscribe/lookup
//	BenchmarkThroughput/algo=A              2  lookups per second, one goroutine
//	BenchmarkMemory/algo=A/subs=N           3  retained heap bytes per subscription
//	BenchmarkConcurrent/algo=A/mix=M/goroutines=G   4  ns per batch
//	BenchmarkContention/engine=E/ratio=R/goroutines=G  5  ns per batch, against nats-server's Sublist

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/bitmap"
	"github.com/skiffmq/skiff/match/cstrie"
	"github.com/skiffmq/skiff/match/naive"
	"github.com/skiffmq/skiff/match/posbitmap"
	"github.com/skiffmq/skiff/match/trie"
)

// sub is the subscriber type of the benchmarks: a pointer, as in the
// broker.
type sub struct{ id int }

var algos = []string{"naive", "bitmap", "posbitmap", "trie", "cstrie"}

// newEngine builds an engine. topics is the known topic space, used only by
// the inverted bitmap; maxTokens is the position-optimized bitmap's width.
func newEngine(tb testing.TB, algo string, topics []string, maxTokens int) match.Matcher[*sub] {
	switch algo {
	case "naive":
		return naive.New[*sub]()
	case "bitmap":
		m, err := bitmap.New[*sub](bitmap.Options{Topics: topics})
		if err != nil {
			tb.Fatal(err)
		}
		return m
	case "posbitmap":
		m, err := posbitmap.New[*sub](posbitmap.Options{MaxTokens: maxTokens})
		if err != nil {
			tb.Fatal(err)
		}
		return m
	case "trie":
		return trie.New[*sub]()
	case "cstrie":
		return cstrie.New[*sub]()
	}
	tb.Fatalf("unknown algorithm %q", algo)
	return nil
}

// randomTopics returns n topics of five words, each word a random integer
// in decimal, from a fixed seed so that runs are comparable.
func randomTopics(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 0x70b1c))
	out := make([]string, n)
	var b strings.Builder
	for i := range out {
		b.Reset()
		for w := range 5 {
			if w > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.FormatInt(rng.Int64(), 10))
		}
		out[i] = b.String()
	}
	return out
}

func subs(n int) []*sub {
	out := make([]*sub, n)
	for i := range out {
		out[i] = &sub{id: i}
	}
	return out
}

func fill(tb testing.TB, m match.Matcher[*sub], topics []string, who []*sub) {
	for i, t := range topics {
		if err := m.Subscribe(t, "", who[i%len(who)]); err != nil {
			tb.Fatal(err)
		}
	}
}

const (
	matchPattern = "foo.*.baz.qux.quux"
	matchSubject = "foo.bar.baz.qux.quux"
)

// BenchmarkMatch is table 1: the latency of one operation on an empty (cold)
// index and on one holding 1,000 random five-word subscriptions (hot).
// subscribe repeats one subscription (after the first call it is already
// present) and unsubscribe repeats one removal (after the first it is
// absent), exactly as the original; churn, our addition, subscribes and
// unsubscribes a new entry on every iteration, the cost a broker pays.
func BenchmarkMatch(b *testing.B) {
	hot := randomTopics(1000, 1)
	for _, algo := range algos {
		for _, op := range []string{"subscribe", "unsubscribe", "lookup", "churn"} {
			for _, state := range []string{"cold", "hot"} {
				b.Run(fmt.Sprintf("algo=%s/op=%s/state=%s", algo, op, state), func(b *testing.B) {
					topics := []string{matchSubject}
					if state == "hot" {
						topics = append(topics, hot...)
					}
					m := newEngine(b, algo, topics, 5)
					if state == "hot" {
						fill(b, m, hot, subs(1000))
					}
					s0 := &sub{}
					benchOp(b, m, op, s0)
				})
			}
		}
	}
}

func benchOp(b *testing.B, m match.Matcher[*sub], op string, s0 *sub) {
	switch op {
	case "subscribe":
		b.ReportAllocs()
		for b.Loop() {
			_ = m.Subscribe(matchPattern, "", s0)
		}
	case "unsubscribe":
		if err := m.Subscribe(matchPattern, "", s0); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			_ = m.Unsubscribe(matchPattern, "", s0)
		}
	case "lookup":
		if err := m.Subscribe(matchPattern, "", s0); err != nil {
			b.Fatal(err)
		}
		var r match.Result[*sub]
		b.ReportAllocs()
		for b.Loop() {
			if err := m.Lookup(matchSubject, &r); err != nil || len(r.Plain) != 1 {
				b.Fatalf("lookup: %v %v", err, r.Plain)
			}
		}
	case "churn":
		b.ReportAllocs()
		for b.Loop() {
			if err := m.Subscribe(matchPattern, "", s0); err != nil {
				b.Fatal(err)
			}
			if err := m.Unsubscribe(matchPattern, "", s0); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// throughputWorkload is table 2's workload: 1,000 three-token patterns over digits, with
// a "*" in one position for some, and 100,000 subjects derived from them.
func throughputWorkload() (patterns, subjects []string) {
	rng := rand.New(rand.NewPCG(2, 0x7410))
	d := func() string { return strconv.Itoa(rng.IntN(10)) }
	patterns = make([]string, 1000)
	for i := range patterns {
		switch {
		case i%10 == 0:
			patterns[i] = "*." + d() + "." + d()
		case i%25 == 0:
			patterns[i] = d() + ".*." + d()
		case i%45 == 0:
			patterns[i] = d() + "." + d() + ".*"
		default:
			patterns[i] = d() + "." + d() + "." + d()
		}
	}
	subjects = make([]string, 100000)
	for i := range subjects {
		subjects[i] = strings.ReplaceAll(patterns[i%len(patterns)], "*", d())
	}
	return patterns, subjects
}

// BenchmarkThroughput is table 2: lookups per second from one goroutine.
func BenchmarkThroughput(b *testing.B) {
	patterns, subjects := throughputWorkload()
	for _, algo := range algos {
		b.Run("algo="+algo, func(b *testing.B) {
			m := newEngine(b, algo, subjects, 3)
			who := subs(len(patterns))
			fill(b, m, patterns, who)
			var r match.Result[*sub]
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range subjects {
					_ = m.Lookup(s, &r)
				}
			}
			b.ReportMetric(float64(b.N*len(subjects))/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkMemory is table 3: heap retained per subscription, for N random
// five-word subscriptions. Subscriber objects and pattern strings are made
// before the measurement and are not counted; what an engine copies or
// builds is. nats-server's Sublist is measured the same way.
func BenchmarkMemory(b *testing.B) {
	for _, algo := range append(algos, "sublist") {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("algo=%s/subs=%d", algo, n), func(b *testing.B) {
				topics := randomTopics(n, 3)
				var build func() any
				if algo == "sublist" {
					pre := newSublistPeer(false).prepareFill(topics)
					build = func() any { return pre() }
				} else {
					who := subs(n)
					build = func() any {
						m := newEngine(b, algo, topics, 5)
						fill(b, m, topics, who)
						return m
					}
				}
				var perSub float64
				for b.Loop() {
					perSub = retainedBytes(build) / float64(n)
				}
				b.ReportMetric(perSub, "B/sub")
			})
		}
	}
}

// retainedBytes returns the live heap that what build returns holds.
func retainedBytes(build func() any) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := build()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(x)
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}

// concurrencyTopics is goroutine-independent, as in the original: topic j
// is "j%10.j%50.j".
func concurrencyTopics() []string {
	out := make([]string, 1000)
	for j := range out {
		out[j] = fmt.Sprintf("%d.%d.%d", j%10, j%50, j)
	}
	return out
}

// BenchmarkConcurrent is table 4: G goroutines each do 1,000 operations on an
// index holding 1,000 random subscriptions; in 50-50 the odd goroutines
// subscribe and the even ones look up, in 90-10 every tenth goroutine
// subscribes. One op is the whole batch. Every batch starts from a fresh
// index (outside the timer), so subscriptions are real inserts each time.
func BenchmarkConcurrent(b *testing.B) {
	prefill := randomTopics(1000, 1)
	topics := concurrencyTopics()
	space := append(append([]string(nil), prefill...), topics...)
	for _, algo := range algos {
		for _, mix := range []string{"50-50", "90-10"} {
			for _, g := range []int{2, 4, 8, 12, 16} {
				b.Run(fmt.Sprintf("algo=%s/mix=%s/goroutines=%d", algo, mix, g), func(b *testing.B) {
					writer := func(i int) bool {
						if mix == "50-50" {
							return i%2 == 1
						}
						return i%10 == 0
					}
					who := subs(g)
					pre := subs(1000)
					for range b.N {
						b.StopTimer()
						m := newEngine(b, algo, space, 5)
						fill(b, m, prefill, pre)
						runtime.GC() // collect setup garbage outside the timer
						b.StartTimer()
						runBatch(g, func(i int) {
							if writer(i) {
								for _, t := range topics {
									_ = m.Subscribe(t, "", who[i])
								}
								return
							}
							var r match.Result[*sub]
							for _, t := range topics {
								_ = m.Lookup(t, &r)
							}
						})
					}
				})
			}
		}
	}
}

// runBatch runs work(0..g-1) on g goroutines and waits for them.
func runBatch(g int, work func(i int)) {
	var wg sync.WaitGroup
	wg.Add(g)
	for i := range g {
		go func() {
			defer wg.Done()
			work(i)
		}()
	}
	wg.Wait()
}

// contender is one engine in the contention benchmark: prepare builds a
// fresh, prefilled index and returns the work of one inserting goroutine
// (its k-th, of 1,000 subscriptions) and of one looking-up goroutine.
type contender interface {
	prepare(prefill, topics []string, inserters int) (insert func(k int), lookup func())
}

type engineContender struct{ algo string }

func (c engineContender) prepare(prefill, topics []string, inserters int) (func(int), func()) {
	m := newEngine(nil, c.algo, nil, 5)
	for i, t := range prefill {
		_ = m.Subscribe(t, "", &sub{id: i})
	}
	who := subs(inserters)
	insert := func(k int) {
		for _, t := range topics {
			_ = m.Subscribe(t, "", who[k])
		}
	}
	lookup := func() {
		var r match.Result[*sub]
		for _, t := range topics {
			_ = m.Lookup(t, &r)
		}
	}
	return insert, lookup
}

// BenchmarkContention is table 5, the matchbox benchmark: inserting goroutines
// each subscribe 1,000 subscriptions while looking-up goroutines each do
// 1,000 lookups, insert:lookup 1:1 or 1:3 among G goroutines (at G=2 the
// 1:3 split can only be 1:1). The peer is nats-server's own Sublist, with
// and without its result cache. One op is the whole batch, from a fresh
// prefilled index.
func BenchmarkContention(b *testing.B) {
	prefill := randomTopics(1000, 1)
	topics := concurrencyTopics()
	engines := []struct {
		name string
		c    contender
	}{
		{"cstrie", engineContender{"cstrie"}},
		{"trie", engineContender{"trie"}},
		{"sublist", newSublistPeer(true)},
		{"sublist-nocache", newSublistPeer(false)},
	}
	for _, e := range engines {
		for _, ratio := range []int{1, 3} {
			for _, g := range []int{2, 4, 8, 16} {
				b.Run(fmt.Sprintf("engine=%s/ratio=1:%d/goroutines=%d", e.name, ratio, g), func(b *testing.B) {
					inserters := max(1, g/(1+ratio))
					for range b.N {
						b.StopTimer()
						insert, lookup := e.c.prepare(prefill, topics, inserters)
						runtime.GC() // collect setup garbage outside the timer
						b.StartTimer()
						runBatch(g, func(i int) {
							if i < inserters {
								insert(i)
							} else {
								lookup()
							}
						})
					}
				})
			}
		}
	}
}
