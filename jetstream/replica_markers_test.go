package jetstream_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// markerHeader is a subject delete marker's header block as nats-server
// writes it (filestore.go handleRemovalOrSdm), with a TTL of 2s.
const markerHeader = "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n"

// storeDumps returns each running server's store of a global-account
// stream (jetstream.StoreDump), nil for a stopped server or none.
func (jc *jsCluster) storeDumps(name string) [][]string {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	out := make([][]string, len(jc.js))
	for i, js := range jc.js {
		if jc.Servers[i] != nil {
			out[i], _ = jetstream.LocalStoreDump(js, server.GlobalAccountName, name)
		}
	}
	return out
}

// waitSameStores waits until every running server's store of a stream
// holds the same messages, headers and times included, and done says
// yes of it, and returns what they hold.
func (jc *jsCluster) waitSameStores(t *testing.T, name string, done func(dump []string) bool, what string) []string {
	t.Helper()
	var dumps [][]string
	ok := assert.Eventually(t, func() bool {
		dumps = jc.storeDumps(name)
		var first []string
		for i, d := range dumps {
			switch {
			case jc.Servers[i] == nil:
				continue
			case d == nil:
				return false
			case first == nil:
				first = d
			case !slices.Equal(first, d):
				return false
			}
		}
		return first != nil && done(first)
	}, clustertest.Wait, 20*time.Millisecond, "%s: %s", name, what)
	if !ok {
		for i, d := range dumps {
			t.Logf("server %d: %q", i, d)
		}
		t.FailNow()
	}
	return dumps[slices.IndexFunc(dumps, func(d []string) bool { return d != nil })]
}

// markers says yes of a store holding exactly these markers (sequences
// by subject) and n messages in all.
func markers(want map[string][]string, n int) func([]string) bool {
	return func(d []string) bool {
		return maps.EqualFunc(jetstream.DumpMarkers(d), want, slices.Equal) && strings.HasSuffix(d[0], fmt.Sprintf(" msgs %d", n))
	}
}

// emptied says yes of a store whose messages are all gone, last at
// sequence last.
func emptied(last int) func([]string) bool {
	return func(d []string) bool { return d[0] == fmt.Sprintf("first %d last %d msgs 0", last+1, last) }
}

// fetchAll fetches n messages from a pull subscription, trying again
// through elections, and describes each: subject, stream sequence, data
// and the marker headers. A message delivered again (its delivery not
// committed when the leader changed) is counted once.
func fetchAll(t *testing.T, sub *nats.Subscription, n int) []string {
	t.Helper()
	var got []string
	seen := map[uint64]bool{}
	require.Eventually(t, func() bool {
		msgs, _ := sub.Fetch(n-len(got), nats.MaxWait(500*time.Millisecond))
		for _, m := range msgs {
			md, err := m.Metadata()
			require.NoError(t, err)
			if seen[md.Sequence.Stream] {
				continue
			}
			seen[md.Sequence.Stream] = true
			got = append(got, fmt.Sprintf("%s %d %q reason=%q ttl=%q rollup=%q", m.Subject, md.Sequence.Stream, m.Data,
				m.Header.Get("Nats-Marker-Reason"), m.Header.Get("Nats-TTL"), m.Header.Get("Nats-Rollup")))
		}
		return len(got) >= n
	}, clustertest.Wait, 10*time.Millisecond, "%d messages fetched, %d wanted", len(got), n)
	return got
}

// TestClusterReplicatedDeleteMarkers: an R3 stream with subject delete
// markers: when max_age removes the last message of a subject, every
// replica stores one marker for it at the same sequence, with
// nats-server's headers, and a durable consumer receives it as it
// receives a message; the markers go by their own TTL. The stream's
// leader hands over while messages wait to expire: the new leader's
// rounds go on from the log, no marker twice, none lost; a follower's and
// then every server's restart (the log replayed over the stores) change
// nothing, and publishing goes on after the markers' sequences.
func TestClusterReplicatedDeleteMarkers(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	nc, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "SDM", Subjects: []string{"sdm.>"}, Replicas: 3,
		MaxAge: time.Second, SubjectDeleteMarkerTTL: 2 * time.Second})
	require.NoError(t, err)
	jc.waitReplicated(t, "SDM", map[uint64]string{})
	sub, err := js.PullSubscribe("sdm.>", "W", nats.AckNone())
	require.NoError(t, err)

	for _, p := range [][2]string{{"sdm.a", "a1"}, {"sdm.a", "a2"}, {"sdm.b", "b1"}} {
		_, err := js.Publish(p[0], []byte(p[1]))
		require.NoError(t, err)
	}
	require.Equal(t, []string{
		`sdm.a 1 "a1" reason="" ttl="" rollup=""`,
		`sdm.a 2 "a2" reason="" ttl="" rollup=""`,
		`sdm.b 3 "b1" reason="" ttl="" rollup=""`,
	}, fetchAll(t, sub, 3))

	// max_age removes the three: a marker for a (a2 was its last) and one
	// for b, at 4 and 5 on every replica.
	d := jc.waitSameStores(t, "SDM", markers(map[string][]string{"sdm.a": {"4"}, "sdm.b": {"5"}}, 2), "two markers")
	require.Contains(t, d[1], fmt.Sprintf("4 sdm.a %q \"\"", markerHeader))
	require.Equal(t, []string{
		`sdm.a 4 "" reason="MaxAge" ttl="2s" rollup="sub"`,
		`sdm.b 5 "" reason="MaxAge" ttl="2s" rollup="sub"`,
	}, fetchAll(t, sub, 2))

	// A message, and the leader hands over before max_age removes it.
	ack, err := js.Publish("sdm.c", []byte("c1"))
	require.NoError(t, err)
	require.Equal(t, uint64(6), ack.Sequence)
	require.Equal(t, []string{`sdm.c 6 "c1" reason="" ttl="" rollup=""`}, fetchAll(t, sub, 1))
	_, lead := jc.replicas("SDM")
	to := jc.Servers[(lead+1)%3].Name()
	require.Contains(t, string(stepdownTo(t, nc, "SDM", to).Data), `"success":true`)
	jc.waitSameStores(t, "SDM", func(d []string) bool { return slices.Equal(jetstream.DumpMarkers(d)["sdm.c"], []string{"7"}) },
		"c's marker, from the new leader")
	require.Equal(t, []string{`sdm.c 7 "" reason="MaxAge" ttl="2s" rollup="sub"`}, fetchAll(t, sub, 1))
	_, lead = jc.replicas("SDM")
	require.Equal(t, to, jc.Servers[lead].Name())

	// The markers go by their TTL, leaving none.
	jc.waitSameStores(t, "SDM", emptied(7), "every marker gone")

	follower := (lead + 1) % 3
	jc.Stop(t, follower)
	jc.Restart(t, follower)
	jc.waitMeta(t)
	jc.waitSameStores(t, "SDM", emptied(7), "the same after a follower's restart")
	jc.RestartAll(t)
	jc.waitMeta(t)
	jc.waitSameStores(t, "SDM", emptied(7), "the same after every server's restart")
	time.Sleep(1500 * time.Millisecond) // a round or two
	jc.waitSameStores(t, "SDM", emptied(7), "no marker appended again")

	_, js = jc.connectJS(t, 1)
	acked := map[uint64]string{}
	publishTo(t, js, acked, "sdm.d", "d", 1)
	require.Equal(t, map[uint64]string{8: "d-0"}, acked)
	jc.waitSameStores(t, "SDM", markers(map[string][]string{"sdm.d": {"9"}}, 1), "d's marker after the restarts")
}

// TestClusterReplicatedMarkersConfig: a replicated stream's update adds
// subject delete markers (a message's TTL then leaves one) and takes them
// away again (a TTL then leaves none), every replica alike.
func TestClusterReplicatedMarkersConfig(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	cfg := &nats.StreamConfig{Name: "UPD", Subjects: []string{"upd.>"}, Replicas: 3, MaxAge: time.Second, AllowMsgTTL: true}
	_, err := js.AddStream(cfg)
	require.NoError(t, err)
	publish := func(subj string, ttl string) {
		t.Helper()
		m := nats.NewMsg(subj)
		if ttl != "" {
			m.Header.Set("Nats-TTL", ttl)
		}
		require.Eventually(t, func() bool { _, err := js.PublishMsg(m); return err == nil }, clustertest.Wait, 10*time.Millisecond)
	}
	publish("upd.x", "")
	jc.waitSameStores(t, "UPD", emptied(1), "max_age without markers")

	cfg.MaxAge, cfg.SubjectDeleteMarkerTTL, cfg.AllowRollup = time.Hour, 2*time.Second, true
	info, err := js.UpdateStream(cfg)
	require.NoError(t, err)
	require.Equal(t, 2*time.Second, info.Config.SubjectDeleteMarkerTTL)
	publish("upd.t", "1s")
	d := jc.waitSameStores(t, "UPD", markers(map[string][]string{"upd.t": {"3"}}, 1), "a TTL's marker")
	require.Contains(t, d[1], fmt.Sprintf("3 upd.t %q \"\"", markerHeader))
	jc.waitSameStores(t, "UPD", emptied(3), "the marker gone by its TTL")

	cfg.SubjectDeleteMarkerTTL = 0
	info, err = js.UpdateStream(cfg)
	require.NoError(t, err)
	require.Zero(t, info.Config.SubjectDeleteMarkerTTL)
	publish("upd.u", "1s")
	jc.waitSameStores(t, "UPD", emptied(4), "a TTL without markers")
}

// TestClusterReplicatedMarkersCatchup: a replica that caught up from a
// peer's store (a snapshot, the log compacted past what it had) schedules
// the TTLs of the messages it took, as the peer had: once it leads, its
// rounds leave the marker that the message's TTL calls for.
func TestClusterReplicatedMarkersCatchup(t *testing.T) {
	jetstream.SetReplicaLog(t, 4, 256)
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "CU", Subjects: []string{"cu.>"}, Replicas: 3,
		SubjectDeleteMarkerTTL: 2 * time.Second, AllowMsgTTL: true})
	require.NoError(t, err)
	acked := map[uint64]string{}
	publishTo(t, js, acked, "cu.a", "a", 3)
	_, lead := jc.replicas("CU")
	victim := (lead + 1) % 3
	nc, js := jc.connectJS(t, (victim+1)%3) // a client of a server that stays up
	behind := jc.stopBehind(t, victim, []string{"CU"})
	// Long enough for the victim to be back, caught up and leading
	// before it is due.
	const ttl = 15 * time.Second
	m := nats.NewMsg("cu.t")
	m.Header.Set("Nats-TTL", ttl.String())
	m.Data = []byte("t")
	due := time.Now().Add(ttl)
	require.Eventually(t, func() bool { _, err := js.PublishMsg(m); return err == nil }, clustertest.Wait, 10*time.Millisecond)
	publishTo(t, js, acked, "cu.b", "b", 20)
	jc.waitCompacted(t, behind, victim)

	jc.Restart(t, victim)
	jc.waitMeta(t)
	jc.waitSameStores(t, "CU", func(d []string) bool { return d[0] == "first 1 last 24 msgs 24" }, "caught up")
	_, _, _, chunks := jc.replicaLog(victim, "CU")
	require.Positive(t, chunks, "caught up from a peer's store")
	require.Eventually(t, func() bool {
		return strings.Contains(string(stepdownTo(t, nc, "CU", jc.Servers[victim].Name()).Data), `"success":true`)
	}, clustertest.Wait, 100*time.Millisecond, "handed to the caught-up replica")
	require.Eventually(t, func() bool {
		_, l := jc.replicas("CU")
		return l == victim
	}, clustertest.Wait, 20*time.Millisecond, "the caught-up replica leads")
	require.True(t, time.Now().Before(due), "the caught-up replica leads only after t is due: the test ran too slowly")
	d := jc.waitSameStores(t, "CU", func([]string) bool { return true }, "led by the caught-up replica")
	require.Empty(t, jetstream.DumpMarkers(d), "t not due before the caught-up replica leads")
	time.Sleep(time.Until(due))
	jc.waitSameStores(t, "CU", markers(map[string][]string{"cu.t": {"25"}}, 24), "t's marker, planned by the caught-up leader")
}

// TestDifferentialReplicatedDeleteMarkers: the markers an R3 stream's
// leader plans are nats-server's (a single server's, whose markers
// replication does not change): the same messages delivered to a
// consumer, at the same sequences, with the same marker headers, and
// the stream empty once the markers' TTL ran out.
func TestDifferentialReplicatedDeleteMarkers(t *testing.T) {
	// created waits for the stream to take publishes (an R3 stream's
	// leader elected).
	script := func(tg *target, replicas int, created func()) []string {
		out := []string{tg.api("STREAM.CREATE.S", fmt.Sprintf(`{"name":"S","subjects":["s.>"],"max_age":1000000000,`+
			`"subject_delete_marker_ttl":2000000000,"num_replicas":%d}`, replicas),
			"config.allow_msg_ttl", "config.allow_rollup_hdrs", "config.deny_purge", "config.subject_delete_marker_ttl", "config.max_age")}
		created()
		sub, err := tg.nc.SubscribeSync("watch.s")
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		out = append(out, tg.api("CONSUMER.CREATE.S.W", `{"stream_name":"S","config":{"durable_name":"W","deliver_subject":"watch.s","ack_policy":"none"}}`,
			"config.durable_name"))
		out = append(out, tg.pub("s.a", "a1"), tg.pub("s.a", "a2"), tg.pub("s.b", "b1"))
		var got []string
		for deadline := time.Now().Add(clustertest.Wait); len(got) < 5 && time.Now().Before(deadline); {
			m, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				break
			}
			got = append(got, fmt.Sprintf("%s seq=%s %q reason=%q ttl=%q rollup=%q", m.Subject, strings.Split(m.Reply, ".")[5], m.Data,
				m.Header.Get("Nats-Marker-Reason"), m.Header.Get("Nats-TTL"), m.Header.Get("Nats-Rollup")))
		}
		out = append(out, got...)
		return append(out, tg.apiUntil("STREAM.INFO.S", "", has("state.messages=0 "), "state.messages", "state.last_seq"))
	}
	nc, err := nats.Connect(startReference(t))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	want := script(&target{t: t, nc: nc}, 1, func() {})
	jc := startReplicatedCluster(t, 3)
	got := script(&target{t: t, nc: jc.Connect(t, 0)}, 3, func() { jc.waitReplicated(t, "S", map[uint64]string{}) })
	require.Equal(t, want, got, "Skiff's R3 markers differ from nats-server's")
	require.Len(t, want, 11, "three messages and two markers delivered: %q", want)
}
