package server

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/skiffmq/skiff/internal/proto"
)

// outbound is a client's queue of bytes to send. Any goroutine appends to
// it (publishers delivering messages, the client's own read loop answering
// PING); one writer goroutine per client (writeLoop) takes everything
// queued at once and writes it in one call, so that a burst of small
// messages becomes one large write.
//
// Its size is bounded: the bytes queued plus the bytes being written may
// not exceed MaxPending. An append that would pass the bound fails, and
// the caller cuts the client off as a slow consumer; nobody ever waits for
// a slow client, so a publisher is never blocked behind one.
type outbound struct {
	mu struct {
		sync.Mutex
		buf      []byte // queued, not yet taken by the writer
		inflight int    // bytes the writer is writing now
		closing  bool   // no more appends; the writer writes what is queued, then closes
		outMsgs  int64  // messages queued for this client, ever
		outBytes int64  // payload bytes of those messages
	}
	max  int
	kick chan struct{} // capacity 1: wakes the writer; a send never blocks
}

// retainOut is the largest buffer the writer keeps between bursts; a
// bigger one, grown for a burst, is dropped so that idle clients hold
// little memory.
const retainOut = 1 << 20

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

// queueMsg appends a MSG or HMSG. It returns false if that would pass the
// bound (the caller cuts the client off) and true, without queueing, if
// the client is closing.
func (o *outbound) queueMsg(subject, sid, reply []byte, hdr int, msg []byte) bool {
	n := proto.MsgSize(subject, sid, reply, hdr, msg)
	o.mu.Lock()
	if o.mu.closing {
		o.mu.Unlock()
		return true
	}
	if len(o.mu.buf)+o.mu.inflight+n > o.max {
		o.mu.Unlock()
		return false
	}
	o.mu.buf = proto.AppendMsg(o.mu.buf, subject, sid, reply, hdr, msg)
	o.mu.outMsgs++
	o.mu.outBytes += int64(len(msg))
	o.mu.Unlock()
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
	if len(o.mu.buf)+o.mu.inflight+n > o.max {
		return queueFull
	}
	o.mu.buf = proto.AppendMsg(o.mu.buf, subject, sub.sid, reply, hdr, msg)
	o.mu.outMsgs++
	o.mu.outBytes += int64(len(msg))
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
	if len(o.mu.buf)+o.mu.inflight+len(b) > o.max {
		return false
	}
	o.mu.buf = append(o.mu.buf, b...)
	return true
}

// pending returns the bytes queued and being written.
func (o *outbound) pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.mu.buf) + o.mu.inflight
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
	if !flush {
		o.mu.buf = nil
	}
	o.mu.Unlock()
	o.wake()
}

// writeLoop is the client's writer goroutine. It exits when the client is
// closing and everything queued has been written, or on a write error.
func (c *client) writeLoop() {
	defer c.srv.wg.Done()
	defer close(c.writeDone)
	o := &c.out
	var spare []byte // the buffer last written, reused as the next queue
	for range o.kick {
		for {
			o.mu.Lock()
			buf, closing := o.mu.buf, o.mu.closing
			// Hand the spare to the queue and keep nothing of it here, so
			// that the queue and the buffer being written never share an
			// array.
			o.mu.buf, spare = spare[:0], nil
			o.mu.inflight = len(buf)
			o.mu.Unlock()
			if len(buf) == 0 {
				spare = buf
				if closing {
					<-c.readDone // the reader stops first (close set its deadline)
					lingerClose(c.conn)
					return
				}
				break
			}
			_ = c.conn.SetWriteDeadline(time.Now().Add(c.srv.opts.WriteDeadline))
			_, err := c.conn.Write(buf)
			o.mu.Lock()
			o.mu.inflight = 0
			o.mu.Unlock()
			if err != nil {
				c.writeFailed(err)
				return
			}
			if cap(buf) <= retainOut {
				spare = buf
			}
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
