package jetstream_test

import (
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
)

func TestQuotaReservations(t *testing.T) {
	for _, tc := range []struct {
		storage njs.StorageType
		opts    jetstream.Options
		code    njs.ErrorCode
	}{
		{njs.FileStorage, jetstream.Options{MaxStore: 10_000}, 10047},
		{njs.MemoryStorage, jetstream.Options{MaxMemory: 10_000}, 10028},
	} {
		t.Run(tc.storage.String(), func(t *testing.T) {
			b := startBrokerWith(t, tc.opts)
			_, js := connect(t, b.srv.ClientURL())
			create := func(name string, maxBytes int64) error {
				_, err := js.CreateStream(ctx(t), njs.StreamConfig{
					Name: name, Subjects: []string{strings.ToLower(name)}, Storage: tc.storage, MaxBytes: maxBytes,
				})
				return err
			}
			require.Equal(t, tc.code, apiCode(create("BIG", 20_000)))
			require.NoError(t, create("HALF", 5_000))
			require.NoError(t, create("NOLIMIT", 0)) // reserves a byte
			require.Equal(t, tc.code, apiCode(create("REST", 5_000)))
			require.NoError(t, create("LESS", 4_999-1))
			// An update may not grow past the quota either.
			_, err := js.UpdateStream(ctx(t), njs.StreamConfig{Name: "HALF", Subjects: []string{"half"}, Storage: tc.storage, MaxBytes: 6_000})
			require.Equal(t, tc.code, apiCode(err))
			_, err = js.UpdateStream(ctx(t), njs.StreamConfig{Name: "HALF", Subjects: []string{"half"}, Storage: tc.storage, MaxBytes: 4_000})
			require.NoError(t, err)
		})
	}
}

func TestQuotaRefusesPublishWhenFull(t *testing.T) {
	const quota = 20_000
	for _, tc := range []struct {
		storage njs.StorageType
		opts    jetstream.Options
	}{
		{njs.FileStorage, jetstream.Options{MaxStore: quota}},
		{njs.MemoryStorage, jetstream.Options{MaxMemory: quota}},
	} {
		t.Run(tc.storage.String(), func(t *testing.T) {
			b := startBrokerWith(t, tc.opts)
			_, js := connect(t, b.srv.ClientURL())
			s, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "Q", Subjects: []string{"q"}, Storage: tc.storage})
			require.NoError(t, err)
			payload := make([]byte, 1000)
			var refused error
			for i := 0; i < 100 && refused == nil; i++ {
				_, refused = js.Publish(ctx(t), "q", payload)
			}
			require.Error(t, refused, "100 KB stored under a 20 KB quota")
			require.Equal(t, njs.ErrorCode(10023), apiCode(refused))
			info, err := s.Info(ctx(t))
			require.NoError(t, err)
			// The bound holds, to within the one message that reached it.
			require.LessOrEqual(t, info.State.Bytes, uint64(quota+len(payload)+100))
			require.GreaterOrEqual(t, info.State.Bytes, uint64(quota))

			// Room made by a purge is seen at the next recount.
			require.NoError(t, s.Purge(ctx(t)))
			require.Eventually(t, func() bool {
				_, err := js.Publish(ctx(t), "q", payload)
				return err == nil
			}, 5*time.Second, 50*time.Millisecond)
		})
	}
}

func TestStrictRequests(t *testing.T) {
	const body = `{"name":"S","subjects":["s"],"storage":"file","no_such_field":1}`
	for _, tc := range []struct {
		name    string
		lenient bool
		body    string
		ok      bool
	}{
		{"strict refuses an unknown field", false, body, false},
		{"lenient ignores it", true, body, true},
		{"a field of the reference server's passes the decode", false, `{"name":"S","subjects":["s"],"placement":{}}`, true},
		// Skiff's sync policy of earlier versions is not the API's:
		// strict refuses it (it lives in metadata now), lenient reads it.
		{"strict refuses the old top-level sync", false, `{"name":"S","subjects":["s"],"sync":"always"}`, false},
		{"lenient reads the old top-level sync", true, `{"name":"S","subjects":["s"],"sync":"always"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBrokerWith(t, jetstream.Options{Lenient: tc.lenient})
			nc, _ := connect(t, b.srv.ClientURL())
			m, err := nc.Request("$JS.API.STREAM.CREATE.S", []byte(tc.body), 5*time.Second)
			require.NoError(t, err)
			if tc.ok {
				require.NotContains(t, string(m.Data), `"error"`)
				return
			}
			require.Contains(t, string(m.Data), `"err_code":10025`)
			require.Contains(t, string(m.Data), `unknown field`)
		})
	}
}
