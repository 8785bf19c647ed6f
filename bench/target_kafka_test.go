package bench_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skiffmq/skiff/bench"
)

// TestTargetKafka runs the kafka target against the Kafka that
// SKIFF_KAFKA_URL names; `make bench-peers` starts one and sets it. Each
// run must leave no topic behind, and ?flush=always must make topics that
// the broker fsyncs at every append.
func TestTargetKafka(t *testing.T) {
	u := os.Getenv("SKIFF_KAFKA_URL")
	if u == "" {
		t.Skip("SKIFF_KAFKA_URL is not set: `make bench-peers` starts Kafka and runs this test")
	}
	adm := kafkaAdmin(t, u)
	t.Run("default", func(t *testing.T) {
		targetSuite(t, u, 2_000)
		requireNoBenchTopics(t, adm)
	})
	t.Run("flush-always", func(t *testing.T) {
		always := u + "?flush=always"
		tgt, err := bench.OpenTarget(always)
		require.NoError(t, err)
		topic := "bench.flush.check"
		conn, err := tgt.Open(context.Background(), topic, nil)
		require.NoError(t, err)
		cfgs, err := adm.DescribeTopicConfigs(context.Background(), topic)
		require.NoError(t, err)
		cfg, err := cfgs.On(topic, nil)
		require.NoError(t, err)
		var flush string
		for i := range cfg.Configs {
			if cfg.Configs[i].Key == "flush.messages" {
				flush = cfg.Configs[i].MaybeValue()
			}
		}
		require.Equal(t, "1", flush, "flush.messages of a flush=always topic")
		require.NoError(t, conn.Close())
		requireNoBenchTopics(t, adm)

		targetSuite(t, always, 2_000)
		requireNoBenchTopics(t, adm)
	})
}

// kafkaAdmin connects an admin client to the broker a kafka:// URL names.
func kafkaAdmin(t *testing.T, rawURL string) *kadm.Client {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(u.Host, ",")...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// requireNoBenchTopics checks that the target deleted every topic it made.
// Brokers learn of a deletion from the controller a moment after it is
// done, hence the wait.
func requireNoBenchTopics(t *testing.T, adm *kadm.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		topics, err := adm.ListTopics(context.Background())
		require.NoError(t, err)
		var left []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, "bench.") {
				left = append(left, name)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topics left behind: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
