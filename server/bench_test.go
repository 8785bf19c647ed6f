package server

import (
	"cmp"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkRoutePublish measures the publish path a client's PUB takes on
// its read loop: the lookup, the copies into the subscribers' queues, and
// the end of each read (a batch of 64 publishes). Subscribers' queues are
// drained in place, without writers or sockets, so that only routing is
// measured.
func BenchmarkRoutePublish(b *testing.B) {
	cases := []struct {
		name, pattern, subject string
		subs                   int
	}{
		{"subs=1", "bench.orders", "bench.orders", 1},
		{"fanout=4", "bench.orders", "bench.orders", 4},
		{"wildcard", "bench.*", "bench.orders", 1},
	}
	for _, acc := range benchAccountModes {
		for _, tc := range cases {
			b.Run("accounts="+acc.name+"/"+tc.name, func(b *testing.B) {
				s, err := New(acc.opts())
				if err != nil {
					b.Fatal(err)
				}
				pub := benchClient(b, s, acc.connect)
				var subs []*client
				for i := range tc.subs {
					c := benchClient(b, s, cmp.Or(acc.subConnect, acc.connect))
					if err := c.Sub([]byte(tc.pattern), nil, []byte{byte('1' + i)}); err != nil {
						b.Fatal(err)
					}
					subs = append(subs, c)
				}
				for _, other := range acc.others {
					// Another tenant with the same subscriptions.
					c := benchClient(b, s, other)
					for i := range tc.subs {
						if err := c.Sub([]byte(tc.pattern), nil, []byte{byte('1' + i)}); err != nil {
							b.Fatal(err)
						}
					}
				}
				subj, payload := []byte(tc.subject), make([]byte, 128)
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := pub.Pub(subj, nil, -1, payload); err != nil {
						b.Fatal(err)
					}
					if i%64 == 63 {
						pub.endOfRead()
						for _, c := range subs {
							benchDrain(c)
						}
					}
				}
				pub.endOfRead()
			})
		}
	}
}

// benchAccountMode is a server configuration of BenchmarkRoutePublish:
// the options, the CONNECT of the publisher and its subscribers (of the
// subscribers, if different: subConnect), and the CONNECTs of other
// tenants subscribed to the same subjects.
type benchAccountMode struct {
	name       string
	opts       func() Options
	connect    string
	subConnect string
	others     []string
}

const benchConnect = `{"verbose":false,"pedantic":false}`

var benchAccountModes = []benchAccountMode{
	{name: "off", opts: func() Options { return Options{} }, connect: benchConnect},
	{name: "on", opts: func() Options {
		return Options{Accounts: []AccountConfig{
			{Name: "A", Users: []User{{Name: "a", Password: "a"}}},
			{Name: "B", Users: []User{{Name: "b", Password: "b"}}},
		}}
	}, connect: `{"verbose":false,"pedantic":false,"user":"a","pass":"a"}`,
		others: []string{`{"verbose":false,"pedantic":false,"user":"b","pass":"b"}`}},
	// The subscribers are in B, which imports A's stream: every message
	// crosses a bridge.
	{name: "import", opts: func() Options {
		return Options{Accounts: []AccountConfig{
			{Name: "A", Users: []User{{Name: "a", Password: "a"}}, Exports: []Export{{Subject: "bench.>"}}},
			{Name: "B", Users: []User{{Name: "b", Password: "b"}}, Imports: []Import{{Account: "A", Subject: "bench.>"}}},
		}}
	}, connect: `{"verbose":false,"pedantic":false,"user":"a","pass":"a"}`,
		subConnect: `{"verbose":false,"pedantic":false,"user":"b","pass":"b"}`},
}

// benchClient returns a client, without a connection, that has sent
// CONNECT connect.
func benchClient(b testing.TB, s *Server, connect string) *client {
	b.Helper()
	p, q := net.Pipe()
	b.Cleanup(func() { _, _ = p.Close(), q.Close() })
	c := s.newClient(p, s.nextCID.Add(1))
	if err := c.Connect([]byte(connect)); err != nil {
		b.Fatal(err)
	}
	return c
}

// benchDrain drops what is queued for c, as its writer would after a
// write.
func benchDrain(c *client) {
	o := &c.out
	o.mu.Lock()
	for _, buf := range o.mu.bufs {
		putChunk(buf)
	}
	clear(o.mu.bufs)
	o.mu.bufs, o.mu.queued = o.mu.bufs[:0], 0
	o.openGateLocked()
	o.mu.Unlock()
}

// TestRoutePublishDoesNotAllocate: a publish allocates nothing once the
// subscribers' queues have a chunk, whether accounts are off, on, or the
// message crosses a stream import (the hop scratch is made on first use).
func TestRoutePublishDoesNotAllocate(t *testing.T) {
	for _, acc := range benchAccountModes {
		t.Run("accounts="+acc.name, func(t *testing.T) {
			s, err := New(acc.opts())
			require.NoError(t, err)
			pub := benchClient(t, s, acc.connect)
			sub := benchClient(t, s, cmp.Or(acc.subConnect, acc.connect))
			require.NoError(t, sub.Sub([]byte("bench.*"), nil, []byte("1")))
			subj, payload := []byte("bench.orders"), make([]byte, 128)
			allocs := testing.AllocsPerRun(100, func() {
				if err := pub.Pub(subj, nil, -1, payload); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs)
			msgs, _ := sub.out.counts()
			require.EqualValues(t, 101, msgs, "every publish reached the subscriber (AllocsPerRun runs once more to warm up)")
		})
	}
}
