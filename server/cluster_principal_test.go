package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterServerMessages: a message a server publishes for a client
// (a JetStream delivery, a reply) reaches a peer's internal subscriptions
// as it reaches its own server's: Internal, and Permitted only if that
// client may publish on its subject (IMSG on the route). Before IMSG, a
// peer saw it as a client's message, permitted: a stream there would
// have stored what the client may not publish.
func TestClusterServerMessages(t *testing.T) {
	o := accountsOptions()
	o.Accounts[0].DefaultPermissions = &server.Permissions{Publish: server.SubjectPermission{Allow: []string{"a.>"}}}
	c := clustertest.Start(t, 2, o)
	c.WaitFormed(t)
	s0, s1 := c.Servers[0], c.Servers[1]
	acc0, _ := s0.LookupAccount("A")
	acc1, _ := s1.LookupAccount("A")

	type seen struct {
		subject   string
		internal  bool
		permitted bool
	}
	got := make(chan seen, 8)
	_, err := acc1.SubscribeInternal(">", "", func(m *server.Msg) {
		got <- seen{strings.Clone(m.Subject), m.Internal(), m.Permitted()} // m.Subject is the read buffer's
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), clustertest.Wait)
	defer cancel()
	require.NoError(t, s1.FlushRoute(ctx, s0.Name()))

	pub := acc0.NewPublisher()
	pub.ActFor(acc0.PrincipalOf("a"))
	pub.PublishNow("a.x", "", nil, []byte("1"))
	pub.PublishNow("b.x", "", nil, []byte("2"))
	pub.PublishNow("b.y", "_INBOX.r", []byte("NATS/1.0\r\n\r\n"), []byte("3")) // IHMSG, with a reply
	pub.ActFor(server.Principal{})
	pub.PublishNow("a.y", "", nil, []byte("4"))
	pub.ActFor(server.ServerPrincipal)
	pub.PublishNow("b.z", "", nil, []byte("5"))
	nc := connectAs(t, s0, "a")
	require.NoError(t, nc.Publish("a.z", []byte("6")))
	require.NoError(t, nc.Flush())

	want := []seen{
		{"a.x", true, true},
		{"b.x", true, false},
		{"b.y", true, false},
		{"a.y", true, false}, // for nobody: fails closed
		{"b.z", true, true},  // the server, for itself
		{"a.z", false, true}, // a client's: checked when published
	}
	for _, w := range want {
		select {
		case s := <-got:
			require.Equal(t, w, s)
		case <-time.After(clustertest.Wait):
			t.Fatalf("%s did not arrive", w.subject)
		}
	}
}
