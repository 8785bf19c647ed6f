package multiraft

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// TCPOptions configure a TCP transport. The zero value of each field
// means its default.
type TCPOptions struct {
	// BulkBytes caps the bulk lane of each link (appends with entries,
	// snapshots): a message that does not fit is dropped and reported to
	// raft, which probes and resends (default 64 MiB).
	BulkBytes int
	// FrameBytes is the payload size at which a msgs frame is cut, so that
	// control frames are written between bulk ones (default 1 MiB).
	FrameBytes int
	// PingInterval is how often a link pings its peer (default 250 ms).
	PingInterval time.Duration
	// PingMisses is how many ping intervals may pass with nothing received
	// before the link is stale and closed (default 3).
	PingMisses int
	// WriteTimeout bounds one write to the connection; a link whose peer
	// does not read is closed after it (default 2 s).
	WriteTimeout time.Duration
}

func (o TCPOptions) withDefaults() (TCPOptions, error) {
	o.BulkBytes = cmp.Or(o.BulkBytes, 64<<20)
	o.FrameBytes = cmp.Or(o.FrameBytes, 1<<20)
	o.PingInterval = cmp.Or(o.PingInterval, 250*time.Millisecond)
	o.PingMisses = cmp.Or(o.PingMisses, 3)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, 2*time.Second)
	if o.BulkBytes < 0 || o.FrameBytes < 0 || o.FrameBytes > MaxFrameBytes/2 || o.PingInterval < 0 || o.PingMisses < 0 || o.WriteTimeout < 0 {
		return o, fmt.Errorf("%w: TCPOptions %+v", ErrInvalidOptions, o)
	}
	return o, nil
}

// TCP is the production Transport: one link per peer server over a
// net.Conn that the caller established (the cluster listener hands raft
// links over), carrying frames (frame.go) both ways. Each link has a
// reader and a writer goroutine; the writer writes control traffic
// (votes, heartbeats, responses, empty appends) before bulk traffic
// (appends with entries, snapshots), and merges what was queued since its
// last write into one frame per kind. Safe for concurrent use.
type TCP struct {
	opts TCPOptions
	wg   sync.WaitGroup
	mu   struct {
		sync.Mutex
		h      Handler
		links  map[uint64]*link
		closed bool
	}
}

var _ Transport = (*TCP)(nil)

// ErrNoHandler is returned by TCP.Add before SetHandler.
var ErrNoHandler = errors.New("multiraft: transport has no handler")

// NewTCP returns a TCP transport with no links.
func NewTCP(opts TCPOptions) (*TCP, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	t := &TCP{opts: opts}
	t.mu.links = map[uint64]*link{}
	return t, nil
}

// SetHandler sets the Node that receives what links read.
func (t *TCP) SetHandler(h Handler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.h = h
}

// Add makes c the link to server peer, replacing (and closing) the one
// there was, and reports it up to the handler. The transport owns c from
// then on.
func (t *TCP) Add(peer uint64, c net.Conn) error {
	t.mu.Lock()
	if t.mu.closed {
		t.mu.Unlock()
		_ = c.Close()
		return ErrClosed
	}
	h := t.mu.h
	if h == nil {
		t.mu.Unlock()
		_ = c.Close()
		return ErrNoHandler
	}
	l := newLink(t, peer, c)
	old := t.mu.links[peer]
	t.mu.links[peer] = l
	t.wg.Add(2)
	t.mu.Unlock()
	if old != nil {
		old.close()
	}
	h.LinkUp(peer)
	go l.readLoop(h)
	go l.writeLoop()
	return nil
}

// Send queues b on the link to `to` (Transport).
func (t *TCP) Send(to uint64, b Batch) []Envelope {
	t.mu.Lock()
	l := t.mu.links[to]
	t.mu.Unlock()
	if l == nil {
		return bulkOf(b.Msgs)
	}
	return l.queue(b)
}

// SendApp queues payload, a message of the layer above, on the link to
// `to`, after the control traffic queued and before the bulk traffic; the
// peer's AppHandler receives it whole, in order with the others. The link
// keeps payload. It fails with ErrNoLink, ErrLaneFull (more than
// TCPOptions.BulkBytes waiting) or ErrTooLarge (over a frame).
func (t *TCP) SendApp(to uint64, payload []byte) error {
	if len(payload) >= MaxFrameBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(payload), MaxFrameBytes-1)
	}
	t.mu.Lock()
	l := t.mu.links[to]
	t.mu.Unlock()
	if l == nil {
		return fmt.Errorf("%w %d", ErrNoLink, to)
	}
	l.mu.Lock()
	if waiting := l.mu.appBytes; waiting > 0 && waiting+len(payload) > l.t.opts.BulkBytes {
		l.mu.Unlock()
		return fmt.Errorf("%w: %d bytes waiting for %d", ErrLaneFull, waiting, to)
	}
	l.mu.app = append(l.mu.app, payload)
	l.mu.appBytes += len(payload)
	l.mu.Unlock()
	l.signal()
	return nil
}

func bulkOf(es []Envelope) []Envelope {
	var out []Envelope
	for _, e := range es {
		if e.Bulk {
			out = append(out, e)
		}
	}
	return out
}

// remove forgets l if it is still the link to its peer, and tells the
// handler the link is down.
func (t *TCP) remove(l *link) {
	t.mu.Lock()
	current := t.mu.links[l.peer] == l
	if current {
		delete(t.mu.links, l.peer)
	}
	h, closed := t.mu.h, t.mu.closed
	t.mu.Unlock()
	if current && !closed && h != nil {
		h.LinkDown(l.peer)
	}
}

// LinkStats are one link's counters.
type LinkStats struct {
	Peer        uint64
	FramesOut   uint64
	FramesIn    uint64
	BytesOut    uint64
	BeatsOut    uint64
	MsgsOut     uint64
	AppOut      uint64 // messages of the layer above (SendApp)
	BulkDropped uint64
	LastRecv    time.Time // when the link last read a frame
}

// Stats returns the counters of every live link.
func (t *TCP) Stats() []LinkStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]LinkStats, 0, len(t.mu.links))
	for _, l := range t.mu.links {
		out = append(out, LinkStats{
			Peer: l.peer, FramesOut: l.stats.framesOut.Load(), FramesIn: l.stats.framesIn.Load(),
			BytesOut: l.stats.bytesOut.Load(), BeatsOut: l.stats.beatsOut.Load(),
			MsgsOut: l.stats.msgsOut.Load(), AppOut: l.stats.appOut.Load(), BulkDropped: l.stats.bulkDropped.Load(),
			LastRecv: time.Unix(0, l.lastRecv.Load()),
		})
	}
	return out
}

// Close closes every link, without reporting them down, and waits for
// their goroutines.
func (t *TCP) Close() error {
	t.mu.Lock()
	t.mu.closed = true
	ls := t.mu.links
	t.mu.links = map[uint64]*link{}
	t.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
	t.wg.Wait()
	return nil
}

// link is the connection to one peer.
type link struct {
	t    *TCP
	peer uint64
	c    net.Conn
	// vw writes pieces with one writev, if c can (BuffersWriter); the
	// frames' large parts are then written in place.
	vw   func(*net.Buffers) (int64, error)
	wake chan struct{}
	done chan struct{}
	once sync.Once

	lastRecv atomic.Int64 // unix nanoseconds
	mu       struct {
		sync.Mutex
		ctl       []Envelope
		beats     []Beat
		bulk      []Envelope
		bulkBytes int
		app       [][]byte
		appBytes  int
		pongs     int
	}
	stats struct {
		framesOut, framesIn, bytesOut, beatsOut, msgsOut, appOut, bulkDropped atomic.Uint64
	}
}

func newLink(t *TCP, peer uint64, c net.Conn) *link {
	l := &link{t: t, peer: peer, c: c, wake: make(chan struct{}, 1), done: make(chan struct{})}
	switch c := c.(type) {
	case *net.TCPConn:
		l.vw = func(v *net.Buffers) (int64, error) { return v.WriteTo(c) }
	case BuffersWriter:
		l.vw = c.WriteBuffers
	}
	l.lastRecv.Store(time.Now().UnixNano())
	return l
}

// BuffersWriter is a connection that writes pieces with one system call,
// as a *net.TCPConn does with net.Buffers (writev). A link whose
// connection is a *net.TCPConn or a BuffersWriter writes a MsgApp's large
// entries from where raft keeps them; over any other connection they are
// copied into the frames first. A wrapper of a TCP connection implements
// it to keep the first kind.
type BuffersWriter interface {
	WriteBuffers(v *net.Buffers) (int64, error)
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.c.Close()
	})
}

// fail closes the link for good and reports it down.
func (l *link) fail() {
	l.close()
	l.t.remove(l)
}

func (l *link) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// queue puts b in the lanes and returns the bulk messages that did not
// fit.
func (l *link) queue(b Batch) []Envelope {
	var dropped []Envelope
	l.mu.Lock()
	l.mu.beats = append(l.mu.beats, b.Beats...)
	for _, e := range b.Msgs {
		switch {
		case !e.Bulk:
			l.mu.ctl = append(l.mu.ctl, e)
		case l.mu.bulkBytes+e.Len() > l.t.opts.BulkBytes:
			dropped = append(dropped, e)
		default:
			l.mu.bulk = append(l.mu.bulk, e)
			l.mu.bulkBytes += e.Len()
		}
	}
	l.mu.Unlock()
	l.stats.bulkDropped.Add(uint64(len(dropped)))
	l.signal()
	return dropped
}

// writeLoop writes what is queued, control first, and pings.
func (l *link) writeLoop() {
	defer l.t.wg.Done()
	ping := time.NewTicker(l.t.opts.PingInterval)
	defer ping.Stop()
	f := &frameBuf{vectored: l.vw != nil}
	for {
		pings := 0
		select {
		case <-l.wake:
		case <-ping.C:
			stale := time.Duration(l.t.opts.PingMisses) * l.t.opts.PingInterval
			if time.Since(time.Unix(0, l.lastRecv.Load())) > stale {
				l.fail()
				return
			}
			pings = 1
		case <-l.done:
			return
		}
		for {
			f.reset(4 * l.t.opts.FrameBytes) // one burst does not pin a large buffer
			more := l.encode(f, pings)
			pings = 0
			n := f.size()
			if n == 0 {
				break
			}
			_ = l.c.SetWriteDeadline(time.Now().Add(l.t.opts.WriteTimeout))
			var err error
			if l.vw != nil {
				vec := f.buffers()
				_, err = l.vw(&vec)
			} else {
				_, err = l.c.Write(f.buf)
			}
			if err != nil {
				l.fail()
				return
			}
			l.stats.bytesOut.Add(uint64(n))
			if !more {
				break
			}
		}
	}
}

// encode builds in f the frames for what is queued: pings and pongs, one
// beats frame, the control messages, the messages of the layer above,
// then at most about FrameBytes of bulk messages. It reports whether bulk
// messages remain.
func (l *link) encode(f *frameBuf, pings int) bool {
	l.mu.Lock()
	ctl, beats, pongs, app := l.mu.ctl, l.mu.beats, l.mu.pongs, l.mu.app
	l.mu.ctl, l.mu.beats, l.mu.pongs, l.mu.app, l.mu.appBytes = nil, nil, 0, nil, 0
	n, size := 0, 0
	for n < len(l.mu.bulk) && (n == 0 || size+l.mu.bulk[n].Len() <= l.t.opts.FrameBytes) {
		size += l.mu.bulk[n].Len()
		n++
	}
	bulk := l.mu.bulk[:n:n]
	l.mu.bulk = l.mu.bulk[n:]
	l.mu.bulkBytes -= size
	more := len(l.mu.bulk) > 0
	l.mu.Unlock()

	frames := 0
	for range pings {
		f.frame(framePing, nil)
		frames++
	}
	for range pongs {
		f.frame(framePong, nil)
		frames++
	}
	if len(beats) > 0 {
		f.begin(frameBeats)
		for i := range beats {
			f.buf = appendBeat(f.buf, &beats[i])
		}
		f.finish()
		frames++
		l.stats.beatsOut.Add(uint64(len(beats)))
	}
	frames += l.appendMsgs(f, ctl)
	for _, p := range app {
		f.frame(frameApp, p)
		frames++
	}
	l.stats.appOut.Add(uint64(len(app)))
	frames += l.appendMsgs(f, bulk)
	l.stats.framesOut.Add(uint64(frames))
	return more
}

// appendMsgs appends es as msgs frames of about FrameBytes each, and
// returns how many.
func (l *link) appendMsgs(f *frameBuf, es []Envelope) int {
	frames := 0
	for len(es) > 0 {
		f.begin(frameMsgs)
		size := 0
		for len(es) > 0 && (size == 0 || size+es[0].Len() <= l.t.opts.FrameBytes) {
			f.msg(&es[0])
			size += es[0].Len()
			es = es[1:]
			l.stats.msgsOut.Add(1)
		}
		f.finish()
		frames++
	}
	return frames
}

// readLoop reads frames and hands them to h, until the connection fails
// or carries something that is not a frame.
func (l *link) readLoop(h Handler) {
	defer l.t.wg.Done()
	defer l.fail()
	r := bufio.NewReaderSize(l.c, 64<<10)
	var buf []byte
	var envs []Envelope
	var beats []Beat
	for {
		kind, payload, b, own, err := readFrame(r, buf)
		buf = b
		if err != nil {
			return
		}
		l.lastRecv.Store(time.Now().UnixNano())
		l.stats.framesIn.Add(1)
		switch kind {
		case frameMsgs:
			var alias *frameAlias
			if own != nil {
				alias = aliasFor(payload)
			}
			if envs, err = decodeMsgs(payload, envs[:0], alias); err != nil {
				return
			}
			h.Receive(l.peer, Batch{Msgs: envs})
			clear(envs)
			if alias != nil && !alias.aliased {
				bufpool.Put(own) // Receive kept nothing of it
			}
		case frameBeats:
			if beats, err = decodeBeats(payload, beats[:0]); err != nil {
				return
			}
			h.Receive(l.peer, Batch{Beats: beats})
		case frameApp:
			if ah, ok := h.(AppHandler); ok {
				ah.ReceiveApp(l.peer, payload)
			}
		case framePing:
			l.mu.Lock()
			l.mu.pongs++
			l.mu.Unlock()
			l.signal()
		case framePong:
		}
		if cap(buf) > 4<<20 {
			buf = nil
		}
	}
}
