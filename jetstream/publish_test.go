package jetstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestPublishAck(t *testing.T) {
	for _, storage := range []njs.StorageType{njs.FileStorage, njs.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			b := startBroker(t, "")
			_, js := connect(t, b.srv.ClientURL())
			c := ctx(t)
			_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.#"}, Storage: storage})
			require.NoError(t, err)
			for i := 1; i <= 5; i++ {
				ack, err := js.Publish(c, "s.a.b", []byte("x"))
				require.NoError(t, err)
				require.Equal(t, "S", ack.Stream)
				require.Equal(t, uint64(i), ack.Sequence)
				require.False(t, ack.Duplicate)
			}
			// '#' matches zero tokens too.
			ack, err := js.Publish(c, "s", nil)
			require.NoError(t, err)
			require.Equal(t, uint64(6), ack.Sequence)

			// Async publishes are acknowledged in order.
			var futures []njs.PubAckFuture
			for range 100 {
				f, err := js.PublishAsync("s.async", []byte("y"))
				require.NoError(t, err)
				futures = append(futures, f)
			}
			for i, f := range futures {
				select {
				case ack := <-f.Ok():
					require.Equal(t, uint64(7+i), ack.Sequence)
				case err := <-f.Err():
					t.Fatal(err)
				case <-time.After(5 * time.Second):
					t.Fatal("no ack")
				}
			}
		})
	}
}

func TestPublishNoStream(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.Publish(ctx(t), "nothing.here", []byte("x"))
	require.ErrorIs(t, err, njs.ErrNoStreamResponse)
}

func TestDeduplication(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Duplicates: 200 * time.Millisecond})
	require.NoError(t, err)
	ack, err := js.Publish(c, "S", []byte("a"), njs.WithMsgID("id-1"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), ack.Sequence)
	ack, err = js.Publish(c, "S", []byte("a"), njs.WithMsgID("id-1"))
	require.NoError(t, err)
	require.True(t, ack.Duplicate)
	require.Equal(t, uint64(1), ack.Sequence)
	ack, err = js.Publish(c, "S", []byte("b"), njs.WithMsgID("id-2"))
	require.NoError(t, err)
	require.Equal(t, uint64(2), ack.Sequence)

	// After the window the ID is new again.
	time.Sleep(300 * time.Millisecond)
	ack, err = js.Publish(c, "S", []byte("a"), njs.WithMsgID("id-1"))
	require.NoError(t, err)
	require.False(t, ack.Duplicate)
	require.Equal(t, uint64(3), ack.Sequence)
}

func TestExpectations(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.*"}})
	require.NoError(t, err)
	_, err = js.Publish(c, "s.a", nil, njs.WithMsgID("m1"))
	require.NoError(t, err)
	_, err = js.Publish(c, "s.b", nil)
	require.NoError(t, err)

	tests := []struct {
		name string
		subj string
		opts []njs.PublishOpt
		code njs.ErrorCode
		desc string
	}{
		{"stream ok", "s.a", []njs.PublishOpt{njs.WithExpectStream("S")}, 0, ""},
		{"stream wrong", "s.a", []njs.PublishOpt{njs.WithExpectStream("T")}, 10060, "expected stream does not match"},
		{"last seq ok", "s.a", []njs.PublishOpt{njs.WithExpectLastSequence(3)}, 0, ""},
		{"last seq wrong", "s.a", []njs.PublishOpt{njs.WithExpectLastSequence(1)}, 10071, "wrong last sequence: 4"},
		{"subject seq ok", "s.b", []njs.PublishOpt{njs.WithExpectLastSequencePerSubject(2)}, 0, ""},
		{"subject seq wrong", "s.b", []njs.PublishOpt{njs.WithExpectLastSequencePerSubject(1)}, 10071, "wrong last sequence: 5"},
		{"subject seq new subject", "s.c", []njs.PublishOpt{njs.WithExpectLastSequencePerSubject(0)}, 0, ""},
		// The last message had no ID.
		{"last id none", "s.a", []njs.PublishOpt{njs.WithExpectLastMsgID("m1")}, 10070, "wrong last msg ID: "},
		{"with id", "s.a", []njs.PublishOpt{njs.WithMsgID("m2")}, 0, ""},
		{"last id wrong", "s.a", []njs.PublishOpt{njs.WithExpectLastMsgID("nope")}, 10070, "wrong last msg ID: m2"},
		{"last id ok", "s.a", []njs.PublishOpt{njs.WithExpectLastMsgID("m2"), njs.WithMsgID("m3")}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := js.Publish(c, tt.subj, nil, tt.opts...)
			if tt.code == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Equal(t, tt.code, apiCode(err), "%v", err)
			require.Contains(t, err.Error(), tt.desc)
		})
	}
}

func TestLimits(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)

	t.Run("max_msg_size", func(t *testing.T) {
		_, err := js.CreateStream(c, njs.StreamConfig{Name: "SIZE", MaxMsgSize: 100})
		require.NoError(t, err)
		_, err = js.Publish(c, "SIZE", make([]byte, 50))
		require.NoError(t, err)
		_, err = js.Publish(c, "SIZE", make([]byte, 200))
		require.Equal(t, njs.ErrorCode(10054), apiCode(err))
	})
	t.Run("discard new", func(t *testing.T) {
		_, err := js.CreateStream(c, njs.StreamConfig{Name: "FULL", MaxMsgs: 3, Discard: njs.DiscardNew})
		require.NoError(t, err)
		for range 3 {
			_, err = js.Publish(c, "FULL", nil)
			require.NoError(t, err)
		}
		_, err = js.Publish(c, "FULL", nil)
		require.Equal(t, njs.ErrorCode(10077), apiCode(err))
		require.Contains(t, err.Error(), "maximum messages exceeded")
	})
	t.Run("discard old", func(t *testing.T) {
		s, err := js.CreateStream(c, njs.StreamConfig{Name: "OLD", MaxMsgs: 3})
		require.NoError(t, err)
		for range 5 {
			_, err = js.Publish(c, "OLD", nil)
			require.NoError(t, err)
		}
		info, err := s.Info(c)
		require.NoError(t, err)
		require.Equal(t, uint64(3), info.State.Msgs)
		require.Equal(t, uint64(3), info.State.FirstSeq)
	})
	t.Run("max_msgs_per_subject", func(t *testing.T) {
		s, err := js.CreateStream(c, njs.StreamConfig{Name: "PER", Subjects: []string{"per.*"}, MaxMsgsPerSubject: 1})
		require.NoError(t, err)
		for i := range 6 {
			_, err = js.Publish(c, fmt.Sprintf("per.%d", i%3), nil)
			require.NoError(t, err)
		}
		info, err := s.Info(c)
		require.NoError(t, err)
		require.Equal(t, uint64(3), info.State.Msgs)
	})
	t.Run("max_age", func(t *testing.T) {
		s, err := js.CreateStream(c, njs.StreamConfig{Name: "AGE", MaxAge: 100 * time.Millisecond})
		require.NoError(t, err)
		_, err = js.Publish(c, "AGE", nil)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := s.Info(c)
			return err == nil && info.State.Msgs == 0
		}, 5*time.Second, 20*time.Millisecond)
	})
}

func TestSyncPolicies(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	for _, sync := range []string{"always", "interval", "never"} {
		t.Run(sync, func(t *testing.T) {
			name := strings.ToUpper(sync)
			// The sync policy is Skiff's: it goes in the metadata.
			req := fmt.Sprintf(`{"name":%q,"subjects":[%q],"metadata":{"_skiff.sync":%q}}`, name, "sync."+sync, sync)
			resp, err := nc.Request("$JS.API.STREAM.CREATE."+name, []byte(req), 2*time.Second)
			require.NoError(t, err)
			require.Contains(t, string(resp.Data), `"_skiff.sync":"`+sync+`"`)
			require.NotContains(t, string(resp.Data), `"sync":`, "a field the JetStream API does not define")
			for i := 1; i <= 20; i++ {
				ack, err := js.Publish(c, "sync."+sync, []byte("x"))
				require.NoError(t, err)
				require.Equal(t, uint64(i), ack.Sequence)
			}
		})
	}
	for _, bad := range []string{
		`{"name":"BAD","sync":"sometimes"}`,
		`{"name":"BAD","metadata":{"_skiff.sync":"sometimes"}}`,
		`{"name":"BAD","metadata":{"_skiff.sync_interval":"-1s"}}`,
	} {
		resp, err := nc.Request("$JS.API.STREAM.CREATE.BAD", []byte(bad), 2*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(resp.Data), `"error"`, bad)
	}
}

func TestInterestRetentionWithoutConsumers(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Retention: njs.InterestPolicy})
	require.NoError(t, err)
	ack, err := js.Publish(c, "S", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(1), ack.Sequence)
	info, err := s.Info(c)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)
	require.Equal(t, uint64(1), info.State.LastSeq)
}

func TestPublishCoreWithoutReply(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S"})
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, nc.Publish("S", []byte("fire and forget")))
	}
	require.NoError(t, nc.Flush())
	require.Eventually(t, func() bool {
		info, err := s.Info(c)
		return err == nil && info.State.Msgs == 10
	}, 5*time.Second, 10*time.Millisecond)
	_ = nats.ErrTimeout
}
