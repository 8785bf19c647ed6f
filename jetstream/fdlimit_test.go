//go:build unix

package jetstream_test

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

const fdChildEnv = "SKIFF_FD_CHILD_DIR"

// fdChildLimit is the child's limit of open files: far fewer than the
// streams of TestManyStreamsFewDescriptors need if each keeps its files
// open.
const fdChildLimit = 256

// TestFDLimitChild is the child of TestManyStreamsFewDescriptors: with
// its hard limit of open files lowered to fdChildLimit and its soft limit
// to half that, it runs a broker with default options on the directory
// named by the environment, logging to its standard error, checks that
// the soft limit was raised to the hard one, and writes its URL to
// DIR/url. Run alone it does nothing.
func TestFDLimitChild(t *testing.T) {
	dir := os.Getenv(fdChildEnv)
	if dir == "" {
		t.Skip("the child of TestManyStreamsFewDescriptors")
	}
	lim := syscall.Rlimit{Cur: fdChildLimit / 2, Max: fdChildLimit}
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RandomPort, 0
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: filepath.Join(dir, "store"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	require.NoError(t, err)
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	require.Equal(t, uint64(fdChildLimit), uint64(lim.Cur), "the soft limit is raised to the hard limit") //nolint:unconvert // int64 on some platforms
	require.NoError(t, s.Start())
	tmp := filepath.Join(dir, "url.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(s.ClientURL()), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "url")))
	time.Sleep(5 * time.Minute) // until killed
}

// TestManyStreamsFewDescriptors: a broker started with a soft limit of 128
// open files and a hard limit of 256 raises the soft limit to 256 and
// logs both, with its budget for streams (half). It then holds
// 200 file streams, each with a message and a durable consumer that
// acknowledged it, and still accepts new clients and serves every stream:
// the files of streams and consumers share a bounded set of descriptors
// (half the limit by default), the rest staying free for clients. Each
// stream used about three descriptors of its own before.
func TestManyStreamsFewDescriptors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFDLimitChild$", "-test.timeout=6m")
	cmd.Env = append(os.Environ(), fdChildEnv+"="+dir)
	out, err := os.Create(filepath.Join(dir, "child.log"))
	require.NoError(t, err)
	defer func() { _ = out.Close() }()
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var url string
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "url"))
		url = string(b)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond, "the child broker did not start")
	logged, err := os.ReadFile(filepath.Join(dir, "child.log"))
	require.NoError(t, err)
	for _, want := range []string{"jetstream started", fmt.Sprintf("open_files_soft_limit=%d", fdChildLimit),
		fmt.Sprintf("open_files_hard_limit=%d", fdChildLimit), fmt.Sprintf("raised_from=%d", fdChildLimit/2),
		fmt.Sprintf("max_open_files=%d", fdChildLimit/2)} {
		require.Contains(t, string(logged), want)
	}

	const streams = 200
	_, js := connect(t, url)
	for i := range streams {
		name := "S" + strconv.Itoa(i)
		_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: name, Subjects: []string{name}})
		require.NoError(t, err, "stream %d", i)
		_, err = js.Publish(ctx(t), name, []byte(name))
		require.NoError(t, err, "stream %d", i)
		c, err := js.CreateOrUpdateConsumer(ctx(t), name, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
		require.NoError(t, err, "stream %d", i)
		msgs, err := c.Fetch(1, njs.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for m := range msgs.Messages() {
			require.NoError(t, m.DoubleAck(ctx(t)))
		}
	}

	// New clients still connect, and every stream still answers.
	for i := range 40 {
		nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
		require.NoError(t, err, "client %d", i)
		t.Cleanup(nc.Close)
		_, err = nc.Request("$JS.API.INFO", nil, 5*time.Second)
		require.NoError(t, err, "client %d", i)
	}
	for i := range streams {
		name := "S" + strconv.Itoa(i)
		s, err := js.Stream(ctx(t), name)
		require.NoError(t, err)
		m, err := s.GetMsg(ctx(t), 1)
		require.NoError(t, err, "stream %d", i)
		require.Equal(t, name, string(m.Data))
		c, err := s.Consumer(ctx(t), "D")
		require.NoError(t, err)
		require.Equal(t, uint64(1), c.CachedInfo().AckFloor.Stream, fmt.Sprintf("stream %d", i))
	}
}
