package jetstream_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
)

func TestAccountInfo(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	ai, err := js.AccountInfo(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 0, ai.Streams)
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	ai, err = js.AccountInfo(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 1, ai.Streams)
	require.Equal(t, jetstream.DefaultMaxStreams, ai.Limits.MaxStreams)
	require.Positive(t, ai.API.Total)
}

func TestStreamLifecycle(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)

	s, err := js.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, MaxMsgs: 100})
	require.NoError(t, err)
	info := s.CachedInfo()
	require.Equal(t, "ORDERS", info.Config.Name)
	require.Equal(t, int64(100), info.Config.MaxMsgs)
	require.Equal(t, 2*time.Minute, info.Config.Duplicates)
	require.Equal(t, njs.FileStorage, info.Config.Storage)

	// Creating it again with the same configuration is fine; with another
	// it is not.
	_, err = js.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, MaxMsgs: 100})
	require.NoError(t, err)
	_, err = js.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, MaxMsgs: 5})
	require.ErrorIs(t, err, njs.ErrStreamNameAlreadyInUse)

	// Overlapping subjects are refused.
	_, err = js.CreateStream(c, njs.StreamConfig{Name: "OTHER", Subjects: []string{"orders.new"}})
	require.Equal(t, njs.ErrorCode(10065), apiCode(err))

	// Update: limits and subjects change; storage cannot.
	s, err = js.UpdateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*", "returns.>"}, MaxMsgs: 10})
	require.NoError(t, err)
	require.Equal(t, int64(10), s.CachedInfo().Config.MaxMsgs)
	_, err = js.UpdateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, Storage: njs.MemoryStorage})
	require.Equal(t, njs.ErrorCode(10052), apiCode(err))
	_, err = js.UpdateStream(c, njs.StreamConfig{Name: "NOPE", Subjects: []string{"nope"}})
	require.ErrorIs(t, err, njs.ErrStreamNotFound)

	_, err = js.Publish(c, "returns.a.b", []byte("x"))
	require.NoError(t, err)

	// Names and list, with a subject filter.
	_, err = js.CreateStream(c, njs.StreamConfig{Name: "LOGS", Subjects: []string{"logs.>"}})
	require.NoError(t, err)
	var names []string
	for n := range js.StreamNames(c).Name() {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"ORDERS", "LOGS"}, names)
	names = nil
	for n := range js.StreamNames(c, njs.WithStreamListSubject("logs.x")).Name() {
		names = append(names, n)
	}
	require.Equal(t, []string{"LOGS"}, names)
	var infos []*njs.StreamInfo
	for si := range js.ListStreams(c).Info() {
		infos = append(infos, si)
	}
	require.Len(t, infos, 2)

	name, err := js.StreamNameBySubject(c, "orders.new")
	require.NoError(t, err)
	require.Equal(t, "ORDERS", name)

	// Delete.
	require.NoError(t, js.DeleteStream(c, "LOGS"))
	require.ErrorIs(t, js.DeleteStream(c, "LOGS"), njs.ErrStreamNotFound)
	_, err = js.Stream(c, "LOGS")
	require.ErrorIs(t, err, njs.ErrStreamNotFound)
}

func TestStreamConfigErrors(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	tests := []struct {
		name string
		cfg  njs.StreamConfig
		code njs.ErrorCode
	}{
		{"bad subject", njs.StreamConfig{Name: "A", Subjects: []string{"a..b"}}, 10052},
		{"overlapping own subjects", njs.StreamConfig{Name: "A", Subjects: []string{"a.*", "a.b"}}, 10052},
		{"reserved subject", njs.StreamConfig{Name: "A", Subjects: []string{"$JS.API.>"}}, 10052},
		{"replicas", njs.StreamConfig{Name: "A", Replicas: 3}, 10074},
		{"dup window above max age", njs.StreamConfig{Name: "A", MaxAge: time.Second, Duplicates: time.Minute}, 10052},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := js.CreateStream(ctx(t), tt.cfg)
			require.Error(t, err)
			require.Equal(t, tt.code, apiCode(err), "%v", err)
		})
	}
}

func TestMaxStreams(t *testing.T) {
	b := startBrokerWith(t, jetstream.Options{MaxStreams: 2})
	_, js := connect(t, b.srv.ClientURL())
	for i := range 2 {
		_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: fmt.Sprint("S", i)})
		require.NoError(t, err)
	}
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S2"})
	require.Equal(t, njs.ErrorCode(10027), apiCode(err))
}

// TestServerSyncPolicy: a stream that names no sync policy gets the
// server's; one that names it keeps its own; an update from a client that
// knows nothing of it (nats.go, the nats CLI) leaves it as it was.
func TestServerSyncPolicy(t *testing.T) {
	b := startBrokerWith(t, jetstream.Options{Sync: jetstream.SyncAlways, SyncInterval: time.Second})
	nc, js := connect(t, b.srv.ClientURL())
	// The policy is in the metadata, under _skiff. keys.
	syncOf := func(name string) (string, string) {
		t.Helper()
		m, err := nc.Request("$JS.API.STREAM.INFO."+name, nil, 5*time.Second)
		require.NoError(t, err)
		var info struct{ Config jetstream.StreamConfig }
		require.NoError(t, json.Unmarshal(m.Data, &info))
		return info.Config.Metadata["_skiff.sync"], info.Config.Metadata["_skiff.sync_interval"]
	}
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "D", Subjects: []string{"d"}})
	require.NoError(t, err)
	p, iv := syncOf("D")
	require.Equal(t, "always", p)
	require.Empty(t, iv, "an interval only for the interval policy")

	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "I", Subjects: []string{"i"},
		Metadata: map[string]string{"_skiff.sync": "interval", "_skiff.sync_interval": "250ms", "mine": "kept"}})
	require.NoError(t, err)
	p, iv = syncOf("I")
	require.Equal(t, "interval", p)
	require.Equal(t, "250ms", iv)

	m, err := nc.Request("$JS.API.STREAM.CREATE.N", []byte(`{"name":"N","subjects":["n"],"metadata":{"_skiff.sync":"never"}}`), 5*time.Second)
	require.NoError(t, err)
	require.NotContains(t, string(m.Data), `"error"`)
	p, _ = syncOf("N")
	require.Equal(t, "never", p)

	_, err = js.UpdateStream(ctx(t), njs.StreamConfig{Name: "N", Subjects: []string{"n", "n2"}})
	require.NoError(t, err)
	p, _ = syncOf("N")
	require.Equal(t, "never", p, "an update without the field keeps the policy")
}

func TestPurgeAndDelete(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.*"}})
	require.NoError(t, err)
	for i := range 10 {
		_, err := js.Publish(c, fmt.Sprintf("s.%d", i%2), []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.DeleteMsg(c, 3))
	require.Equal(t, njs.ErrorCode(10043), apiCode(s.DeleteMsg(c, 3)))
	info, err := s.Info(c)
	require.NoError(t, err)
	require.Equal(t, uint64(9), info.State.Msgs)
	require.Equal(t, 1, info.State.NumDeleted)

	// Purge one subject, keeping the newest message.
	require.NoError(t, s.Purge(c, njs.WithPurgeSubject("s.0"), njs.WithPurgeKeep(1)))
	info, err = s.Info(c, njs.WithSubjectFilter("s.*"))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{"s.0": 1, "s.1": 5}, info.State.Subjects)

	// Purge up to a sequence, then everything.
	require.NoError(t, s.Purge(c, njs.WithPurgeSequence(8)))
	info, err = s.Info(c)
	require.NoError(t, err)
	require.Equal(t, uint64(8), info.State.FirstSeq)
	require.NoError(t, s.Purge(c))
	info, err = s.Info(c)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)
	require.Equal(t, uint64(10), info.State.LastSeq)
	require.Equal(t, uint64(11), info.State.FirstSeq)

	// Sequences continue after a purge.
	ack, err := js.Publish(c, "s.0", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(11), ack.Sequence)
}

func TestDenyPurgeDeleteSealed(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", DenyDelete: true, DenyPurge: true})
	require.NoError(t, err)
	_, err = js.Publish(c, "S", []byte("x"))
	require.NoError(t, err)
	require.Equal(t, njs.ErrorCode(10057), apiCode(s.DeleteMsg(c, 1)))
	require.Equal(t, njs.ErrorCode(10110), apiCode(s.Purge(c)))
	_, err = js.UpdateStream(c, njs.StreamConfig{Name: "S", DenyPurge: false, DenyDelete: true})
	require.Equal(t, njs.ErrorCode(10052), apiCode(err))

	_, err = js.UpdateStream(c, njs.StreamConfig{Name: "S", DenyDelete: true, DenyPurge: true, Sealed: true})
	require.NoError(t, err)
	_, err = js.Publish(c, "S", []byte("y"))
	require.Equal(t, njs.ErrorCode(10109), apiCode(err))
}

func TestGetMsg(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprint("direct=", direct), func(t *testing.T) {
			b := startBroker(t, "")
			nc, js := connect(t, b.srv.ClientURL())
			c := ctx(t)
			s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: direct})
			require.NoError(t, err)
			m := nats.NewMsg("s.a")
			m.Header.Set("K", "v")
			m.Data = []byte("one")
			_, err = js.PublishMsg(c, m)
			require.NoError(t, err)
			_, err = js.Publish(c, "s.b", []byte("two"))
			require.NoError(t, err)
			_, err = js.Publish(c, "s.a", []byte("three"))
			require.NoError(t, err)

			got, err := s.GetMsg(c, 1)
			require.NoError(t, err)
			require.Equal(t, "s.a", got.Subject)
			require.Equal(t, "one", string(got.Data))
			require.Equal(t, "v", got.Header.Get("K"))
			require.Equal(t, uint64(1), got.Sequence)
			require.WithinDuration(t, time.Now(), got.Time, time.Minute)

			got, err = s.GetLastMsgForSubject(c, "s.a")
			require.NoError(t, err)
			require.Equal(t, "three", string(got.Data))
			got, err = s.GetLastMsgForSubject(c, "s.>")
			require.NoError(t, err)
			require.Equal(t, uint64(3), got.Sequence)

			got, err = s.GetMsg(c, 2, njs.WithGetMsgSubject("s.a"))
			require.NoError(t, err)
			require.Equal(t, uint64(3), got.Sequence)

			_, err = s.GetMsg(c, 99)
			require.ErrorIs(t, err, njs.ErrMsgNotFound)
			_, err = s.GetLastMsgForSubject(c, "s.zzz")
			require.ErrorIs(t, err, njs.ErrMsgNotFound)

			if direct {
				// The last-by-subject form of DIRECT.GET.
				resp, err := nc.Request("$JS.API.DIRECT.GET.S.s.b", nil, time.Second)
				require.NoError(t, err)
				require.Equal(t, "two", string(resp.Data))
				require.Equal(t, "2", resp.Header.Get("Nats-Sequence"))
				require.Equal(t, "S", resp.Header.Get("Nats-Stream"))
			}
		})
	}
}

func TestDirectGetBatch(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}, AllowDirect: true})
	require.NoError(t, err)
	for i := range 5 {
		_, err := js.Publish(c, fmt.Sprintf("s.%d", i%2), []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("$JS.API.DIRECT.GET.S", inbox, []byte(`{"seq":1,"next_by_subj":"s.0","batch":10}`)))
	var seqs []string
	for {
		m, err := sub.NextMsg(time.Second)
		require.NoError(t, err)
		if m.Header.Get("Status") == "204" {
			require.Equal(t, "0", m.Header.Get("Nats-Num-Pending"))
			require.Equal(t, "5", m.Header.Get("Nats-Last-Sequence"))
			break
		}
		seqs = append(seqs, m.Header.Get("Nats-Sequence"))
	}
	require.Equal(t, []string{"1", "3", "5"}, seqs)
}

func TestUnsupportedFeaturesRefused(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "M", Mirror: &njs.StreamSource{Name: "X"}})
	require.Equal(t, njs.ErrorCode(10052), apiCode(err))
	require.Contains(t, err.Error(), "mirror")
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "S"})
	require.NoError(t, err)
	resp, err := nc.Request("$JS.API.CONSUMER.CREATE.S.C", []byte(`{"stream_name":"S","config":{"name":"C","priority_policy":"pinned_client","priority_groups":["a"]}}`), time.Second)
	require.NoError(t, err)
	require.Contains(t, string(resp.Data), `"err_code":10012`)
	require.Contains(t, string(resp.Data), "priority_groups")
}

func TestFirstSeqAndNoAck(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "F", FirstSeq: 100})
	require.NoError(t, err)
	ack, err := js.Publish(ctx(t), "F", nil)
	require.NoError(t, err)
	require.Equal(t, uint64(100), ack.Sequence)

	s, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "N", NoAck: true})
	require.NoError(t, err)
	_, err = nc.Request("N", []byte("x"), 200*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

func TestDedupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S"})
	require.NoError(t, err)
	_, err = js.Publish(ctx(t), "S", []byte("a"), njs.WithMsgID("once"))
	require.NoError(t, err)
	b.stop()
	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	ack, err := js.Publish(ctx(t), "S", []byte("a"), njs.WithMsgID("once"))
	require.NoError(t, err)
	require.True(t, ack.Duplicate)
	require.Equal(t, uint64(1), ack.Sequence)
	_, err = js.Publish(ctx(t), "S", nil, njs.WithExpectLastMsgID("once"))
	require.NoError(t, err)
}
