package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// importsConf is the accounts configuration of the imports differential
// tests: A exports, B and C import (see the file).
var importsConf = filepath.Join("testdata", "diff", "conf", "imports.conf")

// diffImportsSkiffCluster starts two Skiff servers loading importsConf and
// returns their client URLs.
func diffImportsSkiffCluster(t *testing.T) []string {
	bc, err := broker.LoadConfig(importsConf)
	require.NoError(t, err)
	o := bc.Server
	o.HTTPPort, o.PingInterval = 0, time.Hour
	c := clustertest.Start(t, 2, o)
	return []string{c.URL(0), c.URL(1)}
}

// diffImportsReferenceCluster does the same with nats-server.
func diffImportsReferenceCluster(t *testing.T) []string {
	servers := startReferenceCluster(t, 2, func() *natsserver.Options {
		o, err := natsserver.ProcessConfigFile(importsConf)
		require.NoError(t, err)
		o.Host, o.Port, o.NoLog, o.NoSigs, o.NoSystemAccount = "127.0.0.1", -1, true, true, true
		o.PingInterval = time.Hour
		return o
	})
	return []string{servers[0].ClientURL(), servers[1].ClientURL()}
}

// runImportsClusterScenario runs, on a two-server cluster loaded with
// importsConf, stream imports (mapped, prefixed, restricted, by account
// token, into queue groups of the importer spread over both servers) with
// publishers on both servers, and service imports (Singleton, Streamed,
// Chunked, mapped, shared, without responders) with the responders on the
// server the requesters are not on; and returns the outcome.
func runImportsClusterScenario(t *testing.T, urls []string) []string {
	conn := func(i int, user string) *nats.Conn { return diffDial(t, urls[i], nats.UserInfo(user, user)) }
	a := []*nats.Conn{conn(0, "a"), conn(1, "a")}
	b := []*nats.Conn{conn(0, "b"), conn(1, "b")}
	c := []*nats.Conn{conn(0, "c"), conn(1, "c")}

	rec := &diffRecorder{got: map[string][]string{}}
	handler := func(name string) nats.MsgHandler {
		h := rec.handler(name)
		return func(m *nats.Msg) {
			m.Data = append([]byte(m.Subject+" "), m.Data...)
			h(m)
		}
	}
	type sub struct {
		nc             *nats.Conn
		name           string
		subject, queue string
	}
	subs := []sub{
		{b[0], "s1 b a.events.>", "a.events.>", ""},
		{b[1], "s2 b a.events.>", "a.events.>", ""},
		{b[0], "s1 b queue", "a.events.>", "q"},
		{b[1], "s2 b queue", "a.events.>", "q"},
		{b[1], "s2 b from_a.>", "from_a.>", ""},
		{b[1], "s2 b tenant.B.events", "tenant.B.events", ""},
		{b[0], "s1 b events.> (not imported so)", "events.>", ""},
		{c[1], "s2 c events.>", "events.>", ""},
		{c[0], "s1 c mine", "mine", ""},
		{c[1], "s2 c from_a.> (not imported)", "from_a.>", ""},
		{a[1], "s2 a events.>", "events.>", ""},
	}
	var names []string
	for _, s := range subs {
		names = append(names, s.name)
		var err error
		if s.queue != "" {
			_, err = s.nc.QueueSubscribe(s.subject, s.queue, handler(s.name))
		} else {
			_, err = s.nc.Subscribe(s.subject, handler(s.name))
		}
		require.NoError(t, err)
	}
	var infoMu sync.Mutex
	var infos []string
	respond := func(subject string, answers func(m *nats.Msg) []string) {
		_, err := a[1].Subscribe(subject, func(m *nats.Msg) {
			var ri struct {
				Acc  string `json:"acc"`
				User string `json:"user"`
			}
			_ = json.Unmarshal([]byte(m.Header.Get(server.RequestInfoHeader)), &ri)
			infoMu.Lock()
			infos = append(infos, fmt.Sprintf("%s asked by account %q user %q", m.Subject, ri.Acc, ri.User))
			infoMu.Unlock()
			for _, d := range answers(m) {
				_ = m.Respond([]byte(d))
			}
		})
		require.NoError(t, err)
	}
	respond("svc.echo", func(m *nats.Msg) []string { return []string{"echo " + string(m.Data)} })
	respond("svc.map.>", func(m *nats.Msg) []string { return []string{m.Subject} })
	respond("svc.stream", func(*nats.Msg) []string { return []string{"1", "2", "3"} })
	respond("svc.chunk", func(*nats.Msg) []string { return []string{"1", "2", "", "after the end"} })
	for _, nc := range slices.Concat(a, b, c) {
		require.NoError(t, nc.Flush())
	}
	diffWaitRoutes(t, a, b)

	const n = 50
	for k := range n {
		for i, nc := range a {
			require.NoError(t, nc.Publish("events.x", fmt.Appendf(nil, "p%d-%d", i+1, k)))
		}
	}
	for _, subj := range []string{"private.p", "tenant.B.events", "tenant.C.events", "tenant.D.events"} {
		require.NoError(t, a[0].Publish(subj, []byte("once")))
	}
	for _, nc := range a {
		require.NoError(t, nc.Flush())
	}
	// b a.events.> twice, the queue group, c events.>, a events.>: each
	// message of both publishers; from_a.>, tenant.B.events and mine one
	// each.
	require.Eventually(t, func() bool { return rec.total(names...) >= 5*2*n+3 },
		clustertest.Wait, 10*time.Millisecond, "deliveries did not complete")
	time.Sleep(100 * time.Millisecond) // a duplicate would come now
	var out []string
	rec.mu.Lock()
	for _, s := range subs {
		if s.queue != "" {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %s", s.name, describeDeliveries(rec.got[s.name], true)))
	}
	// The members' order is not one stream: which member takes a message
	// differs by design (TestDifferentialClusterQueueLocality).
	queue := slices.Concat(rec.got["s1 b queue"], rec.got["s2 b queue"])
	out = append(out, "queue group of B over both servers: "+describeDeliveries(queue, false))
	rec.mu.Unlock()

	request := func(nc *nats.Conn, subject, data string) string {
		m, err := nc.Request(subject, []byte(data), 2*time.Second)
		if err != nil {
			return fmt.Sprintf("request %s: %v", subject, err)
		}
		return fmt.Sprintf("request %s: %q", subject, m.Data)
	}
	out = append(out,
		request(b[0], "echo", "hi"),
		request(b[0], "map.x.y", ""),
		request(c[0], "svc.echo", "shared"),
		request(b[0], "svc.none", ""),
		request(b[0], "svc.echo", "not imported under this name"),
	)
	for _, subject := range []string{"svc.stream", "svc.chunk"} {
		inbox := nats.NewInbox()
		sub, err := b[0].SubscribeSync(inbox)
		require.NoError(t, err)
		require.NoError(t, b[0].PublishRequest(subject, inbox, nil))
		var got []string
		for {
			m, err := sub.NextMsg(500 * time.Millisecond)
			if errors.Is(err, nats.ErrTimeout) {
				break
			}
			require.NoError(t, err)
			got = append(got, fmt.Sprintf("%q", m.Data))
		}
		out = append(out, fmt.Sprintf("responses of %s: %s", subject, strings.Join(got, " ")))
	}
	infoMu.Lock()
	out = append(out, infos...)
	infoMu.Unlock()
	return out
}

// describeDeliveries renders what one subscriber received: how many, on
// which subjects, from each publisher how many (and, if ordered, whether
// in order), and whether any came twice.
func describeDeliveries(msgs []string, ordered bool) string {
	subjects := map[string]int{}
	by := map[string][]string{}
	seen := map[string]int{}
	for _, m := range msgs {
		subj, data, _ := strings.Cut(m, " ")
		subjects[subj]++
		seen[m]++
		if p, _, ok := strings.Cut(data, "-"); ok {
			by[p] = append(by[p], data)
		}
	}
	twice := 0
	for _, k := range seen {
		if k > 1 {
			twice++
		}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(by)) {
		part := fmt.Sprintf("%s %d", p, len(by[p]))
		if ordered {
			part += fmt.Sprintf(" in order %v", inOrder(by[p]))
		}
		parts = append(parts, part)
	}
	var subjs []string
	for _, s := range slices.Sorted(maps.Keys(subjects)) {
		subjs = append(subjs, fmt.Sprintf("%s×%d", s, subjects[s]))
	}
	return fmt.Sprintf("%d messages [%s] [%s], %d twice", len(msgs), strings.Join(subjs, " "), strings.Join(parts, "; "), twice)
}

// diffWaitRoutes waits until each server has heard all the interest of
// the other: interest crosses a route in the order it was made, so once
// a probe subscribed last on one server answers from the other, the
// subscriptions made before it are known there too.
func diffWaitRoutes(t *testing.T, conns ...[]*nats.Conn) {
	t.Helper()
	for i := range 2 {
		for _, cs := range conns {
			probe := fmt.Sprintf("probe.%d", i)
			sub, err := cs[i].Subscribe(probe, func(m *nats.Msg) { _ = m.Respond(nil) })
			require.NoError(t, err)
			require.NoError(t, cs[i].Flush())
			require.Eventually(t, func() bool {
				_, err := cs[1-i].Request(probe, nil, time.Second)
				return err == nil
			}, clustertest.Wait, 10*time.Millisecond, "interest of server %d did not reach the other", i)
			require.NoError(t, sub.Unsubscribe())
		}
	}
}

// TestDifferentialClusterImports: the same scenario of stream and service
// imports over a two-server cluster delivers the same against Skiff and
// nats-server, loaded with the same accounts configuration: each
// subscriber's messages (mapped subjects, counts, each publisher's order,
// no duplicate, nothing where nothing is imported), the queue group's,
// the responses of each response type, no responders, and the
// Nats-Request-Info each responder saw. Skiff applies an import on the
// publisher's server, nats-server on the subscriber's: the outcome must
// not tell.
func TestDifferentialClusterImports(t *testing.T) {
	ref := runImportsClusterScenario(t, diffImportsReferenceCluster(t))
	got := runImportsClusterScenario(t, diffImportsSkiffCluster(t))
	require.Equal(t, ref, got)
	t.Logf("outcome:\n%s", strings.Join(got, "\n"))
}
