package store

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The crash tests re-run this test binary as a child process that works
// on a store and prints what it has been told is durable; the parent kills
// it with SIGKILL at a random moment, reopens the store and checks that
// everything printed survived.
const (
	crashChildEnv = "SKIFF_STORE_CRASH_CHILD"
	crashDirEnv   = "SKIFF_STORE_CRASH_DIR"
)

func TestMain(m *testing.M) {
	switch os.Getenv(crashChildEnv) {
	case "stream":
		crashChildStream(os.Getenv(crashDirEnv))
	case "consumer":
		crashChildConsumer(os.Getenv(crashDirEnv))
	default:
		os.Exit(m.Run())
	}
	os.Exit(0)
}

// crashData is the payload appender g writes as its n-th message.
func crashData(g, n int) []byte {
	return payload(uint64(g)<<32|uint64(n), 50+(g*131+n*17)%400)
}

// crashChildStream appends from four goroutines with SyncAlways and prints
// "seq g n" once WaitDurable(seq) has returned. It runs until killed.
func crashChildStream(dir string) {
	s, err := Open(Options{Dir: dir, SegmentBytes: 32 << 10, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	start := int(s.State().LastSeq) // n restarts per child; the parent matches by seq
	var out sync.Mutex
	for g := 0; g < 4; g++ {
		go func(g int) {
			for n := start; ; n++ {
				seq, _, err := s.Append(fmt.Sprintf("crash.%d", g), nil, crashData(g, n), 0)
				if err == nil {
					err = s.WaitDurable(seq)
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(2)
				}
				out.Lock()
				_, _ = fmt.Fprintf(os.Stdout, "%d %d %d\n", seq, g, n)
				out.Unlock()
			}
		}(g)
	}
	select {}
}

// runCrashChild starts a child, lets it run for a random while after its
// first line, kills it, and returns the lines it printed.
func runCrashChild(t *testing.T, kind, dir string, rng *rand.Rand) []string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+kind, crashDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	select {
	case l, ok := <-lines:
		require.True(t, ok, "child exited early: %s", stderr.String())
		got = append(got, l)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("child printed nothing: %s", stderr.String())
	}
	time.Sleep(time.Duration(20+rng.IntN(250)) * time.Millisecond)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	for l := range lines {
		got = append(got, l)
	}
	require.Empty(t, stderr.String())
	return got
}

// TestCrashStream kills an appending child several times: every message
// whose WaitDurable returned survives with its content, with no gaps.
func TestCrashStream(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	acked := map[uint64][2]int{}
	for round := 0; round < 5; round++ {
		for _, l := range runCrashChild(t, "stream", dir, rng) {
			f := strings.Fields(l)
			require.Len(t, f, 3, "line %q", l)
			seq, _ := strconv.ParseUint(f[0], 10, 64)
			g, _ := strconv.Atoi(f[1])
			n, _ := strconv.Atoi(f[2])
			acked[seq] = [2]int{g, n}
		}
		s, err := Open(Options{Dir: dir, SegmentBytes: 32 << 10, Logger: quiet})
		require.NoError(t, err)
		st := s.State()
		require.Equal(t, uint64(1), st.FirstSeq)
		require.Zero(t, st.NumDeleted, "round %d: no gaps", round)
		require.Equal(t, st.LastSeq, st.Msgs)
		for seq, gn := range acked {
			m, err := s.Get(seq)
			require.NoError(t, err, "round %d: acknowledged seq %d lost", round, seq)
			require.Equal(t, fmt.Sprintf("crash.%d", gn[0]), m.Subject)
			require.Equal(t, crashData(gn[0], gn[1]), m.Data, "round %d: seq %d", round, seq)
		}
		require.NoError(t, s.Close())
	}
	require.NotEmpty(t, acked)
	t.Logf("%d acknowledged messages checked over 5 kills", len(acked))
}

// crashChildConsumer records deliveries and acknowledges them out of order
// with SyncAlways, printing the ack floor each Ack returned. It runs until
// killed.
func crashChildConsumer(dir string) {
	c, err := OpenConsumerState(dir, nil, Durability{Sync: SyncAlways})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	st, _ := c.Load()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
	next := st.Delivered.Stream + 1
	pending := make([]uint64, 0, len(st.Pending))
	for q := range st.Pending {
		pending = append(pending, q)
	}
	for {
		for len(pending) < 32 {
			if err := c.Delivered(next, next, 1, time.Now().UnixNano()); err != nil {
				fmt.Fprintln(os.Stderr, "delivered:", err)
				os.Exit(2)
			}
			pending = append(pending, next)
			next++
		}
		i := rng.IntN(len(pending))
		if err := c.Ack(pending[i], pending[i]); err != nil {
			fmt.Fprintln(os.Stderr, "ack:", err)
			os.Exit(2)
		}
		pending = append(pending[:i], pending[i+1:]...)
		st, _ := c.Load()
		_, _ = fmt.Fprintf(os.Stdout, "%d\n", st.AckFloor.Stream)
	}
}

// TestCrashConsumerState kills an acknowledging child several times: the
// ack floor after recovery is never below one the child printed.
func TestCrashConsumerState(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var floor uint64
	for round := 0; round < 5; round++ {
		for _, l := range runCrashChild(t, "consumer", dir, rng) {
			v, err := strconv.ParseUint(l, 10, 64)
			require.NoError(t, err)
			floor = max(floor, v)
		}
		c, err := OpenConsumerState(dir, nil, Durability{Sync: SyncAlways})
		require.NoError(t, err)
		st, err := c.Load()
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.AckFloor.Stream, floor, "round %d: ack floor went back", round)
		require.LessOrEqual(t, len(st.Pending), 32)
		require.NoError(t, c.Close())
	}
	require.NotZero(t, floor)
}
