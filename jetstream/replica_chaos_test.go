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

	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// The fault-injection suite of replicated streams, in process (design
// 7.3), on one cluster per sync policy. make test runs its short form
// (each policy's five faults of chaosPolicies); make chaos runs every
// kind of fault in turn for more rounds, and the never policy:
//
//	go test ./jetstream -run TestChaosReplicated -chaos.rounds=30 -chaos.sync=interval,always,never
var (
	chaosRounds = flag.Int("chaos.rounds", 0, "rounds of faults per sync policy in TestChaosReplicated (0: the short form)")
	chaosRound  = flag.Duration("chaos.round", 3*time.Second, "the workload's time per round in TestChaosReplicated")
	chaosSync   = flag.String("chaos.sync", "interval,always", "the sync policies TestChaosReplicated runs, a cluster each: interval, always, never")
)

// chaosReport is what a chaos run counts: acknowledged messages lost (and
// of them, those the policy allows: chaosfs.Losses), stored twice, and
// replicas that differ from the leader once settled (diverged: must be 0,
// a replica that diverged after a loss the policy allows is rebuilt);
// the durable consumer's
// messages delivered (distinct), deliveries beyond the first, acks
// confirmed, messages delivered again after their ack was confirmed
// (again; ackedAgain: those outside the policy's bound, which must be 0),
// acknowledged messages still stored it never delivered (must be 0); the
// work queue's publishes acknowledged, of them never delivered (must be 0
// outside the bound), and the most messages any replica kept after the
// drain (must be 0); the linearizability history.
type chaosReport struct {
	sync                             string
	rounds, faults, acked, lost      int
	lostAllowed, duplicated, diverge int
	consumed, redelivered, confirmed int
	again, ackedAgain, missed        int
	wqAcked, wqMissed, wqLeft        int
	linOps, linWrites                int
	linearizable                     porcupine.CheckResult
}

func (r chaosReport) String() string {
	return fmt.Sprintf("chaos: sync=%s rounds=%d faults=%d acked=%d lost=%d lost_within_bound=%d duplicated=%d diverged=%d "+
		"consumed=%d redelivered=%d acks_confirmed=%d delivered_after_ack=%d (outside the bound: %d) missed=%d "+
		"wq_acked=%d wq_missed=%d wq_left=%d lin_ops=%d lin_writes=%d linearizable=%s",
		r.sync, r.rounds, r.faults, r.acked, r.lost, r.lostAllowed, r.duplicated, r.diverge,
		r.consumed, r.redelivered, r.confirmed, r.again, r.ackedAgain, r.missed,
		r.wqAcked, r.wqMissed, r.wqLeft,
		r.linOps, r.linWrites, r.linearizable)
}

// chaosPolicies are the sync policies TestChaosReplicated knows, and the
// faults of each one's short form (indexes in replicaFaults): where the
// policy's contract is that nothing acknowledged is lost. A power loss of
// a quorum under interval and never, which the contract allows to lose
// what was acknowledged within the bound, runs in make chaos.
var chaosPolicies = map[string]struct {
	policy jetstream.SyncPolicy
	short  []int
}{
	"interval": {jetstream.SyncInterval, []int{3, 4, 0, 8, 2}},
	"always":   {jetstream.SyncAlways, []int{5, 7, 6, 1, 3}},
	"never":    {jetstream.SyncNever, []int{4, 7, 3, 0, 1}},
}

// replicaFault is one kind of fault of TestChaosReplicated. It returns,
// for a power loss of a quorum or more, when the power began to go and
// when it was gone.
type replicaFault struct {
	name string
	do   func(t *testing.T, jc *jsCluster) (from, to time.Time, quorum bool)
}

// streamLeaderOf returns the index of the server leading a stream, or
// any if none does.
func (jc *jsCluster) streamLeaderOf(name string) int {
	_, lead := jc.replicas(name)
	return max(lead, 0)
}

// powerLossFault powers off the servers pick returns, keeps them down
// for half a round, and boots them again.
func powerLossFault(pick func(jc *jsCluster) []int) func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
	return func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		idx := pick(jc)
		slices.Sort(idx)
		from, to := jc.powerLoss(t, idx...)
		time.Sleep(*chaosRound / 2)
		for _, i := range idx {
			jc.Restart(t, i)
		}
		return from, to, 2*len(idx) > len(jc.Servers)
	}
}

var replicaFaults = []replicaFault{
	{"stop the stream leader", func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		lead := jc.streamLeaderOf("CH")
		jc.Stop(t, lead)
		time.Sleep(*chaosRound / 2)
		jc.Restart(t, lead)
		return time.Time{}, time.Time{}, false
	}},
	{"stop the meta leader", func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		lead := 0
		for i := range jc.Servers {
			if jc.raft(i).IsLeader() {
				lead = i
			}
		}
		jc.Stop(t, lead)
		time.Sleep(*chaosRound / 2)
		jc.Restart(t, lead)
		return time.Time{}, time.Time{}, false
	}},
	{"restart every server", func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		jc.RestartAll(t)
		return time.Time{}, time.Time{}, false
	}},
	{"power loss of the stream leader", powerLossFault(func(jc *jsCluster) []int {
		return []int{jc.streamLeaderOf("CH")}
	})},
	{"power loss of a follower", powerLossFault(func(jc *jsCluster) []int {
		return []int{(jc.streamLeaderOf("CH") + 1) % len(jc.Servers)}
	})},
	{"power loss of a quorum (the stream leader and a follower)", powerLossFault(func(jc *jsCluster) []int {
		lead := jc.streamLeaderOf("CH")
		return []int{lead, (lead + 1) % len(jc.Servers)}
	})},
	{"power loss of every server", powerLossFault(func(jc *jsCluster) []int {
		return []int{0, 1, 2}
	})},
	{"cut the stream leader off, then hand it the lead back", func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		lead := jc.streamLeaderOf("CH")
		jc.cutOff(lead)
		time.Sleep(*chaosRound / 2)
		jc.cutOff(-1)
		if !jc.handLeadTo(t, "CH", lead) {
			t.Logf("server %d did not lead again", lead)
		}
		return time.Time{}, time.Time{}, false
	}},
	{"cut a follower off", func(t *testing.T, jc *jsCluster) (time.Time, time.Time, bool) {
		jc.cutOff((jc.streamLeaderOf("CH") + 1) % len(jc.Servers))
		time.Sleep(*chaosRound / 2)
		jc.cutOff(-1)
		return time.Time{}, time.Time{}, false
	}},
}

// cutOff cuts server i's raft links to every other server, as a network
// partition would, with the routes left up: its clients' publishes still
// reach it, and, while it believes it leads, it takes them. -1 heals.
func (jc *jsCluster) cutOff(i int) {
	if i < 0 {
		for k := range jc.Servers {
			if jc.Servers[k] != nil {
				jc.raft(k).SetPartition(nil)
			}
		}
		return
	}
	name := jc.Servers[i].Name()
	for k := range jc.Servers {
		switch {
		case jc.Servers[k] == nil:
		case k == i:
			jc.raft(k).SetPartition(func(string) bool { return true })
		default:
			jc.raft(k).SetPartition(func(peer string) bool { return peer == name })
		}
	}
}

// handLeadTo asks, for a few seconds, that server i lead a stream again
// (a stepdown naming it, once it caught up): leadership back on a server
// that lost proposals while cut off.
func (jc *jsCluster) handLeadTo(t *testing.T, stream string, i int) bool {
	nc := jc.Connect(t, (i+1)%len(jc.Servers))
	defer nc.Close()
	req := []byte(`{"placement":{"preferred":"` + jc.Servers[i].Name() + `"}}`)
	return within(clustertest.Wait/2, func() bool {
		if _, l := jc.replicas(stream); l == i {
			return true
		}
		_, _ = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, req, time.Second)
		time.Sleep(200 * time.Millisecond)
		_, l := jc.replicas(stream)
		return l == i
	})
}

// TestChaosReplicated: publishers with acks and a linearizability client
// run against R3 streams while the test stops and restarts the stream's
// leader, the meta leader, or every server at once, cuts the power of
// one server, of a quorum, or of all, or cuts the raft links of the
// stream's leader (its clients still reach it; healed, it is handed the
// lead back) or of a follower, round after round, with logs
// compacted and replicas catching up from snapshots between faults, on a
// cluster per sync policy. Then every acknowledged message must be in the
// stream once, at its acknowledged sequence, with its payload, on every
// replica, but where the policy allows a loss (design 2.4: under interval,
// a message acknowledged within the interval plus 50 ms of a power loss
// of a quorum or more; under never, any before such a loss); a durable
// consumer, fetching and acknowledging synchronously throughout, must
// have been given every acknowledged message still stored, and never one
// again after its ack was confirmed (outside a loss); and, unless a loss
// was allowed, the history of Nats-Expected-Last-Sequence publishes and
// MSG.GET reads must be linearizable (porcupine).
func TestChaosReplicated(t *testing.T) {
	jetstream.SetReplicaLog(t, 16, 4096)
	jetstream.SetStripMinAvg(t, 0) // every message staged, written once (replica_payloads.go)
	for _, name := range strings.Split(*chaosSync, ",") {
		p, ok := chaosPolicies[name]
		require.True(t, ok, "-chaos.sync: unknown policy %q", name)
		faults := p.short
		if *chaosRounds > 0 {
			faults = nil
			for r := range *chaosRounds {
				faults = append(faults, r%len(replicaFaults))
			}
		}
		t.Run("sync="+name, func(t *testing.T) { runChaosReplicated(t, name, p.policy, faults) })
	}
}

func runChaosReplicated(t *testing.T, name string, policy jetstream.SyncPolicy, faults []int) {
	jc := startJSClusterPowered(t, make([]string, 3), server.Options{}, nil, newPower(3, policy, jetstream.DefaultSyncInterval))
	jc.waitMeta(t)
	windows := chaosfs.NewLosses(jetstream.DurabilityOf(policy, jetstream.DefaultSyncInterval))
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
		acked   = map[string]uint64{}    // message ID (= payload) -> acknowledged sequence
		ackedAt = map[string]time.Time{} // message ID -> when its ack came
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
						ackedAt[id] = time.Now()
						record(id, ack.Sequence)
						mu.Unlock()
						// Paced: under interval a publish takes a
						// millisecond, and what matters is the faults,
						// not how many messages they hit.
						time.Sleep(2 * time.Millisecond)
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
	// consumer fetches from a durable until the test stops,
	// acknowledging synchronously. A message that comes in a fetch asked
	// for after its ack was confirmed is an ack the cluster lost.
	consumer := func(js nats.JetStreamContext, stream, durable string) *chaosConsumer {
		c := &chaosConsumer{js: js, stream: stream, durable: durable, delivered: map[uint64]int{}, confirmed: map[uint64]bool{}, confirmedAt: map[uint64]time.Time{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped() {
				c.fetch(true)
			}
		}()
		return c
	}
	cons := consumer(connect(2), "CH", "D")
	// A work queue: one publisher with acks and message IDs, and its
	// consumer W fetching and acknowledging synchronously. Every
	// acknowledged publish must be delivered, and the queue end empty on
	// every replica once everything is acknowledged.
	wqAcked := map[uint64]string{} // sequence -> message ID
	publisher(connect(1), "wq.x", "w", func(id string, seq uint64) { wqAcked[seq] = id })
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

	rep := chaosReport{sync: name, rounds: len(faults)}
	for r, k := range faults {
		time.Sleep(*chaosRound / 2)
		f := replicaFaults[k]
		start := time.Now()
		from, to, quorum := f.do(t, jc)
		if quorum {
			windows.Add(from, to)
		}
		rep.faults++
		jc.waitMeta(t)
		t.Logf("round %d: %s, the meta group back after %v", r, f.name, time.Since(start).Round(time.Millisecond))
	}
	time.Sleep(*chaosRound / 2)
	close(stop)
	wg.Wait()

	// Settle: every replica holds the same messages, one leads. After a
	// loss the policy allows, a replica that had applied what the group
	// lost diverged: it is rebuilt from the group (cluster.md,
	// "Divergence"), and must agree too. What still differs is counted.
	var (
		final map[uint64]string
		why   string
	)
	settled := within(2*clustertest.Wait, func() bool {
		reps, lead := jc.replicas("CH")
		why = describeReplicas(reps, lead) + jc.groupStates("CH")
		if lead < 0 {
			return false
		}
		final, rep.diverge = reps[lead], 0
		for _, r := range reps {
			if !maps.Equal(r, final) {
				rep.diverge++
			}
		}
		return rep.diverge == 0
	})
	if !settled {
		t.Fatalf("the replicas of CH do not agree (%d differ from the leader's): %s", rep.diverge, why)
	}
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
	var stored []uint64 // acknowledged and still stored: the consumer must deliver them
	for id, seq := range acked {
		switch {
		case final[seq] == id:
			stored = append(stored, seq)
		case windows.Allowed(ackedAt[id]):
			rep.lost++
			rep.lostAllowed++
		default:
			rep.lost++
			t.Errorf("acknowledged %s at sequence %d at %s; the stream holds %q there", id, seq,
				ackedAt[id].Format(time.StampMicro), final[seq])
		}
	}
	if rep.lostAllowed > 0 {
		t.Logf("lost within the bound of the %s policy (%v): %d", name, windows, rep.lostAllowed)
	}
	// The consumer drains the stream: everything acknowledged and stored
	// comes.
	rep.missed = cons.drain(t, stored)
	rep.consumed, rep.confirmed = len(cons.delivered), len(cons.confirmed)
	for _, n := range cons.delivered {
		rep.redelivered += n - 1
	}
	// The work queue drains: every acknowledged publish delivered (but
	// those a loss may have taken), then nothing left on any replica
	// (removals an old leader did not see applied are swept by the
	// next). The consumer goes on fetching meanwhile: an ack the group
	// never took (its leader lost its leadership first, unconfirmed to
	// the client) leaves its message in the queue, delivered again after
	// the ack wait, as to any work-queue consumer.
	var wqMust []uint64
	for seq, id := range wqAcked {
		if !windows.Allowed(ackedAt[id]) {
			wqMust = append(wqMust, seq)
		}
	}
	rep.wqAcked, rep.wqMissed = len(wqAcked), wq.drain(t, wqMust)
	var wqState string
	drained := func() bool {
		reps, lead := jc.replicas("WQ")
		rep.wqLeft = 0
		wqState = fmt.Sprintf("leader %d", lead)
		for i, r := range reps {
			rep.wqLeft = max(rep.wqLeft, len(r))
			wqState += fmt.Sprintf("; server %d holds %d: %v", i, len(r), slices.Sorted(maps.Keys(r)))
		}
		return lead >= 0 && rep.wqLeft == 0
	}
	for deadline := time.Now().Add(2 * clustertest.Wait); !drained(); {
		if !time.Now().Before(deadline) {
			require.FailNow(t, "the work queue drains on every replica", "%s%s", wqState, jc.groupStates("WQ"))
		}
		wq.fetch(false)
	}
	for _, c := range []*chaosConsumer{cons, wq} {
		for _, a := range c.again {
			rep.again++
			if !windows.Allowed(a.confirmedAt) {
				rep.ackedAgain++
				t.Error(a.what)
			}
		}
	}
	rep.linOps = len(hist)
	for _, op := range hist {
		if out := op.Output.(linOutput); op.Input.(linInput).pub && !out.wrong && !out.unknown {
			rep.linWrites++
		}
	}
	if !windows.Any() {
		// (Where a loss was allowed, a write acknowledged and lost is not
		// linearizable, and the check would only say so.)
		rep.linearizable = porcupine.CheckOperationsTimeout(linModel(), hist, 30*time.Second)
	}
	t.Log(rep)
	if rep.linearizable == porcupine.Illegal {
		dumpLinHistory(t, hist)
	}
	require.Zero(t, rep.lost-rep.lostAllowed, "acknowledged messages lost outside the bound of the %s policy", name)
	require.Zero(t, rep.duplicated, "a retried message ID is deduplicated")
	require.Positive(t, rep.acked)
	require.Zero(t, rep.missed, "the durable consumer is given every acknowledged message still stored")
	require.Zero(t, rep.wqMissed, "the work queue's consumer is given every acknowledged message")
	require.Positive(t, rep.wqAcked)
	require.Zero(t, rep.ackedAgain, "no message is delivered again after its ack was confirmed")
	require.Positive(t, rep.confirmed)
	if !windows.Any() {
		require.NotEqual(t, porcupine.Illegal, rep.linearizable, "the history of LIN is linearizable")
	}
}

// within reports whether cond holds within d, tried every 50 ms; unlike
// require.Eventually it fails nothing.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// describeReplicas tells how the replicas of a stream differ: each one's
// count and last sequence, and the first sequence where it differs from
// the first replica's.
func describeReplicas(reps []map[uint64]string, lead int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "leader %d", lead)
	for i, r := range reps {
		last := uint64(0)
		for seq := range r {
			last = max(last, seq)
		}
		first := uint64(0)
		for seq := uint64(1); seq <= last && i > 0; seq++ {
			if r[seq] != reps[0][seq] {
				first = seq
				break
			}
		}
		fmt.Fprintf(&b, "; replica %d: %d messages, last %d", i, len(r), last)
		if first > 0 {
			fmt.Fprintf(&b, ", differs from replica 0 at %d (%q, %q)", first, r[first], reps[0][first])
		}
	}
	return b.String()
}

// groupStates describes each running server's raft state of a stream's
// group.
func (jc *jsCluster) groupStates(name string) string {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	var b strings.Builder
	for i, js := range jc.js {
		if jc.Servers[i] == nil {
			continue
		}
		gs, ok := jetstream.ReplicaGroupState(js, server.GlobalAccountName, name)
		if !ok {
			fmt.Fprintf(&b, "; s%d: no group", i+1)
			continue
		}
		fmt.Fprintf(&b, "; s%d: %s term %d leader %q committed %d applied %d held %q err %v",
			i+1, gs.State, gs.Term, gs.Leader, gs.Committed, gs.Applied, gs.Held, gs.Err)
		for _, p := range slices.Sorted(maps.Keys(gs.Peers)) {
			fmt.Fprintf(&b, " %s(match %d link %v)", p, gs.Peers[p].Match, gs.Peers[p].Known)
		}
	}
	return b.String()
}

// chaosConsumer is the chaos suite's durable consumer's client side.
type chaosConsumer struct {
	js              nats.JetStreamContext
	stream, durable string
	delivered       map[uint64]int  // stream sequence -> deliveries
	confirmed       map[uint64]bool // acks confirmed
	confirmedAt     map[uint64]time.Time
	again           []deliveredAgain // deliveries asked for after the ack was confirmed
}

// deliveredAgain is a message delivered again after its ack was
// confirmed: an ack the cluster lost.
type deliveredAgain struct {
	confirmedAt time.Time
	what        string
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
		c.fetch(false)
	}
	if n := missing(); n > 0 {
		t.Logf("%s > %s never delivered %d of the %d messages it must", c.stream, c.durable, n, len(seqs))
	}
	return missing()
}

// fetch fetches once (a subscription of its own, so that nothing sent for
// an earlier fetch arrives in this one) and acknowledges what came:
// synchronously, or (draining: faster) without waiting.
func (c *chaosConsumer) fetch(sync bool) {
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
			c.again = append(c.again, deliveredAgain{confirmedAt: c.confirmedAt[seq], what: fmt.Sprintf(
				"%s > %s: message %d delivered again (delivery %d, consumer sequence %d, delivered at %s, now %s) after its ack was confirmed at %s",
				c.stream, c.durable, seq, md.NumDelivered, md.Sequence.Consumer, md.Timestamp.Format(time.StampMicro),
				time.Now().Format(time.StampMicro), c.confirmedAt[seq].Format(time.StampMicro))})
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
