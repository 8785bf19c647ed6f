package corebench

import (
	"context"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestParseRate: each rate line of nats bench's output, core and
// JetStream, is read; a line of none is an error.
func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		name string
		re   *regexp.Regexp
		line string
		want float64
	}{
		{"subscriber", subRate, "NATS Core NATS subscriber stats: 633,908 msgs/sec ~ 9.7 MiB/sec", 633908},
		{"subscribers aggregated", subRate, " NATS Core NATS subscriber aggregated stats: 957,824 msgs/sec ~ 117 MiB/sec", 957824},
		{"requester", requestRate, "NATS Core NATS service requester stats: 4,659 msgs/sec ~ 582 KiB/sec", 4659},
		{"JetStream publisher", jsPubRate, "NATS JetStream asynchronous publisher stats: 189,017 msgs/sec ~ 2.9 MiB/sec ~ min: 1,624.33us", 189017},
		{"ordered consumer", jsOrderedRate, "NATS JetStream ordered ephemeral consumer stats: 532,672 msgs/sec ~ 65 MiB/sec", 532672},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseRate(tc.re, []byte(tc.line))
			require.NoError(t, err)
			require.Equal(t, tc.want, v)
		})
	}
	_, err := parseRate(subRate, []byte("nothing here"))
	require.Error(t, err)
	require.Equal(t, "1,234,567", commas(1234567))
	require.Equal(t, "12", commas(12))
}

func TestAsUser(t *testing.T) {
	require.Equal(t, "nats://b:b@127.0.0.1:4222", asUser("nats://127.0.0.1:4222", "b"))
}

func TestResultRatio(t *testing.T) {
	r := &Result{Scenario: Scenario{LowerIsBetter: true}, Samples: map[string][]float64{"skiff": {100, 200, 300}, "nats-server": {400}}}
	require.Equal(t, 2.0, r.Ratio())
	r.Scenario.LowerIsBetter = false
	require.Equal(t, 0.5, r.Ratio())
}

// TestRatioText: a ratio is written with two decimals, and more where two
// would show a missed goal as met.
func TestRatioText(t *testing.T) {
	for _, tc := range []struct {
		ratio, goal float64
		want        string
	}{
		{1.6612, 1.5, "1.66x"},
		{1.4412, 1.5, "1.44x"},
		{1.5, 1.5, "1.50x"},
		{1.4991, 1.5, "1.499x"},
		{1.49996, 1.5, "1.5000x"}, // four decimals at most
		{0.9951, 1.0, "0.995x"},
		{1.0049, 1.0, "1.00x"},
	} {
		require.Equal(t, tc.want, ratioText(tc.ratio, tc.goal), "ratio %v goal %v", tc.ratio, tc.goal)
	}
}

// TestWriteNotes: a run's secondary measurements are filed by target and
// key, in the order first noted, and written with their medians and every
// sample; results without any write nothing.
func TestWriteNotes(t *testing.T) {
	r := &Result{Scenario: Scenario{Name: "cluster-js-r3-1k"}}
	r.addNotes("skiff", []note{{"servers' CPU per message (µs)", 17}, {"the publisher's (µs)", 5}})
	r.addNotes("nats-server", []note{{"servers' CPU per message (µs)", 23}, {"the publisher's (µs)", 5.25}})
	r.addNotes("skiff", []note{{"servers' CPU per message (µs)", 15}, {"the publisher's (µs)", 5.5}})
	r.addNotes("skiff", []note{{"servers' CPU per message (µs)", 16.5}, {"the publisher's (µs)", 4.5}})
	var b strings.Builder
	require.NoError(t, WriteNotes(&b, []*Result{{Scenario: Scenario{Name: "fanout"}}, r}))
	require.Equal(t, "| scenario | measured beside it | Skiff | nats-server | samples |\n| --- | --- | ---: | ---: | --- |\n"+
		"| cluster-js-r3-1k | servers' CPU per message (µs) | 16.50 | 23.00 | skiff 17.00, 15.00, 16.50; nats-server 23.00 |\n"+
		"| cluster-js-r3-1k | the publisher's (µs) | 5.00 | 5.25 | skiff 5.00, 5.50, 4.50; nats-server 5.25 |\n", b.String())

	b.Reset()
	require.NoError(t, WriteNotes(&b, []*Result{{Scenario: Scenario{Name: "fanout"}}}))
	require.Empty(t, b.String())
}

// TestChurn runs the churn workload briefly against an in-process server:
// the churner keeps its rate and messages are delivered. CHURN_URL runs it
// against a running server instead (for profiling one).
func TestChurn(t *testing.T) {
	url := os.Getenv("CHURN_URL")
	d := time.Second
	if url == "" {
		s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort})
		require.NoError(t, err)
		require.NoError(t, s.Start())
		defer func() { _ = s.Shutdown(context.Background()) }()
		url = s.ClientURL()
	} else {
		d = 10 * time.Second
	}
	rate, err := churn(context.Background(), url, 1000, 200, 128, d)
	require.NoError(t, err)
	require.Positive(t, rate)
	t.Logf("%.0f msgs/s delivered", rate)
}

// TestClusterChurn runs the cluster churn workload briefly against an
// in-process three-server Skiff cluster: the subscriptions' interest
// reaches the publisher's server, the churners keep their rate, and
// messages cross the routes.
func TestClusterChurn(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	r, err := churnOn(context.Background(), churnSetup{Pub: c.URL(0), Subs: []string{c.URL(1), c.URL(2)},
		Churners: []string{c.URL(1), c.URL(2)}}, 1000, 200, 128, 300*time.Millisecond)
	require.NoError(t, err)
	require.Positive(t, r.delivered)
	require.Greater(t, r.changes, 160.0)
	t.Logf("%.0f msgs/s delivered, %.0f subscribes/s", r.delivered, r.changes)
}

func TestClusterConfig(t *testing.T) {
	got := clusterConfig("max_pending: 1GB", 1, []int{7001, 7002, 7003})
	require.Equal(t, `max_pending: 1GB
server_name: n2
jetstream: disabled
cluster {
  name: bench
  listen: "127.0.0.1:7002"
  routes: [nats-route://127.0.0.1:7001, nats-route://127.0.0.1:7002, nats-route://127.0.0.1:7003]
}
`, got)
}

func TestJetStreamAccountsConfig(t *testing.T) {
	require.Contains(t, jsAccountsConfig, "A: { jetstream: enabled, users:")
}

// TestParseStatCPU: utime and stime are read from a /proc/PID/stat line,
// whatever its command name holds; a short or malformed line is an error.
func TestParseStatCPU(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       time.Duration
		err        bool
	}{
		{"plain", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 37 0 0 20 0 12 0 100 0 0", 2870 * time.Millisecond, false},
		{"name with spaces and parentheses", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0", 70 * time.Millisecond, false},
		{"no name", "4242 skiff S 1", 0, true},
		{"too short", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250", 0, true},
		{"not a number", "4242 (skiff) S 1 4242 4242 0 -1 4194560 1234 0 0 0 x 37 0", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.line)
			if (err != nil) != tt.err {
				t.Fatalf("parseStatCPU: err %v, want error %v", err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("parseStatCPU = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestProcCPU reads this process's CPU time, which a busy loop moves on:
// by 20 ms (two ticks) within 10 s of looping, however loaded the machine.
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		for range 1 << 20 {
			x++
		}
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 20*time.Millisecond {
			return
		}
	}
	t.Fatalf("CPU time did not move by 20 ms over 10 s of a busy loop (%d turns)", x)
}
