package server_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

func TestInternalSubscription(t *testing.T) {
	s := RunServer(t, server.Options{})
	type got struct{ subject, reply, hdr, data string }
	var mu sync.Mutex
	var msgs []got
	var order []string
	isub, err := s.SubscribeInternal("svc.#", "", func(m *server.Msg) {
		mu.Lock()
		defer mu.Unlock()
		// Msg fields are views of the read buffer: copy what is kept.
		msgs = append(msgs, got{strings.Clone(m.Subject), strings.Clone(m.Reply), string(m.Header), string(m.Data)})
		order = append(order, "handler "+string(m.Data))
		reply, data := m.Reply, "ack:"+string(m.Data)
		m.AfterRead(func(p *server.Publisher) {
			mu.Lock()
			order = append(order, "after "+data)
			mu.Unlock()
			if reply != "" {
				p.Publish(reply, "", nil, []byte(data))
			}
		})
	})
	require.NoError(t, err)

	nc := Connect(t, s)
	resp, err := nc.Request("svc.a", []byte("one"), 2*time.Second)
	require.NoError(t, err, "the internal subscription answers: no 503")
	require.Equal(t, "ack:one", string(resp.Data))

	m := nats.NewMsg("svc")
	m.Header.Set("K", "v")
	m.Data = []byte("two")
	require.NoError(t, nc.PublishMsg(m))
	require.NoError(t, nc.Flush())

	// Both messages in one read: handlers first, then the AfterRead functions.
	raw := DialRaw(t, s)
	raw.Send("CONNECT {\"verbose\":false}\r\nPUB svc.x 1\r\n3\r\nPUB svc.y 1\r\n4\r\nPING\r\n")
	raw.Expect("PONG")

	mu.Lock()
	require.Equal(t, got{"svc.a", resp.Subject, "", "one"}, msgs[0])
	require.Equal(t, "svc", msgs[1].subject)
	require.Contains(t, msgs[1].hdr, "K: v")
	require.Equal(t, "two", msgs[1].data)
	require.Equal(t, []string{"handler 3", "handler 4", "after ack:3", "after ack:4"}, order[len(order)-4:])
	mu.Unlock()

	require.NoError(t, isub.Unsubscribe())
	require.ErrorIs(t, isub.Unsubscribe(), server.ErrClosedSub)
	_, err = nc.Request("svc.a", nil, time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

func TestPublisher(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("out.*")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	p := s.NewPublisher()
	p.Publish("out.a", "reply.to", nil, []byte("plain"))
	p.Publish("out.b", "", []byte("NATS/1.0\r\nX: 1\r\n\r\n"), []byte("with header"))
	p.Flush()
	m1, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "plain", string(m1.Data))
	require.Equal(t, "reply.to", m1.Reply)
	m2, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "with header", string(m2.Data))
	require.Equal(t, "1", m2.Header.Get("X"))
}

func TestAdvertiseJetStream(t *testing.T) {
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort})
	require.NoError(t, err)
	s.AdvertiseJetStream()
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
	r := DialRaw(t, s)
	require.Equal(t, true, r.Info["jetstream"])
}
