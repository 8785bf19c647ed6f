package bench_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench"
)

func TestSchemes(t *testing.T) {
	require.Equal(t, []string{"amqp", "jetstream", "kafka", "nats", "noop", "redis"}, bench.Schemes())
}

// TestOpenTarget opens targets without connecting: Open connects, not
// OpenTarget.
func TestOpenTarget(t *testing.T) {
	for _, tc := range []struct {
		url     string
		name    string // "" for an error
		unknown bool   // the error is ErrUnknownScheme
	}{
		{url: "nats://127.0.0.1:4222", name: "nats"},
		{url: "nats://user:pass@127.0.0.1:4222", name: "nats"},
		{url: "redis://127.0.0.1:6379", name: "redis"},
		{url: "redis://127.0.0.1:6379/2", name: "redis"},
		{url: "amqp://guest:guest@127.0.0.1:5672/", name: "rabbitmq"},
		{url: "noop://", name: "noop"},
		{url: "kafka://127.0.0.1:9092", name: "kafka"},
		{url: "kafka://127.0.0.1:9092?flush=always", name: "kafka"},
		{url: "kafka://127.0.0.1:9092?flush=sometimes"}, // only always
		{url: "kafka://"}, // no broker
		{url: "mqtt://127.0.0.1:1883", unknown: true}, // no MQTT target
		{url: "localhost:4222", unknown: true},        // the scheme is "localhost"
		{url: "127.0.0.1:4222"},                       // not a URL
		{url: "redis://127.0.0.1:6379/notadb"},        // go-redis refuses it
		{url: "nats://[::1"},                          // not a URL
	} {
		t.Run(tc.url, func(t *testing.T) {
			tgt, err := bench.OpenTarget(tc.url)
			if tc.name == "" {
				require.Error(t, err)
				if tc.unknown {
					require.ErrorIs(t, err, bench.ErrUnknownScheme)
				} else {
					require.NotErrorIs(t, err, bench.ErrUnknownScheme)
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, tgt.Name())
		})
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // 0 for an error
	}{
		{"256", 256},
		{"256B", 256},
		{"256b", 256},
		{"1KB", 1 << 10},
		{"5kb", 5 << 10},
		{" 1MB ", 1 << 20},
		{"16", 16},
		{"", 0},
		{"B", 0},
		{"KB", 0},
		{"0", 0},
		{"-1KB", 0},
		{"1GB", 0},
		{"1.5KB", 0},
		{"12abc", 0},
	} {
		t.Run(tc.in, func(t *testing.T) {
			n, err := bench.ParseSize(tc.in)
			if tc.want == 0 {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
		})
	}
}

func TestSizeName(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{16, "16B"},
		{256, "256B"},
		{1000, "1000B"},
		{1 << 10, "1KB"},
		{1536, "1536B"},
		{5 << 10, "5KB"},
		{1 << 20, "1MB"},
		{3 << 20, "3MB"},
		{1<<20 + 1<<10, "1025KB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, bench.SizeName(tc.n))
			// What SizeName writes, ParseSize reads back.
			n, err := bench.ParseSize(tc.want)
			require.NoError(t, err)
			require.Equal(t, tc.n, n)
		})
	}
}

// TestName checks the file names of the published suite's configurations.
func TestName(t *testing.T) {
	var got []string
	for _, c := range bench.Suites["published"] {
		got = append(got, bench.Name(c.Size, c.Rate, c.Connections))
	}
	require.Equal(t, []string{
		"256B-3000rps-1conn",
		"1KB-3000rps-1conn",
		"5KB-2000rps-1conn",
		"1KB-20000rps-25conn",
		"1MB-100rps-1conn",
	}, got)
}
