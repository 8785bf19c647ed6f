package server_test

import (
	"bytes"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/server"
)

// `nats bench` publisher and subscriber side by side on the default
// settings complete: the publisher is held back while the subscriber
// catches up, instead of the subscriber being cut off as a slow consumer
// (which left the benchmark hanging).
func TestNatsBenchOnDefaults(t *testing.T) {
	bin := natscli.Path(t)
	for _, tc := range []struct {
		size string
		msgs int
	}{{"16B", 200_000}, {"1KiB", 200_000}, {"64KiB", 5_000}} {
		t.Run(tc.size, func(t *testing.T) {
			s := RunServer(t, server.Options{})
			cli := natscli.New(t, bin, s.ClientURL())
			n := strconv.Itoa(tc.msgs)
			sub := cli.Start("bench", "sub", "bench.t", "--size", tc.size, "--msgs", n)
			waitForSubs(t, s, 1)
			cli.Run("bench", "pub", "bench.t", "--size", tc.size, "--msgs", n)
			out := sub.Wait()
			require.Contains(t, out, "subscriber stats")
			require.Zero(t, s.SlowConsumers())
		})
	}
}

// rawSub subscribes on a raw connection and returns it; the caller decides
// how (and whether) it reads.
func rawSub(t *testing.T, s *server.Server, subject string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Write([]byte("CONNECT {\"verbose\":false}\r\nSUB " + subject + " 1\r\nPING\r\n"))
	require.NoError(t, err)
	return c
}

// A subscriber that reads slowly gets every message and is not cut off:
// the publisher waited for it (readPaced). Past what the sockets hold too: the writer
// takes a long queue a bounded batch at a time, so the gate opens as the
// reader reads. When it wrote the whole queue at once, the gate stayed
// closed until the kernel took the last byte of it (which loopback's
// socket buffers release in bursts), and a reader at a third of the
// publisher's pace was cut off.
func TestSlowReaderIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name       string
		msgs       int
		maxPending int
		pause      time.Duration // after each read of up to 64 KiB
	}{
		{"within the socket buffers", 3_000, 256 << 10, 1200 * time.Microsecond},
		{"past the socket buffers", 40_000, 8 << 20, time.Millisecond}, // 40 MB
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A reader the scheduler leaves idle longer than the
			// publisher's bounded wait is cut off, as it should be;
			// on a loaded machine (-race beside other packages) that
			// happens now and then, so a cut-off is tried again, a
			// few times. A gate that does not hold the publisher back
			// is cut off every time.
			const attempts = 3
			for attempt := 1; ; attempt++ {
				counted, slow, stalls := slowReaderRun(t, tc.msgs, tc.maxPending, tc.pause)
				if counted < tc.msgs && slow > 0 && attempt < attempts {
					t.Logf("attempt %d: cut off after %d of %d messages (%d stalls); trying again", attempt, counted, tc.msgs, stalls)
					continue
				}
				require.Equal(t, tc.msgs, counted)
				require.Zero(t, slow, "waited for, not cut off")
				require.Positive(t, stalls, "the publisher was held back")
				return
			}
		})
	}
}

// slowReaderRun publishes msgs 1 KiB messages to a raw subscriber reading
// at most 64 KiB every pause, on a server with maxPending. It returns the
// messages the reader counted, the server's slow consumers and its stalls.
func slowReaderRun(t *testing.T, msgs, maxPending int, pause time.Duration) (counted int, slow, stalls int64) {
	s := RunServer(t, server.Options{MaxPending: maxPending, MaxPayload: 64 << 10})
	conn := rawSub(t, s, "slow")
	waitForSubs(t, s, 1)
	done, reading := make(chan int, 1), make(chan struct{})
	go func() { done <- readPaced(conn, "MSG slow 1 ", msgs, pause, s.Stalls, reading) }()
	<-reading // rawSub's PONG: the reader is reading before the publisher starts
	pub := Connect(t, s)
	payload := bytes.Repeat([]byte("x"), 1024)
	for range msgs {
		if err := pub.Publish("slow", payload); err != nil {
			break // the server closed the publisher too: counted says what arrived
		}
	}
	_ = pub.Flush()
	pub.Close()
	counted = <-done
	return counted, s.SlowConsumers(), s.Stalls()
}

// readPaced is readSlowly for a reader that the publisher waits for. A
// publisher waits at a subscriber's gate 2 ms at a time, and one read of
// its (64 KiB) passes MaxPending from the gate's mark at 256 KiB: the
// reader has about one such wait to read again, or it is cut off, as it
// should be. So readPaced closes reading after its first read (before the
// publisher starts: a reader goroutine not yet running when the first
// gate closes is cut off at once on a busy machine), pauses after each
// read, and reads again at once when the publisher has waited since
// (stalls grew): slower than the publisher, so that the gate closes, and
// answering a closed gate within the poll's period rather than after a
// fixed pause that the race detector or other packages' tests stretch.
// Without stalls it pauses a fixed time (readSlowly); reading may be nil.
func readPaced(conn net.Conn, prefix string, want int, pause time.Duration, stalls func() int64, reading chan<- struct{}) int {
	buf := make([]byte, 64<<10)
	var tail []byte
	n := 0
	p := []byte(prefix)
	for first := true; n < want; first = false {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, err := conn.Read(buf)
		if first && reading != nil {
			close(reading)
		}
		if err != nil {
			break
		}
		chunk := append(tail, buf[:k]...)
		n += bytes.Count(chunk, p)
		// A prefix split between two reads is counted with the next.
		tail = append([]byte(nil), chunk[max(0, len(chunk)-len(p)+1):]...)
		n -= bytes.Count(tail, p)
		if stalls == nil {
			time.Sleep(pause)
			continue
		}
		seen := stalls()
		for end := time.Now().Add(pause); time.Now().Before(end) && stalls() == seen; {
			time.Sleep(50 * time.Microsecond)
		}
	}
	return n + bytes.Count(tail, p)
}

// A subscriber that never reads is still cut off, and a healthy one beside
// it on the same publisher gets everything.
func TestNeverReaderIsCutOffHealthyOneServed(t *testing.T) {
	const msgs = 30_000 // 30 MB: more than loopback's socket buffers and 8 MB hold
	s := RunServer(t, server.Options{MaxPending: 8 << 20, MaxPayload: 64 << 10})
	stuck := rawSub(t, s, "fan")
	healthy := Connect(t, s)
	got := make(chan struct{}, msgs)
	_, err := healthy.Subscribe("fan", func(*nats.Msg) { got <- struct{}{} })
	require.NoError(t, err)
	require.NoError(t, healthy.Flush())
	waitForSubs(t, s, 2)

	pub := Connect(t, s)
	payload := bytes.Repeat([]byte("x"), 1024)
	start := time.Now()
	for range msgs {
		require.NoError(t, pub.Publish("fan", payload))
	}
	require.NoError(t, pub.Flush())
	for i := range msgs {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("the healthy subscriber got %d of %d (slow consumers %d, stalls %d, pub %v, healthy %v)", i, msgs, s.SlowConsumers(), s.Stalls(), pub.Status(), healthy.Status())
		}
	}
	require.Equal(t, int64(1), s.SlowConsumers(), "the never-reading one is cut off")
	// Each of the publisher's reads waits 10 ms at most, and only until
	// the stuck one is cut off: far below this bound on a busy machine.
	require.Less(t, time.Since(start), 30*time.Second)
	_ = stuck
}

// TestNeverReaderCutAtWriteDeadline: a subscriber that never reads, fed
// too slowly to reach max_pending, is still cut off, by the write
// deadline: that bounds how long it can hold its publisher back.
func TestNeverReaderCutAtWriteDeadline(t *testing.T) {
	s := RunServer(t, server.Options{MaxPending: 256 << 20, MaxPayload: 64 << 10, WriteDeadline: 300 * time.Millisecond})
	_ = rawSub(t, s, "trickle")
	waitForSubs(t, s, 1)
	pub := Connect(t, s)
	payload := bytes.Repeat([]byte("x"), 64<<10)
	// Enough to fill loopback's socket buffers, far below max_pending.
	for range 256 {
		require.NoError(t, pub.Publish("trickle", payload))
	}
	require.NoError(t, pub.Flush())
	deadline := time.Now().Add(20 * time.Second)
	for s.SlowConsumers() == 0 && time.Now().Before(deadline) {
		require.NoError(t, pub.Publish("trickle", payload))
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, int64(1), s.SlowConsumers(), "cut off by the write deadline")
	require.NoError(t, pub.Flush(), "the publisher carries on")
}
