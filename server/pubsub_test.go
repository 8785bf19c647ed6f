package server_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

func TestPubSubBasic(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("foo.*")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("foo.bar", []byte("hello")))
	m, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "foo.bar", m.Subject)
	require.Equal(t, "hello", string(m.Data))
	_ = nats.ErrTimeout
}
