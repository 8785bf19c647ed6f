package server

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
	"github.com/skiffmq/skiff/internal/proto"
)

// outbound is a client's queue of bytes to send. Any goroutine appends to
// it (publishers delivering messages, the client's own read loop answering
// PING); one writer goroutine per client (writeLoop) takes everything
// queued at once and writes it with one writev, so that a burst of small
// messages becomes one large write.
//
// The queue is a list of fixed-size chunks from a shared pool: an append
// fills the last chunk and starts a new one when it is full, so queued
// bytes are copied once, on the way in, and never moved again however
// long the queue grows; written chunks go back to the pool.
//
//	mu.bufs:  [ 64 KiB full ][ 64 KiB full ][ partly filled ]  <- appends
//	writer:   takes the whole list, writev, returns the chunks
//
// Its size is bounded: the bytes queued plus the bytes being written may
// not exceed MaxPending. An append that would pass the bound fails, and
// the caller cuts the client off as a slow consumer; nobody ever waits for
// a slow client, so a publisher is never blocked behind one.
type outbound struct {
	mu struct {
		sync.Mutex
		bufs     [][]byte // queued chunks, not yet taken by the writer
		queued   int      // bytes in bufs
		inflight int      // bytes the writer is writing now
		closing  bool     // no more appends; the writer writes what is queued, then closes
		outMsgs  int64    // messages queued for this client, ever
		outBytes int64    // payload bytes of those messages
		// stall is closed while the queue is past the mark: publishers
		// wait on it at the end of their reads (stall.go).
		stall chan struct{}
	}
	max     int
	kick    chan struct{} // capacity 1: wakes the writer; a send never blocks
	stalled atomic.Bool   // mu.stall is set: read without the lock
}

// chunkSize is the size of the queue's chunks: large enough that a writev
// covers a burst in a few iovecs, small enough that an idle client's last
// partial chunk costs little.
const chunkSize = 64 << 10

// The chunk pool keeps at most chunkPoolRetained bytes of free chunks and
// drops those unused for chunkPoolIdle: after a connection storm, the
// chunks of thousands of closed clients are given back to the garbage
// collector instead of waiting in a sync.Pool for its next two cycles.
// Once chunkReleaseMin bytes were dropped and no chunk for
// chunkReleaseQuiet, the runtime collects them and returns the free memory
// to the operating system, at most once every chunkReleaseEvery
// (bufpool.Releaser).
const (
	chunkPoolRetained = 16 << 20
	chunkPoolIdle     = 5 * time.Second
	chunkReleaseMin   = 32 << 20
	chunkReleaseQuiet = time.Second
	chunkReleaseEvery = 30 * time.Second
)

var (
	chunkRelease = &bufpool.Releaser{MinBytes: chunkReleaseMin, Quiet: chunkReleaseQuiet, Every: chunkReleaseEvery}
	chunks       = bufpool.NewFixed(chunkSize, chunkPoolRetained, chunkPoolIdle).WithReleaser(chunkRelease)
)

func getChunk() []byte { return chunks.Get() }

func putChunk(b []byte) { chunks.Put(b) }

func (o *outbound) init(max int) {
	o.max = max
	o.kick = make(chan struct{}, 1)
}

// wake signals the writer without blocking.
func (o *outbound) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// writeLocked copies p into the queue's chunks. Lock held.
func (o *outbound) writeLocked(p []byte) {
	o.mu.queued += len(p)
	for len(p) > 0 {
		n := len(o.mu.bufs)
		if n == 0 || len(o.mu.bufs[n-1]) == cap(o.mu.bufs[n-1]) {
			o.mu.bufs = append(o.mu.bufs, getChunk())
			n++
		}
		last := o.mu.bufs[n-1]
		k := min(len(p), cap(last)-len(last))
		o.mu.bufs[n-1] = append(last, p[:k]...)
		p = p[k:]
	}
}

// writeMsgLocked queues a MSG or HMSG. Lock held.
func (o *outbound) writeMsgLocked(subject, sid, reply []byte, hdr int, msg []byte) {
	var line [256]byte
	o.writeLocked(proto.AppendMsgLine(line[:0], subject, sid, reply, hdr, len(msg)))
	o.writeLocked(msg)
	o.writeLocked(crlf)
	o.mu.outMsgs++
	o.mu.outBytes += int64(len(msg))
	o.gateLocked()
}

var crlf = []byte("\r\n")

// fitsLocked reports whether n more bytes stay within the bound. Lock held.
func (o *outbound) fitsLocked(n int) bool { return o.mu.queued+o.mu.inflight+n <= o.max }

// queueMsg appends a MSG or HMSG. It returns false if that would pass the
// bound (the caller cuts the client off) and true, without queueing, if
// the client is closing.
func (o *outbound) queueMsg(subject, sid, reply []byte, hdr int, msg []byte) bool {
	n := proto.MsgSize(subject, sid, reply, hdr, msg)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.closing {
		return true
	}
	if !o.fitsLocked(n) {
		return false
	}
	o.writeMsgLocked(subject, sid, reply, hdr, msg)
	return true
}

// queueResult says what queueSubMsg did.
type queueResult uint8

const (
	queued     queueResult = iota
	queuedLast             // queued, and the subscription reached its maximum
	notQueued              // the subscription had reached its maximum, or the client is closing
	queueFull              // it would pass MaxPending: a slow consumer
)

// queueSubMsg is queueMsg for a delivery to sub, whose count and maximum
// it checks and updates under the same lock.
func (o *outbound) queueSubMsg(sub *subscription, subject, reply []byte, hdr int, msg []byte) queueResult {
	n := proto.MsgSize(subject, sub.sid, reply, hdr, msg)
	o.mu.Lock()
	defer o.mu.Unlock()
	max := sub.max.Load()
	if o.mu.closing || (max > 0 && sub.delivered >= max) {
		return notQueued
	}
	if !o.fitsLocked(n) {
		return queueFull
	}
	o.writeMsgLocked(subject, sub.sid, reply, hdr, msg)
	sub.delivered++
	if max > 0 && sub.delivered == max {
		return queuedLast
	}
	return queued
}

// setMax arms an auto-unsubscribe after max deliveries in all. It reports
// false if sub has already had that many, in which case it must go now.
func (o *outbound) setMax(sub *subscription, max int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if sub.delivered >= max {
		return false
	}
	sub.max.Store(max)
	return true
}

// delivered returns how many messages were queued for sub.
func (o *outbound) delivered(sub *subscription) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return sub.delivered
}

// queue appends protocol bytes (INFO, PONG, +OK, -ERR). Like queueMsg it
// returns false past the bound.
func (o *outbound) queue(b []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.closing {
		return true
	}
	if !o.fitsLocked(len(b)) {
		return false
	}
	o.writeLocked(b)
	return true
}

// take removes everything queued and returns it as one slice (for the TLS
// upgrade, which writes INFO itself).
func (o *outbound) take() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []byte
	for _, b := range o.mu.bufs {
		out = append(out, b...)
		putChunk(b)
	}
	o.mu.bufs, o.mu.queued = nil, 0
	return out
}

// pending returns the bytes queued and being written.
func (o *outbound) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.queued + o.mu.inflight
}

// counts returns the messages and payload bytes queued for the client.
func (o *outbound) counts() (msgs, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.outMsgs, o.mu.outBytes
}

// startClosing stops appends. With flush, what is queued is still written;
// without, it is dropped.
func (o *outbound) startClosing(flush bool) {
	o.mu.Lock()
	o.mu.closing = true
	o.openGateLocked() // nobody waits for a client that is going
	if !flush {
		for _, b := range o.mu.bufs {
			putChunk(b)
		}
		o.mu.bufs, o.mu.queued = nil, 0
	}
	o.mu.Unlock()
	o.wake()
}

// batchChunks is the most chunks one write takes: a sixteenth of the bound
// (4 MiB by default), at least one chunk.
func (o *outbound) batchChunks() int { return max(1, o.max/16/chunkSize) }

// writeLoop is the client's writer goroutine. It exits when the client is
// closing and everything queued has been written, or on a write error.
func (c *client) writeLoop() {
	defer c.srv.wg.Done()
	defer close(c.writeDone)
	o := &c.out
	var spare [][]byte  // the previous list, reused for the next
	var iov net.Buffers // WriteTo consumes and trims its slices: give it copies
	for range o.kick {
		for {
			o.mu.Lock()
			bufs, n, closing := o.mu.bufs, o.mu.queued, o.mu.closing
			if k := o.batchChunks(); len(bufs) > k {
				// A long queue is written a bounded batch at a time, so
				// that what is pending falls as the client reads and the
				// gate opens then, not only once the whole queue is
				// written (stall.go).
				o.mu.bufs = append(spare[:0], bufs[k:]...)
				clear(bufs[k:])
				bufs, n = bufs[:k], 0
				for _, b := range bufs {
					n += len(b)
				}
				o.mu.queued -= n
			} else {
				o.mu.bufs, o.mu.queued = spare[:0], 0
			}
			spare = nil
			o.mu.inflight = n
			o.mu.Unlock()
			if n == 0 {
				spare = bufs
				if closing {
					<-c.readDone // the reader stops first (close set its deadline)
					lingerClose(c.conn)
					return
				}
				break
			}
			_ = c.conn.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteDeadline))
			iov = append(iov[:0], bufs...)
			_, err := iov.WriteTo(c.conn)
			o.mu.Lock()
			o.mu.inflight = 0
			o.openGateLocked()
			o.mu.Unlock()
			for i, b := range bufs {
				putChunk(b)
				bufs[i] = nil
			}
			if err != nil {
				c.writeFailed(err)
				return
			}
			spare = bufs
		}
	}
}

// lingerTime bounds how long a closing connection waits for the client to
// close its side.
const lingerTime = time.Second

// lingerClose closes a connection without losing the last bytes sent: a
// socket closed while the client's bytes are still unread is reset, and a
// reset can destroy the -ERR the client has not read yet. So the write
// side is closed first, what the client still sends is read and dropped
// until it closes too (or lingerTime passes), and then the socket closes.
func lingerClose(conn net.Conn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := conn.(closeWriter); ok && cw.CloseWrite() == nil {
		_ = conn.SetReadDeadline(time.Now().Add(lingerTime))
		_, _ = io.Copy(io.Discard, io.LimitReader(conn, 1<<20))
	}
	_ = conn.Close()
}
