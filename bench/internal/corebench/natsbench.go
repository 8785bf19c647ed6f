package corebench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// natsBench runs the nats CLI's bench command: `nats -s URL bench ARGS...`,
// with an isolated home directory so that no user context is read.
func (o *Options) natsBench(ctx context.Context, url string, args ...string) *exec.Cmd {
	return o.nats(ctx, url, append([]string{"bench"}, args...)...)
}

// nats runs the nats CLI: `nats -s URL ARGS...`, with an isolated home
// directory so that no user context is read.
func (o *Options) nats(ctx context.Context, url string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, o.NATSBin, append([]string{"-s", url}, args...)...)
	if o.home == "" {
		o.home, _ = os.MkdirTemp("", "corebench-home") // removed at the end of run
	}
	cmd.Env = append(os.Environ(), "HOME="+o.home, "XDG_CONFIG_HOME="+o.home)
	return cmd
}

var (
	// "NATS Core NATS subscriber stats: 633,908 msgs/sec" or, with
	// --clients > 1, "... subscriber aggregated stats: 957,824 msgs/sec".
	subRate     = regexp.MustCompile(`subscriber (?:aggregated )?stats: ([0-9,]+) msgs/sec`)
	requestRate = regexp.MustCompile(`requester (?:aggregated )?stats: ([0-9,]+) msgs/sec`)
)

func parseRate(re *regexp.Regexp, out []byte) (float64, error) {
	m := re.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no rate in nats bench output:\n%s", out)
	}
	return strconv.ParseFloat(strings.ReplaceAll(string(m[1]), ",", ""), 64)
}

// pubSub runs `nats bench sub` with subs clients on subSubject, then one
// `nats bench pub` on pubSubject, and returns the subscribers' aggregate
// delivered msgs/sec as nats bench reports it.
func (o *Options) pubSub(ctx context.Context, url, subSubject, pubSubject string, subs, size int) (float64, error) {
	return o.pubSubN(ctx, url, subSubject, pubSubject, subs, size, o.Msgs)
}

// pubSubN is pubSub with n messages instead of Options.Msgs.
func (o *Options) pubSubN(ctx context.Context, url, subSubject, pubSubject string, subs, size, n int) (float64, error) {
	return o.pubSubAt(ctx, url, url, subSubject, pubSubject, subs, size, n)
}

// pubSubAt is pubSubN with the subscribers on subURL and the publisher on
// pubURL (two users of one server: the accounts scenarios).
func (o *Options) pubSubAt(ctx context.Context, subURL, pubURL, subSubject, pubSubject string, subs, size, n int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	msgs := strconv.Itoa(n)
	sizeArg := strconv.Itoa(size)
	sub := o.natsBench(ctx, subURL, "sub", subSubject, "--msgs", msgs, "--size", sizeArg, "--clients", strconv.Itoa(subs), "--no-progress")
	var subOut lockedBuffer
	sub.Stdout, sub.Stderr = &subOut, &subOut
	if err := sub.Start(); err != nil {
		return 0, err
	}
	// The subscribers must be in place before the first message.
	if err := waitFor(&subOut, "Starting Core NATS subscriber", subs, 10*time.Second); err != nil {
		_ = sub.Process.Kill()
		_ = sub.Wait()
		return 0, err
	}
	time.Sleep(200 * time.Millisecond)
	pub := o.natsBench(ctx, pubURL, "pub", pubSubject, "--msgs", msgs, "--size", sizeArg, "--no-progress")
	if out, err := pub.CombinedOutput(); err != nil {
		_ = sub.Process.Kill()
		_ = sub.Wait()
		return 0, fmt.Errorf("nats bench pub: %w\n%s", err, out)
	}
	// A subscriber the server disconnects would reconnect and wait for
	// messages that no longer come: stop it as soon as that shows.
	waitErr := make(chan error, 1)
	go func() { waitErr <- sub.Wait() }()
	for {
		select {
		case err := <-waitErr:
			if err != nil {
				return 0, fmt.Errorf("nats bench sub: %w\n%s", err, subOut.String())
			}
			return parseRate(subRate, []byte(subOut.String()))
		case <-time.After(100 * time.Millisecond):
			if strings.Contains(subOut.String(), "Disconnected") {
				_ = sub.Process.Kill()
				return 0, fmt.Errorf("the server disconnected the subscriber (cut off as a slow consumer); nats bench sub stopped: %v", <-waitErr)
			}
		}
	}
}

// service runs `nats bench service serve` and `nats bench service request`
// and returns the requesters' aggregate requests/sec.
func (o *Options) service(ctx context.Context, url string, requesters, size int) (float64, error) {
	return o.serviceAt(ctx, url, url, requesters, size)
}

// serviceAt is service with the responders on serveURL and the requesters
// on reqURL.
func (o *Options) serviceAt(ctx context.Context, serveURL, reqURL string, requesters, size int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	serve := o.natsBench(ctx, serveURL, "service", "serve", "bench.svc", "--clients", "2", "--no-progress")
	var serveOut lockedBuffer
	serve.Stdout, serve.Stderr = &serveOut, &serveOut
	if err := serve.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = serve.Process.Kill()
		_ = serve.Wait()
	}()
	time.Sleep(500 * time.Millisecond)
	n := strconv.Itoa(max(o.Msgs/20, 1000))
	req := o.natsBench(ctx, reqURL, "service", "request", "bench.svc", "--msgs", n, "--size", strconv.Itoa(size),
		"--clients", strconv.Itoa(requesters), "--no-progress")
	out, err := req.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("nats bench service request: %w\n%s", err, out)
	}
	return parseRate(requestRate, out)
}

// lockedBuffer collects a child's output while we poll it. mu guards b.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls buf until s appears n times.
func waitFor(buf *lockedBuffer, s string, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Count(buf.String(), s) >= n {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("timed out waiting for %q in:\n%s", s, buf.String())
}
