package multiraft

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// recordingHandler is a Handler that records what it is given.
type recordingHandler struct {
	mu    sync.Mutex
	msgs  []Envelope
	beats []Beat
	ups   []uint64
	downs []uint64
	got   chan struct{}
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{got: make(chan struct{}, 1024)}
}

func (r *recordingHandler) Receive(from uint64, b Batch) {
	r.mu.Lock()
	for _, e := range b.Msgs {
		e.Data = append([]byte(nil), e.Data...) // the transport reuses its buffer
		r.msgs = append(r.msgs, e)
	}
	r.beats = append(r.beats, b.Beats...)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *recordingHandler) LinkUp(peer uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ups = append(r.ups, peer)
}

func (r *recordingHandler) LinkDown(peer uint64) {
	r.mu.Lock()
	r.downs = append(r.downs, peer)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *recordingHandler) counts() (msgs, beats, downs int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs), len(r.beats), len(r.downs)
}

// waitFor waits, up to 5 s, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// tcpEnd returns a TCP transport with a recording handler and c as its
// link to peer, closed when the test ends.
func tcpEnd(t *testing.T, opts TCPOptions, peer uint64, c net.Conn) (*TCP, *recordingHandler) {
	t.Helper()
	tr, err := NewTCP(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tr.Close() })
	h := newRecordingHandler()
	tr.SetHandler(h)
	require.NoError(t, tr.Add(peer, c))
	return tr, h
}

// tcpPair links two TCP transports, 1 and 2, over c1 and c2.
func tcpPair(t *testing.T, opts TCPOptions, c1, c2 net.Conn) (t1, t2 *TCP, h1, h2 *recordingHandler) {
	t.Helper()
	t1, h1 = tcpEnd(t, opts, 2, c1)
	t2, h2 = tcpEnd(t, opts, 1, c2)
	return t1, t2, h1, h2
}

// discard reads and drops what c receives, answering nothing.
func discard(c net.Conn) {
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
}

// loopbackConns returns the two ends of a TCP connection on loopback.
func loopbackConns(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = ln.Close() }()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	c1, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c2, ok := <-ch
	require.True(t, ok)
	return c1, c2
}

func envelope(t *testing.T, group uint64, m *raftpb.Message) Envelope {
	t.Helper()
	e, err := envelopeOf(group, m)
	require.NoError(t, err)
	return e
}

func TestTCPDeliversInOrder(t *testing.T) {
	for _, c := range []struct {
		name  string
		conns func(t testing.TB) (net.Conn, net.Conn)
	}{
		{"pipe", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }},
		{"loopback", loopbackConns},
	} {
		t.Run(c.name, func(t *testing.T) {
			c1, c2 := c.conns(t)
			t1, _, _, h2 := tcpPair(t, TCPOptions{}, c1, c2)
			const n = 200
			for i := range n {
				m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
					Index: new(uint64(i)), Entries: []*raftpb.Entry{{Data: []byte("x")}}}
				dropped := t1.Send(2, Batch{
					Msgs:  []Envelope{envelope(t, uint64(i%7+1), m)},
					Beats: []Beat{{Group: uint64(i), Term: 3, Commit: uint64(i)}},
				})
				require.Empty(t, dropped)
			}
			waitFor(t, "every message", func() bool { m, b, _ := h2.counts(); return m == n && b == n })
			h2.mu.Lock()
			defer h2.mu.Unlock()
			for i, e := range h2.msgs {
				m := &raftpb.Message{}
				require.NoError(t, proto.Unmarshal(e.Data, m))
				require.Equal(t, uint64(i), m.GetIndex(), "bulk messages keep their order")
				require.Equal(t, uint64(i%7+1), e.Group)
			}
			for i, b := range h2.beats {
				require.Equal(t, Beat{Group: uint64(i), Term: 3, Commit: uint64(i)}, b)
			}
		})
	}
}

// What is queued while the writer is busy goes out merged: one beats
// frame and one msgs frame for many Sends.
func TestTCPMergesQueuedTraffic(t *testing.T) {
	c1, c2 := net.Pipe()
	t1, _ := tcpEnd(t, TCPOptions{}, 2, c1)
	// Nobody reads c2 yet: the writer blocks on its first write, and
	// everything sent meanwhile waits in the lanes.
	hb := &raftpb.Message{Type: raftpb.MsgVote.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(2))}
	t1.Send(2, Batch{Beats: []Beat{{Group: 1}}})
	time.Sleep(10 * time.Millisecond)
	for g := range uint64(100) {
		t1.Send(2, Batch{Msgs: []Envelope{envelope(t, g, hb)}, Beats: []Beat{{Group: g, Term: 2}}})
	}
	_, h2 := tcpEnd(t, TCPOptions{}, 1, c2)
	waitFor(t, "every message", func() bool { m, b, _ := h2.counts(); return m == 100 && b == 101 })
	st := t1.Stats()
	require.Len(t, st, 1)
	require.LessOrEqual(t, st[0].FramesOut, uint64(4), "1 beats frame, then 1 beats and 1 msgs frame (and maybe a ping)")
}

// When the bulk lane is full, bulk messages are returned as dropped,
// while control messages are still queued.
func TestTCPBulkLaneCapped(t *testing.T) {
	c1, c2 := net.Pipe()
	defer func() { _ = c2.Close() }()
	t1, _ := tcpEnd(t, TCPOptions{BulkBytes: 1000, WriteTimeout: time.Minute}, 2, c1)
	app := &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
		Entries: []*raftpb.Entry{{Data: make([]byte, 300)}}}
	e := envelope(t, 1, app)
	require.True(t, e.Bulk)
	var dropped []Envelope
	for range 10 {
		dropped = append(dropped, t1.Send(2, Batch{Msgs: []Envelope{e}})...)
	}
	require.NotEmpty(t, dropped, "nobody reads: the lane fills")
	require.LessOrEqual(t, len(dropped), 10-3, "about 1000 bytes were queued (and one frame may be in the writer)")
	vote := envelope(t, 1, &raftpb.Message{Type: raftpb.MsgVote.Enum(), From: new(uint64(1)), To: new(uint64(2))})
	require.False(t, vote.Bulk)
	require.Empty(t, t1.Send(2, Batch{Msgs: []Envelope{vote}}), "control traffic is never dropped by the lane")
	require.Equal(t, []Envelope{e}, t1.Send(3, Batch{Msgs: []Envelope{e, vote}}), "no link: the bulk message is dropped")
}

func TestTCPLinkDownOnClose(t *testing.T) {
	c1, c2 := loopbackConns(t)
	_, t2, h1, _ := tcpPair(t, TCPOptions{}, c1, c2)
	require.NoError(t, t2.Close())
	waitFor(t, "LinkDown", func() bool { _, _, d := h1.counts(); return d == 1 })
	h1.mu.Lock()
	defer h1.mu.Unlock()
	require.Equal(t, []uint64{2}, h1.downs)
	require.Equal(t, []uint64{2}, h1.ups)
}

// A peer that stops answering (a black hole: the connection stays open)
// is dropped after PingMisses ping intervals.
func TestTCPStaleLink(t *testing.T) {
	c1, c2 := net.Pipe()
	discard(c2)
	start := time.Now()
	_, h1 := tcpEnd(t, TCPOptions{PingInterval: 10 * time.Millisecond, PingMisses: 3}, 2, c1)
	waitFor(t, "LinkDown", func() bool { _, _, d := h1.counts(); return d == 1 })
	require.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

// A live peer answers pings, so an idle link stays up. Twenty-five pings
// go each way; a link is dropped only after ten unanswered ones in a row
// (100 ms), so a scheduler stall under -race on a busy machine does not
// read as a dead peer (5 ms and two misses did, once, in CI).
func TestTCPIdleLinkStaysUp(t *testing.T) {
	c1, c2 := net.Pipe()
	_, _, h1, h2 := tcpPair(t, TCPOptions{PingInterval: 10 * time.Millisecond, PingMisses: 10}, c1, c2)
	time.Sleep(250 * time.Millisecond)
	_, _, d1 := h1.counts()
	_, _, d2 := h2.counts()
	require.Zero(t, d1+d2)
}

// Garbage on the link closes it.
func TestTCPGarbageClosesLink(t *testing.T) {
	c1, c2 := net.Pipe()
	_, h1 := tcpEnd(t, TCPOptions{}, 2, c1)
	discard(c2)
	_, _ = c2.Write(appendFrame(nil, frameKind(42), []byte("?")))
	waitFor(t, "LinkDown", func() bool { _, _, d := h1.counts(); return d == 1 })
}

func TestTCPReplacedLinkNotReportedDown(t *testing.T) {
	c1, c2 := net.Pipe()
	t1, _, h1, _ := tcpPair(t, TCPOptions{}, c1, c2)
	c3, c4 := net.Pipe()
	defer func() { _ = c4.Close() }()
	require.NoError(t, t1.Add(2, c3))
	time.Sleep(20 * time.Millisecond)
	h1.mu.Lock()
	defer h1.mu.Unlock()
	require.Empty(t, h1.downs)
	require.Equal(t, []uint64{2, 2}, h1.ups)
}

func TestTCPOptionsValidated(t *testing.T) {
	_, err := NewTCP(TCPOptions{BulkBytes: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = NewTCP(TCPOptions{FrameBytes: MaxFrameBytes})
	require.ErrorIs(t, err, ErrInvalidOptions)
	tr, err := NewTCP(TCPOptions{})
	require.NoError(t, err)
	c1, c2 := net.Pipe()
	defer func() { _ = c2.Close() }()
	require.ErrorIs(t, tr.Add(2, c1), ErrNoHandler)
}

// appHandler is a recording handler that also takes app messages.
type appHandler struct {
	*recordingHandler
	app []string
}

func (a *appHandler) ReceiveApp(from uint64, payload []byte) {
	a.mu.Lock()
	a.app = append(a.app, string(payload)) // copied: the transport reuses its buffer
	a.mu.Unlock()
}

func (a *appHandler) apps() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.app...)
}

// TestTCPApp: the layer above's messages cross a link whole and in order,
// interleaved with raft traffic; without a link, or with the lane full,
// SendApp says so.
func TestTCPApp(t *testing.T) {
	c1, c2 := loopbackConns(t)
	t1, err := NewTCP(TCPOptions{BulkBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = t1.Close() })
	t1.SetHandler(newRecordingHandler())
	require.ErrorIs(t, t1.SendApp(2, []byte("early")), ErrNoLink)
	require.NoError(t, t1.Add(2, c1))
	t2, err := NewTCP(TCPOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = t2.Close() })
	h2 := &appHandler{recordingHandler: newRecordingHandler()}
	t2.SetHandler(h2)
	require.NoError(t, t2.Add(1, c2))

	var want []string
	for i := range 100 {
		p := fmt.Sprintf("app %d %s", i, strings.Repeat("x", i*100))
		want = append(want, p)
		require.NoError(t, t1.SendApp(2, []byte(p)))
		hb := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2))}
		t1.Send(2, Batch{Msgs: []Envelope{envelope(t, 1, hb)}})
	}
	waitFor(t, "every app message", func() bool { return len(h2.apps()) == len(want) })
	require.Equal(t, want, h2.apps())
	require.Equal(t, uint64(100), t1.Stats()[0].AppOut)

	// Nobody reads c4: the writer blocks, and the lane fills up.
	c3, c4 := net.Pipe()
	defer func() { _ = c4.Close() }()
	t3, err := NewTCP(TCPOptions{BulkBytes: 1000, WriteTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = t3.Close() })
	t3.SetHandler(newRecordingHandler())
	require.NoError(t, t3.Add(2, c3))
	var err3 error
	for range 20 {
		if err3 = t3.SendApp(2, make([]byte, 300)); err3 != nil {
			break
		}
	}
	require.ErrorIs(t, err3, ErrLaneFull)
	require.ErrorIs(t, t3.SendApp(2, make([]byte, MaxFrameBytes)), ErrTooLarge)
}

// unmarshalingHandler unmarshals what it is given as a Node does, and
// keeps the messages, whose entries may alias the frames they came in.
type unmarshalingHandler struct {
	recordingHandler
	apps            []*raftpb.Message
	aliased, copied int // frames read into buffers of their own
}

func (u *unmarshalingHandler) Receive(from uint64, b Batch) {
	u.mu.Lock()
	var alias *frameAlias
	for i := range b.Msgs {
		m := &raftpb.Message{}
		if err := unmarshalMsg(&b.Msgs[i], m); err != nil {
			panic(err)
		}
		u.apps, alias = append(u.apps, m), b.Msgs[i].alias
	}
	switch {
	case alias != nil && alias.aliased:
		u.aliased++
	case alias != nil:
		u.copied++
	}
	u.mu.Unlock()
	u.got <- struct{}{}
}

// TestTCPReusesOnlyUnaliasedFrames sends large appends, some whose
// entries alias the frame they arrive in and some whose entries are all
// copied out of it, and checks that the link reuses only the latter's
// frames: every entry kept is still what was sent once later frames have
// been read.
func TestTCPReusesOnlyUnaliasedFrames(t *testing.T) {
	c1, c2 := loopbackConns(t)
	t1, _ := tcpEnd(t, TCPOptions{}, 2, c1)
	t2, err := NewTCP(TCPOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = t2.Close() })
	h := &unmarshalingHandler{recordingHandler: *newRecordingHandler()}
	t2.SetHandler(h)
	require.NoError(t, t2.Add(1, c2))

	r := rand.New(rand.NewPCG(1, 2))
	var sent [][]byte
	const rounds = 40
	for i := range rounds {
		// One entry of the whole frame (aliased), or two of half of it
		// each (copied): a frame of ownFrameBytes or more either way.
		sizes := []int{2 * ownFrameBytes}
		if i%2 == 1 {
			sizes = []int{ownFrameBytes, ownFrameBytes}
		}
		m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)), Index: new(uint64(i))}
		for _, n := range sizes {
			data := make([]byte, n)
			for j := range data {
				data[j] = byte(r.Uint32())
			}
			m.Entries = append(m.Entries, &raftpb.Entry{Data: data})
			sent = append(sent, data)
		}
		require.Empty(t, t1.Send(2, Batch{Msgs: []Envelope{envelope(t, 1, m)}}))
		waitFor(t, "the append", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.apps) == i+1 })
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Equal(t, rounds/2, h.aliased, "frames aliased by their entry")
	require.Equal(t, rounds/2, h.copied, "frames whose entries were copied")
	var got [][]byte
	for _, m := range h.apps {
		for _, e := range m.Entries {
			got = append(got, e.Data)
		}
	}
	require.Len(t, got, len(sent))
	for i := range sent {
		require.True(t, bytes.Equal(sent[i], got[i]), "entry %d changed after it was received", i)
	}
}
