package jetstream_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
)

// TestJsz reads /jsz as the Prometheus exporter for NATS does: totals,
// then account, stream, consumer and configuration detail on request.
func TestJsz(t *testing.T) {
	s := startMonitoredBroker(t).srv

	_, jsc := connect(t, s.ClientURL())
	c := ctx(t)
	for _, name := range []string{"B", "A"} {
		_, err := jsc.CreateStream(c, njs.StreamConfig{Name: name, Subjects: []string{name + ".>"}})
		require.NoError(t, err)
	}
	_, err := jsc.CreateStream(c, njs.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: njs.MemoryStorage})
	require.NoError(t, err)
	for i := range 3 {
		_, err := jsc.Publish(c, fmt.Sprintf("A.%d", i), []byte("hello"))
		require.NoError(t, err)
	}
	_, err = jsc.Publish(c, "m", []byte("in memory"))
	require.NoError(t, err)
	_, err = jsc.CreateOrUpdateConsumer(c, "A", njs.ConsumerConfig{Durable: "W", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)

	// Every key must be a field of nats-server's JSInfo, which tools
	// decode /jsz into (but for the stream configuration's own "sync").
	get := func(query string) (int, *natsserver.JSInfo, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s/jsz%s", s.MonitorAddr(), query))
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil, string(body)
		}
		var v natsserver.JSInfo
		dec := json.NewDecoder(bytes.NewReader(body))
		if !strings.Contains(query, "config") { // a stream's config has Skiff's "sync"
			dec.DisallowUnknownFields()
		}
		require.NoError(t, dec.Decode(&v), "%s", body)
		return resp.StatusCode, &v, string(body)
	}

	code, v, _ := get("")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, s.ID(), v.ID)
	require.Equal(t, 3, v.Streams)
	require.Equal(t, 1, v.Consumers)
	require.Equal(t, uint64(4), v.Messages)
	require.Positive(t, v.Store)
	require.Positive(t, v.Memory)
	require.Equal(t, v.Bytes, v.Store+v.Memory)
	require.Equal(t, int64(jetstream.DefaultMaxStore), v.Config.MaxStore)
	require.Equal(t, 1, v.Accounts)
	require.Positive(t, v.API.Total)
	require.Empty(t, v.AccountDetails)

	_, v, _ = get("?accounts=true")
	require.Len(t, v.AccountDetails, 1)
	require.Equal(t, "$G", v.AccountDetails[0].Name)
	require.Equal(t, v.Memory, v.AccountDetails[0].Memory)
	require.Equal(t, v.Store, v.AccountDetails[0].Store)
	require.Empty(t, v.AccountDetails[0].Streams)

	_, v, _ = get("?consumers=true&config=true")
	streams := v.AccountDetails[0].Streams
	require.Len(t, streams, 3)
	require.Equal(t, "A", streams[0].Name, "sorted by name")
	require.Equal(t, uint64(3), streams[0].State.Msgs)
	require.Equal(t, "A", streams[0].Config.Name)
	require.Len(t, streams[0].Consumer, 1)
	require.Equal(t, "W", streams[0].Consumer[0].Name)

	_, v, _ = get("?streams=true&offset=1&limit=1")
	streams = v.AccountDetails[0].Streams
	require.Len(t, streams, 1)
	require.Equal(t, "B", streams[0].Name)
	require.Nil(t, streams[0].Config)
	require.Equal(t, 3, v.Total)

	code, _, body := get("?streams=maybe")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "streams")
}
