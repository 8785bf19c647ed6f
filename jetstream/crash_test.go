package jetstream_test

// Crash tests: a child process (this test binary, re-executed) runs the
// broker; the parent publishes with sync "always" and consumes with
// synchronous acks, kills the child with SIGKILL at a random moment, starts
// it again on the same directory, and checks that every acknowledged
// publish is there with its payload, that the sequences have no gaps, and
// that the consumer's ack floor did not move back.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

const crashChildEnv = "SKIFF_CRASH_CHILD_DIR"

// TestCrashChild is the child: it runs a broker on the directory named by
// the environment and writes its URL to DIR/url, then waits to be killed.
// Run alone it does nothing.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("the child of TestCrashRecovery")
	}
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RandomPort, 0
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: filepath.Join(dir, "store")})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	tmp := filepath.Join(dir, "url.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(s.ClientURL()), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "url")))
	select {} // until SIGKILL
}

// child is a running child broker.
type child struct {
	cmd *exec.Cmd
	url string
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	_ = os.Remove(filepath.Join(dir, "url"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	out, err := os.Create(filepath.Join(dir, "child.log"))
	require.NoError(t, err)
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "url"))
		if err == nil {
			return &child{cmd: cmd, url: string(b)}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "child.log"))
			t.Fatalf("child broker did not start:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *child) kill(t *testing.T) {
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	_ = c.cmd.Wait()
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills broker processes")
	}
	dir := t.TempDir()
	acked := map[uint64]string{} // stream sequence -> payload, every acknowledged publish
	var floor uint64             // the highest ack floor the consumer reported
	rounds := 6
	for round := range rounds {
		c := startChild(t, dir)
		nc, err := nats.Connect(c.url, nats.MaxReconnects(0))
		require.NoError(t, err)
		js, err := njs.New(nc)
		require.NoError(t, err)
		cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)

		// What survived the last crash.
		verifyRecovered(t, cx, js, acked, floor, round)

		// Publish and consume until the kill.
		var mu sync.Mutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for p := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					payload := fmt.Sprintf("r%d-p%d-%d", round, p, i)
					ack, err := js.Publish(cx, "crash.data", []byte(payload))
					if err != nil {
						return // the broker died
					}
					mu.Lock()
					acked[ack.Sequence] = payload
					mu.Unlock()
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cons, err := js.Consumer(cx, "CRASH", "WORKER")
			if err != nil {
				return
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				batch, err := cons.Fetch(10, njs.FetchMaxWait(100*time.Millisecond))
				if err != nil {
					return
				}
				for m := range batch.Messages() {
					if m.DoubleAck(cx) != nil {
						return
					}
				}
				info, err := cons.Info(cx)
				if err != nil {
					return
				}
				mu.Lock()
				floor = max(floor, info.AckFloor.Stream)
				mu.Unlock()
			}
		}()

		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		c.kill(t)
		close(stop)
		wg.Wait()
		cancel()
		nc.Close()
		mu.Lock()
		t.Logf("round %d: %d acknowledged publishes so far, ack floor %d", round, len(acked), floor)
		mu.Unlock()
	}
	require.NotEmpty(t, acked)

	// A last start to check the last crash.
	c := startChild(t, dir)
	nc, err := nats.Connect(c.url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := njs.New(nc)
	require.NoError(t, err)
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	verifyRecovered(t, cx, js, acked, floor, rounds)
}

// verifyRecovered checks the stream and consumer after a restart, creating
// them on the first round.
func verifyRecovered(t *testing.T, cx context.Context, js njs.JetStream, acked map[uint64]string, floor uint64, round int) {
	t.Helper()
	if round == 0 {
		nc := js.Conn()
		resp, err := nc.Request("$JS.API.STREAM.CREATE.CRASH", []byte(`{"name":"CRASH","subjects":["crash.>"],"metadata":{"_skiff.sync":"always"}}`), 5*time.Second)
		require.NoError(t, err)
		require.NotContains(t, string(resp.Data), `"error"`)
		_, err = js.CreateConsumer(cx, "CRASH", njs.ConsumerConfig{Durable: "WORKER", AckPolicy: njs.AckExplicitPolicy, AckWait: 2 * time.Second})
		require.NoError(t, err)
		return
	}
	s, err := js.Stream(cx, "CRASH")
	require.NoError(t, err, "round %d: stream lost", round)
	st := s.CachedInfo().State
	// No gaps: nothing is ever deleted here.
	require.Zero(t, st.NumDeleted, "round %d: gaps in the stream", round)
	if st.Msgs > 0 {
		require.Equal(t, st.LastSeq-st.FirstSeq+1, st.Msgs, "round %d", round)
		require.Equal(t, uint64(1), st.FirstSeq, "round %d", round)
	}
	for seq, payload := range acked {
		require.LessOrEqual(t, seq, st.LastSeq, "round %d: acknowledged sequence %d lost (last %d)", round, seq, st.LastSeq)
		m, err := s.GetMsg(cx, seq)
		require.NoError(t, err, "round %d: acknowledged sequence %d", round, seq)
		require.Equal(t, payload, string(m.Data), "round %d: sequence %d", round, seq)
	}
	cons, err := js.Consumer(cx, "CRASH", "WORKER")
	require.NoError(t, err, "round %d: consumer lost", round)
	got := cons.CachedInfo().AckFloor.Stream
	require.GreaterOrEqual(t, got, floor, "round %d: the ack floor moved back", round)
	require.LessOrEqual(t, got, st.LastSeq, "round %d", round)
	if errors.Is(err, nil) && strings.Contains(os.Getenv("SKIFF_CRASH_VERBOSE"), "1") {
		t.Logf("round %d: %d messages, floor %d", round, st.Msgs, got)
	}
}
