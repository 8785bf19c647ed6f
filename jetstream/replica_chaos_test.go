package jetstream_test

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
)

// The fault-injection suite of replicated streams, in process (design
// 7.3). make test runs its short form; make chaos runs more rounds:
//
//	go test ./jetstream -run TestChaosReplicated -chaos.rounds=30
var (
	chaosRounds = flag.Int("chaos.rounds", 3, "rounds of faults in TestChaosReplicated")
	chaosRound  = flag.Duration("chaos.round", 3*time.Second, "the workload's time per round in TestChaosReplicated")
)

// chaosReport is what a chaos run counts.
type chaosReport struct {
	rounds, faults, acked, lost, duplicated int
	// The durable consumer: messages it delivered (distinct), deliveries
	// beyond the first, acks confirmed, messages delivered again after
	// their ack was confirmed (must be 0), acknowledged messages it never
	// delivered (must be 0).
	consumed, redelivered, confirmed, ackedAgain, missed int
	// The work queue: publishes acknowledged, of them never delivered
	// (must be 0), and the most messages any replica kept after the
	// drain (must be 0).
	wqAcked, wqMissed, wqLeft int
	linOps, linWrites         int
	linearizable              porcupine.CheckResult
}

func (r chaosReport) String() string {
	return fmt.Sprintf("chaos: rounds=%d faults=%d acked=%d lost=%d duplicated=%d "+
		"consumed=%d redelivered=%d acks_confirmed=%d delivered_after_ack=%d missed=%d "+
		"wq_acked=%d wq_missed=%d wq_left=%d lin_ops=%d lin_writes=%d linearizable=%s",
		r.rounds, r.faults, r.acked, r.lost, r.duplicated,
		r.consumed, r.redelivered, r.confirmed, r.ackedAgain, r.missed,
		r.wqAcked, r.wqMissed, r.wqLeft,
		r.linOps, r.linWrites, r.linearizable)
}

// TestChaosReplicated: publishers with acks and a linearizability client
// run against R3 streams while the test stops and restarts the stream's
// leader, the meta leader, or every server at once, round after round,
// with logs compacted and replicas catching up from snapshots between
// faults. Then every acknowledged message must be in the stream once, at
// its acknowledged sequence, with its payload, on every replica; a durable
// consumer, fetching and acknowledging synchronously throughout, must
// have been given every acknowledged message, and never one again after
// its ack was confirmed; and the history of Nats-Expected-Last-Sequence
// publishes and MSG.GET reads must be linearizable (porcupine).
func TestChaosReplicated(t *testing.T) {
	jetstream.SetReplicaLog(t, 16, 4096)
	jc := startReplicatedCluster(t, 3)
	urls := make([]string, 3)
	for i := range 3 {
		urls[i] = jc.URL(i)
	}
	connect := func(first int) nats.JetStreamContext {
		order := append(append([]string{}, urls[first:]...), urls[:first]...)
		nc, err := nats.Connect(strings.Join(order, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
			nats.ReconnectWait(20*time.Millisecond), nats.Timeout(time.Second))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := nc.JetStream(nats.MaxWait(time.Second))
		require.NoError(t, err)
		return js
	}
	admin := connect(0)
	for _, name := range []string{"CH", "LIN", "WQ"} {
		cfg := &nats.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Replicas: 3}
		if name == "WQ" {
			cfg.Retention = nats.WorkQueuePolicy
		}
		require.Eventually(t, func() bool {
			_, err := admin.AddStream(cfg)
			return err == nil
		}, clustertest.Wait, 50*time.Millisecond)
		jc.waitReplicated(t, name, map[uint64]string{})
	}
	require.Eventually(t, func() bool {
		_, err := admin.AddConsumer("WQ", &nats.ConsumerConfig{Durable: "W", AckPolicy: nats.AckExplicitPolicy, AckWait: 2 * time.Second})
		return err == nil
	}, clustertest.Wait, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := admin.AddConsumer("CH", &nats.ConsumerConfig{Durable: "D", AckPolicy: nats.AckExplicitPolicy, AckWait: 2 * time.Second})
		return err == nil
	}, clustertest.Wait, 50*time.Millisecond)

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   = map[string]uint64{} // message ID (= payload) -> acknowledged sequence
		stop    = make(chan struct{})
		hist    []porcupine.Operation
		stopped = func() bool {
			select {
			case <-stop:
				return true
			default:
				return false
			}
		}
	)
	// publisher publishes on subj until the test stops, sequentially,
	// each message retried with its ID until acknowledged, and records
	// each acknowledged one.
	publisher := func(js nats.JetStreamContext, subj, prefix string, record func(id string, seq uint64)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stopped(); k++ {
				id := fmt.Sprintf("%s-%d", prefix, k)
				for !stopped() {
					ack, err := js.Publish(subj, []byte(id), nats.MsgId(id))
					if err == nil {
						mu.Lock()
						record(id, ack.Sequence)
						mu.Unlock()
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	for p := range 3 {
		publisher(connect(p), "ch.x", fmt.Sprintf("p%d", p), func(id string, seq uint64) { acked[id] = seq })
	}
	// The durable consumer D on CH: fetches, each acknowledged
	// synchronously. A message that comes in a fetch asked for after its
	// ack was confirmed is an ack the cluster lost.
	// consumer fetches from a durable until the test stops,
	// acknowledging synchronously.
	consumer := func(js nats.JetStreamContext, stream, durable string) *chaosConsumer {
		c := &chaosConsumer{js: js, stream: stream, durable: durable, delivered: map[uint64]int{}, confirmed: map[uint64]bool{}, confirmedAt: map[uint64]time.Time{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped() {
				c.fetch(t, true)
			}
		}()
		return c
	}
	cons := consumer(connect(2), "CH", "D")
	// A work queue: one publisher with acks and message IDs, and its
	// consumer W fetching and acknowledging synchronously. Every
	// acknowledged publish must be delivered, and the queue end empty on
	// every replica once everything is acknowledged.
	var wqAcked []uint64
	publisher(connect(1), "wq.x", "w", func(_ string, seq uint64) { wqAcked = append(wqAcked, seq) })
	wq := consumer(connect(0), "WQ", "W")
	// Linearizability clients on LIN: publishes that expect a last
	// sequence, and reads.
	for c := range 2 {
		js := connect(c + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			known := uint64(0)
			for k := 0; !stopped(); k++ {
				var op porcupine.Operation
				op.ClientId = c
				if rng.IntN(2) == 0 {
					in := linInput{pub: true, expect: known, payload: fmt.Sprintf("c%d-%d", c, k)}
					op.Input, op.Call = in, time.Now().UnixNano()
					ack, err := js.Publish("lin.x", []byte(in.payload), nats.ExpectLastSequence(in.expect))
					op.Return = time.Now().UnixNano()
					switch l, wrong := wrongLast(err); {
					case err == nil:
						op.Output, known = linOutput{seq: ack.Sequence}, ack.Sequence
					case wrong:
						op.Output, known = linOutput{wrong: true, seq: l}, l
					default:
						op.Output, op.Return = linOutput{unknown: true}, math.MaxInt64
					}
				} else {
					seq := uint64(rng.IntN(int(known)+2)) + 1
					op.Input, op.Call = linInput{get: seq}, time.Now().UnixNano()
					m, err := js.GetMsg("LIN", seq)
					op.Return = time.Now().UnixNano()
					switch {
					case err == nil:
						op.Output = linOutput{found: true, payload: string(m.Data)}
					case apiCode(err) == 10037:
						op.Output = linOutput{}
					default:
						continue // an error says nothing of the state
					}
				}
				mu.Lock()
				hist = append(hist, op)
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}

	rep := chaosReport{rounds: *chaosRounds}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for r := range *chaosRounds {
		time.Sleep(*chaosRound / 2)
		switch r % 3 {
		case 0: // the stream's leader
			_, lead := jc.replicas("CH")
			if lead < 0 {
				lead = rng.IntN(3)
			}
			jc.Stop(t, lead)
			time.Sleep(*chaosRound / 2)
			jc.Restart(t, lead)
		case 1: // the meta leader
			lead := 0
			for i := range 3 {
				if jc.raft(i).IsLeader() {
					lead = i
				}
			}
			jc.Stop(t, lead)
			time.Sleep(*chaosRound / 2)
			jc.Restart(t, lead)
		case 2: // every server at once
			jc.RestartAll(t)
		}
		rep.faults++
		jc.waitMeta(t)
	}
	time.Sleep(*chaosRound / 2)
	close(stop)
	wg.Wait()

	// Settle: every replica holds the same messages, one leads.
	var final map[uint64]string
	require.Eventually(t, func() bool {
		reps, lead := jc.replicas("CH")
		if lead < 0 {
			return false
		}
		for _, r := range reps[1:] {
			if len(r) != len(reps[0]) {
				return false
			}
			for seq, v := range reps[0] {
				if r[seq] != v {
					return false
				}
			}
		}
		final = reps[0]
		return true
	}, 2*clustertest.Wait, 50*time.Millisecond, "the replicas of CH agree")
	seen := map[string]int{}
	for _, v := range final {
		seen[v]++
	}
	for _, n := range seen {
		if n > 1 {
			rep.duplicated += n - 1
		}
	}
	rep.acked = len(acked)
	for id, seq := range acked {
		if final[seq] != id {
			rep.lost++
			t.Errorf("acknowledged %s at sequence %d; the stream holds %q there", id, seq, final[seq])
		}
	}
	// The consumer drains the stream: everything acknowledged comes.
	rep.missed = cons.drain(t, slices.Collect(maps.Values(acked)))
	rep.consumed, rep.confirmed, rep.ackedAgain = len(cons.delivered), len(cons.confirmed), cons.again
	for _, n := range cons.delivered {
		rep.redelivered += n - 1
	}
	// The work queue drains: every acknowledged publish delivered, then
	// nothing left on any replica (removals an old leader did not see
	// applied are swept by the next).
	rep.wqAcked, rep.wqMissed = len(wqAcked), wq.drain(t, wqAcked)
	rep.ackedAgain += wq.again
	require.Eventually(t, func() bool {
		reps, lead := jc.replicas("WQ")
		rep.wqLeft = 0
		for _, r := range reps {
			rep.wqLeft = max(rep.wqLeft, len(r))
		}
		return lead >= 0 && rep.wqLeft == 0
	}, 2*clustertest.Wait, 50*time.Millisecond, "the work queue drains on every replica")
	rep.linOps = len(hist)
	for _, op := range hist {
		if out := op.Output.(linOutput); op.Input.(linInput).pub && !out.wrong && !out.unknown {
			rep.linWrites++
		}
	}
	rep.linearizable = porcupine.CheckOperationsTimeout(linModel(), hist, 30*time.Second)
	t.Log(rep)
	if rep.linearizable == porcupine.Illegal {
		dumpLinHistory(t, hist)
	}
	require.Zero(t, rep.lost)
	require.Zero(t, rep.duplicated, "a retried message ID is deduplicated")
	require.Positive(t, rep.acked)
	require.Zero(t, rep.missed, "the durable consumer is given every acknowledged message")
	require.Zero(t, rep.wqMissed, "the work queue's consumer is given every acknowledged message")
	require.Positive(t, rep.wqAcked)
	require.Zero(t, rep.ackedAgain, "no message is delivered again after its ack was confirmed")
	require.Positive(t, rep.confirmed)
	require.NotEqual(t, porcupine.Illegal, rep.linearizable, "the history of LIN is linearizable")
}

// chaosConsumer is the chaos suite's durable consumer's client side.
type chaosConsumer struct {
	js              nats.JetStreamContext
	stream, durable string
	delivered       map[uint64]int  // stream sequence -> deliveries
	confirmed       map[uint64]bool // acks confirmed
	confirmedAt     map[uint64]time.Time
	again           int // deliveries asked for after the ack was confirmed
}

// drain fetches until every one of seqs was delivered, or for a bounded
// time, and returns how many never were.
func (c *chaosConsumer) drain(t *testing.T, seqs []uint64) int {
	missing := func() int {
		n := 0
		for _, seq := range seqs {
			if c.delivered[seq] == 0 {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(2 * clustertest.Wait); missing() > 0 && time.Now().Before(deadline); {
		c.fetch(t, false)
	}
	return missing()
}

// fetch fetches once (a subscription of its own, so that nothing sent for
// an earlier fetch arrives in this one) and acknowledges what came:
// synchronously, or (draining: faster) without waiting.
func (c *chaosConsumer) fetch(t *testing.T, sync bool) {
	sub, err := c.js.PullSubscribe("", c.durable, nats.Bind(c.stream, c.durable))
	if err != nil {
		time.Sleep(20 * time.Millisecond)
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	batch := 50
	if !sync {
		batch = 500
	}
	msgs, _ := sub.Fetch(batch, nats.MaxWait(500*time.Millisecond))
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		seq := md.Sequence.Stream
		c.delivered[seq]++
		if c.confirmed[seq] {
			c.again++
			t.Errorf("message %d delivered again (delivery %d, consumer sequence %d, delivered at %s, now %s) after its ack was confirmed at %s",
				seq, md.NumDelivered, md.Sequence.Consumer, md.Timestamp.Format(time.StampMicro),
				time.Now().Format(time.StampMicro), c.confirmedAt[seq].Format(time.StampMicro))
		}
		switch {
		case !sync:
			_ = m.Ack()
		case m.AckSync(nats.AckWait(time.Second)) == nil:
			c.confirmed[seq] = true
			c.confirmedAt[seq] = time.Now()
		}
	}
}

// dumpLinHistory writes a history found not linearizable, one operation
// a line in the order of their calls, to the file SKIFF_CHAOS_DUMP names,
// for the one reading the failure.
func dumpLinHistory(t *testing.T, hist []porcupine.Operation) {
	path := os.Getenv("SKIFF_CHAOS_DUMP")
	if path == "" {
		return
	}
	ops := slices.Clone(hist)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "%d %d c%d %+v %+v\n", op.Call, op.Return, op.ClientId, op.Input, op.Output)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Logf("writing the history: %v", err)
		return
	}
	t.Logf("the history is in %s", path)
}

// The porcupine model of a stream written only by publishes that expect
// a last sequence: the state is the payloads in sequence order.
type linInput struct {
	pub     bool
	expect  uint64
	payload string
	get     uint64
}

type linOutput struct {
	seq     uint64 // a publish's acknowledged sequence, or the last a wrong one was told
	wrong   bool
	unknown bool
	found   bool
	payload string
}

var wrongLastRE = regexp.MustCompile(`wrong last sequence: (\d+)`)

// wrongLast returns the last sequence a refused publish was told.
func wrongLast(err error) (uint64, bool) {
	if err == nil {
		return 0, false
	}
	m := wrongLastRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	l, perr := strconv.ParseUint(m[1], 10, 64)
	return l, perr == nil
}

func linModel() porcupine.Model {
	return (&porcupine.NondeterministicModel{
		Init: func() []any { return []any{""} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(string), input.(linInput), output.(linOutput)
			var msgs []string
			if s != "" {
				msgs = strings.Split(s, ",")
			}
			n := uint64(len(msgs))
			appended := in.payload
			if s != "" {
				appended = s + "," + in.payload
			}
			switch {
			case in.pub && out.unknown:
				if in.expect == n {
					return []any{s, appended}
				}
				return []any{s}
			case in.pub && out.wrong:
				if in.expect != n && out.seq == n {
					return []any{s}
				}
			case in.pub:
				if in.expect == n && out.seq == n+1 {
					return []any{appended}
				}
			case out.found:
				if in.get <= n && msgs[in.get-1] == out.payload {
					return []any{s}
				}
			default:
				if in.get > n {
					return []any{s}
				}
			}
			return nil
		},
	}).ToModel()
}

// TestLinModel: the model refuses what a stream must never do: a read of
// a message before its publish was called, a stale read after a later
// write was acknowledged, two publishes acknowledged at one sequence.
func TestLinModel(t *testing.T) {
	pub := func(c int, call, ret int64, expect, seq uint64, p string) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Call: call, Return: ret, Input: linInput{pub: true, expect: expect, payload: p}, Output: linOutput{seq: seq}}
	}
	get := func(c int, call, ret int64, seq uint64, p string) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Call: call, Return: ret, Input: linInput{get: seq}, Output: linOutput{found: p != "", payload: p}}
	}
	for _, tc := range []struct {
		name string
		hist []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential", []porcupine.Operation{pub(0, 1, 2, 0, 1, "a"), get(1, 3, 4, 1, "a"), pub(0, 5, 6, 1, 2, "b")}, porcupine.Ok},
		{"a read before the write", []porcupine.Operation{get(1, 1, 2, 1, "a"), pub(0, 3, 4, 0, 1, "a")}, porcupine.Illegal},
		{"a stale read", []porcupine.Operation{pub(0, 1, 2, 0, 1, "a"), get(1, 3, 4, 1, "")}, porcupine.Illegal},
		{"one sequence twice", []porcupine.Operation{pub(0, 1, 2, 0, 1, "a"), pub(1, 3, 4, 0, 1, "b")}, porcupine.Illegal},
		{"an unknown write may have happened", []porcupine.Operation{
			{ClientId: 0, Call: 1, Return: math.MaxInt64, Input: linInput{pub: true, payload: "a"}, Output: linOutput{unknown: true}},
			get(1, 3, 4, 1, "a")}, porcupine.Ok},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperationsTimeout(linModel(), tc.hist, 10*time.Second))
		})
	}
}
