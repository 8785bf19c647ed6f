package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/logthrottle"
	"github.com/skiffmq/skiff/subject"
)

// Stream is an append-only log of messages with limits, a per-subject index
// and, for file storage, crash recovery. All methods are safe for
// concurrent use: appends, deletes, purges and UpdateConfig serialise on a
// write lock (an Append holds it for one write system call and the index
// update, not for an fsync); reads share a read lock and run in parallel;
// WaitDurable fsyncs without holding either.
type Stream struct {
	be     backend
	fb     *fileBackend // nil for memory storage
	clock  func() time.Time
	log    *slog.Logger
	report RecoveryReport
	damage damage // records reads found corrupt (damage.go)
	// onCorrupt is Options.OnCorrupt, fixed at Open.
	onCorrupt func(seqs []uint64)
	// syncWarn throttles the error of background sync rounds, which a
	// full disk repeats every Durability.Interval.
	syncWarn logthrottle.Throttle

	// nextExpiry is when the first message expires by MaxAge as Append
	// and the reads apply it (Options.inlineAge), in Unix nanoseconds, or
	// math.MaxInt64 when nothing can. Readers load it without the lock to
	// decide whether to remove expired messages before reading.
	nextExpiry atomic.Int64
	// roundAt is when the background goroutine runs the next expiry
	// round, or math.MaxInt64; an Append with an earlier TTL wakes it.
	// Stored under mu (read lock at least), so that an Append, under the
	// write lock, sees the time that its entry was not counted in.
	roundAt atomic.Int64
	// syncAlways mirrors mu.opts.Durability.Sync == SyncAlways for file
	// storage, so that Durable, asked once per message a consumer reads,
	// takes no lock.
	syncAlways atomic.Bool
	// logNow is the log's time under Options.LogClock (logclock.go),
	// stored under the write lock once what expired by it is removed.
	logNow atomic.Int64

	mu struct {
		sync.RWMutex
		opts   Options
		closed bool
		// ents.at(i) is sequence first+i, for first <= seq <= last
		// (entLocked); the entry of first is live whenever the stream is
		// not empty.
		ents     blockList[entry]
		first    uint64 // last+1 when empty
		last     uint64
		lastTS   int64
		msgs     uint64
		bytes    uint64
		subjects map[string]*subjectState
		wbuf     []byte   // encoding buffer of Append
		ttl      ttlState // TTLs and exemptions from MaxAge (expiry.go)
	}
	fc filterCache
	gc groupCommit

	// Fixed at Open (Options).
	onExpire   func(Expired)
	appendLock sync.Locker

	closeOnce sync.Once
	closeErr  error
	stop      chan struct{} // closed by Close to stop the background goroutine
	kick      chan struct{} // wakes it to re-read the expiry time and interval
	done      chan struct{} // closed when it has stopped
}

// Open opens a stream. For FileStorage it creates opts.Dir if needed and
// recovers what is there (see "Recovery" in the package documentation),
// then applies the limits of opts to what it recovered. Open starts one
// background goroutine, which Close stops.
func Open(opts Options) (*Stream, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s := &Stream{
		clock:     opts.Now,
		log:       opts.Logger,
		onCorrupt: opts.OnCorrupt,
		stop:      make(chan struct{}),
		kick:      make(chan struct{}, 1),
		done:      make(chan struct{}),
	}
	s.mu.opts = opts
	s.mu.ttl.started = !opts.HoldExpiry && !opts.LogClock
	if opts.LogClock {
		s.clock = s.logClock
	}
	s.onExpire, s.appendLock = opts.OnExpire, opts.AppendLock
	s.roundAt.Store(math.MaxInt64)
	s.syncAlways.Store(opts.Storage == FileStorage && opts.Durability.Sync == SyncAlways)
	s.mu.first = 1
	s.mu.subjects = make(map[string]*subjectState)
	if opts.Storage == MemoryStorage {
		s.be = &memBackend{}
	} else {
		fb, rec, err := openFileBackend(&s.mu.opts, &s.report)
		if err != nil {
			return nil, err
		}
		s.fb, s.be = fb, fb
		s.load(fb, rec)
		if opts.Staging && !rec.staging {
			if err := fb.markStaging(s.mu.last); err != nil {
				_ = fb.close()
				return nil, err
			}
		}
	}
	var bad []uint64
	s.mu.Lock()
	s.logNow.Store(s.mu.lastTS) // the log's time: its last message's
	if opts.ttls() {
		s.rebuildTTLsLocked(&bad) // before MaxAge: it spares TTLNever
	}
	s.enforceAllLocked(s.clock().UnixNano())
	s.updateExpiryLocked()
	s.gc.durable.Store(s.mu.last)
	s.mu.Unlock()
	s.removeCorrupt(bad)
	go s.loop()
	return s, nil
}

// Recovery reports what Open found on disk. It is empty for memory storage.
func (s *Stream) Recovery() RecoveryReport { return s.report }

// Append stores a message and returns its sequence and timestamp. The
// subject must be a valid literal subject. The timestamp is the clock's
// time, raised if need be to the previous message's so that timestamps
// never decrease (SeqAtOrAfterTime relies on it).
//
// ttl, if not 0, is the message's time to live (AllowMsgTTL or markers,
// else ErrInvalidConfig): an expiry round removes it that long after its
// timestamp, whatever the limits say, unless MaxAge removes it first;
// TTLNever exempts it from MaxAge. The TTL must be what the message's
// TTLHeader header says: Append takes it as given, and Open reads it back
// from the header (see "Expiry" in the package documentation).
//
// Limits are enforced first: a message larger than MaxMsgSize, or alone
// larger than MaxBytes, is refused; under DiscardNew a message that breaks
// MaxMsgs, MaxBytes or MaxMsgsPerSubject is refused with ErrMaxMsgs,
// ErrMaxBytes or ErrMaxMsgsPerSubject (wrapped; nothing stored); under
// DiscardOld the oldest messages (the subject's oldest, for
// MaxMsgsPerSubject) are removed to make room.
//
// File storage writes the record to the operating system before Append
// returns but does not fsync; call WaitDurable before acknowledging. If the
// write fails (ErrWrite, wrapping the OS error, such as ENOSPC), nothing of
// the message remains, its sequence is not used, and the next Append tries
// again.
func (s *Stream) Append(subj string, hdr, data []byte, ttl time.Duration) (seq uint64, ts int64, err error) {
	if len(subj) > maxSubjectLen {
		return 0, 0, fmt.Errorf("%w: %d bytes", ErrInvalidSubject, len(subj))
	}
	// Tokens that look like wildcards are literal here: a client may
	// publish on a.* (nats-server delivers and stores it).
	if err := subject.ValidateSubject(subj); err != nil {
		return 0, 0, fmt.Errorf("%w: %w", ErrInvalidSubject, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, 0, ErrClosed
	}
	if ttl != 0 && (!s.mu.opts.ttls() || (ttl < 0 && ttl != TTLNever)) {
		return 0, 0, fmt.Errorf("%w: TTL %v (AllowMsgTTL %v)", ErrInvalidConfig, ttl, s.mu.opts.AllowMsgTTL)
	}
	return s.appendLocked(subj, hdr, data, ttl)
}

// appendLocked is Append's work once the subject and TTL are checked: the
// next sequence, at the clock's time.
func (s *Stream) appendLocked(subj string, hdr, data []byte, ttl time.Duration) (seq uint64, ts int64, err error) {
	now := s.clock().UnixNano()
	seq, ts = s.mu.last+1, max(now, s.mu.lastTS)
	if err := s.appendAtLocked(seq, ts, now, subj, hdr, data, ttl); err != nil {
		return 0, 0, err
	}
	return seq, ts, nil
}

// appendAtLocked appends a message at seq (the last sequence + 1) and ts
// (not below the last timestamp), with now as the time limits expire
// from. A staged tail (stage.go) is cut first: the message takes the
// sequence its first record was staged at.
func (s *Stream) appendAtLocked(seq uint64, ts, now int64, subj string, hdr, data []byte, ttl time.Duration) error {
	if err := s.unstageLocked(seq); err != nil {
		return err
	}
	size := recordSize(subj, hdr, data)
	ss, err := s.admitAtLocked(now, subj, size)
	if err != nil {
		return err
	}
	var name string
	if ss != nil {
		name = ss.name
	} else {
		name = strings.Clone(subj) // the caller's string may pin a larger buffer
	}
	off, _, err := s.writeRecordLocked(seq, ts, name, hdr, data, false)
	if err != nil {
		return err
	}
	s.indexLocked(seq, ts, ss, name, size, off, ttl)
	return nil
}

// admitAtLocked checks a message whose record is size bytes on subj
// against the size limit, then removes what expired by now, then checks
// it against the limits. It returns the subject's state, nil if new.
func (s *Stream) admitAtLocked(now int64, subj string, size int) (*subjectState, error) {
	if n := size - recHeaderSize; n > s.mu.opts.msgSizeLimit() {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMaxMsgSize, n, s.mu.opts.msgSizeLimit())
	}
	s.expireLocked(now)
	ss := s.mu.subjects[subj]
	if err := s.admitLocked(ss, size); err != nil {
		return nil, err
	}
	return ss, nil
}

// writeRecordLocked encodes the record of a message and has the backend
// write it, or stage it (stage.go), returning its offset and checksum.
//
// A large payload is written from the caller's buffer, after the
// record's head, rather than copied behind it. A small one is copied
// behind it, for one write system call, only where the record goes
// straight to its file: a write buffer (Options.WriteBuffer) or a memory
// stream copies head and payload once anyway.
func (s *Stream) writeRecordLocked(seq uint64, ts int64, name string, hdr, data []byte, stage bool) (off, crc uint32, err error) {
	s.mu.wbuf = appendRecordHead(s.mu.wbuf[:0], seq, ts, name, hdr, data)
	body := data
	if len(data) <= inlineDataMax && s.fb != nil && s.mu.opts.WriteBuffer == 0 {
		s.mu.wbuf, body = append(s.mu.wbuf, data...), nil
	}
	crc = binary.LittleEndian.Uint32(s.mu.wbuf[4:])
	if stage {
		off, err = s.fb.stage(seq, ts, name, s.mu.wbuf, body)
	} else {
		off, err = s.be.write(seq, ts, name, s.mu.wbuf, body)
	}
	if cap(s.mu.wbuf) > 1<<20 {
		s.mu.wbuf = nil
	}
	return off, crc, err
}

// indexLocked indexes the message at seq, whose record of size bytes is
// written at off, and applies the limits it may break: the last step of
// an append, and the whole of a commit (stage.go). ss is the subject's
// state, nil if new; name is the subject, interned.
func (s *Stream) indexLocked(seq uint64, ts int64, ss *subjectState, name string, size int, off uint32, ttl time.Duration) {
	if ss == nil {
		ss = &subjectState{name: name}
		s.mu.subjects[name] = ss
		s.fc.subjectAdded(ss)
	}
	s.mu.ents.append(entry{subj: ss, ts: ts, size: uint32(size), off: off})
	ss.seqs = append(ss.seqs, seq)
	ss.n++
	s.mu.msgs++
	s.mu.bytes += uint64(size)
	s.mu.last, s.mu.lastTS = seq, ts
	if ttl != 0 {
		s.scheduleLocked(seq, ts, ttl)
	}
	if s.nextExpiry.Load() == math.MaxInt64 && s.mu.opts.inlineAge() > 0 {
		s.updateExpiryLocked() // the first message MaxAge may expire
	}
	s.enforceSubjectLocked(ss)
	s.enforceTotalsLocked()
}

// admitLocked refuses a message of size bytes on subject ss (nil if new)
// that breaks a limit it may not make room for.
func (s *Stream) admitLocked(ss *subjectState, size int) error {
	if ss == nil {
		return s.mu.opts.admit(s.mu.msgs, s.mu.bytes, 0, "", size)
	}
	return s.mu.opts.admit(s.mu.msgs, s.mu.bytes, ss.n, ss.name, size)
}

// admit refuses a message of size bytes on subject subj, which holds n
// messages, in a stream of msgs messages and bytes bytes, that breaks a
// limit it may not make room for.
func (o *Options) admit(msgs, bytes uint64, n int, subj string, size int) error {
	if o.MaxBytes > 0 && int64(size) > o.MaxBytes {
		return fmt.Errorf("%w: message of %d bytes, limit %d", ErrMaxBytes, size, o.MaxBytes)
	}
	if o.Discard != DiscardNew {
		return nil
	}
	switch {
	case o.MaxMsgs > 0 && int64(msgs) >= o.MaxMsgs:
		return fmt.Errorf("%w: limit %d", ErrMaxMsgs, o.MaxMsgs)
	case o.MaxBytes > 0 && int64(bytes)+int64(size) > o.MaxBytes:
		return fmt.Errorf("%w: %d stored + %d, limit %d", ErrMaxBytes, bytes, size, o.MaxBytes)
	case o.DiscardNewPerSubject && o.MaxMsgsPerSubject > 0 && int64(n) >= o.MaxMsgsPerSubject:
		return fmt.Errorf("%w: subject %q, limit %d", ErrMaxMsgsPerSubject, subj, o.MaxMsgsPerSubject)
	}
	return nil
}

// Durable returns the highest sequence that may be read as stored for
// good: under SyncAlways, the last one an fsync covered; under the other
// policies, and for memory storage, every sequence (math.MaxUint64). A
// reader that must never hand out a message a machine crash could take
// back (a consumer, which would record it as delivered) reads no further.
func (s *Stream) Durable() uint64 {
	if !s.syncAlways.Load() {
		return math.MaxUint64
	}
	return s.gc.durable.Load()
}

// WaitDurable blocks until every message up to seq is as durable as the
// sync policy promises, and is meant to be called once per batch of
// appends before acknowledging them. Under SyncAlways it makes sure an
// fsync covering seq has completed; concurrent callers share one fsync
// (group commit). Under SyncInterval and SyncNever, and for memory
// storage, it returns at once. Under every policy it returns the error of
// a failed fsync that covered seq (wrapping ErrSync): those messages may be
// lost in an operating system crash and must not be acknowledged.
func (s *Stream) WaitDurable(seq uint64) error { return s.syncTo(seq, false) }

// Sync makes every message up to seq durable now, whatever the sync
// policy but SyncNever (which never fsyncs): for a caller whose next write
// must not outlive what came before it on disk, such as a rollup's purge
// of the messages it replaces. Memory storage returns at once.
func (s *Stream) Sync(seq uint64) error { return s.syncTo(seq, true) }

// SyncNow runs a sync round whatever is already durable, and returns its
// error: everything written to the files (while writes are held, what
// they held when the hold began) is fsynced, removals included, which
// Sync skips when no newer message asks for a round. Under SyncNever it
// fsyncs nothing.
func (s *Stream) SyncNow() error {
	if s.fb == nil {
		return nil
	}
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	return s.gc.runLocked(func() (uint64, error) { return s.syncRound(false) })
}

// Flush writes the appends buffered under Options.WriteBuffer to the
// stream's file (not fsynced: a sync round does that), so that a process
// crash keeps them. Without a write buffer it does nothing.
func (s *Stream) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	return s.be.flush()
}

// syncTo fsyncs up to seq, sharing the round with concurrent callers:
// under SyncAlways, and with interval too under SyncInterval. Otherwise
// it only reports a failed fsync that covered seq.
func (s *Stream) syncTo(seq uint64, interval bool) error {
	s.mu.RLock()
	closed, policy := s.mu.closed, s.mu.opts.Durability.Sync
	s.mu.RUnlock()
	switch {
	case closed:
		return ErrClosed
	case s.fb == nil:
		return nil
	case policy == SyncNever || (policy == SyncInterval && !interval):
		return s.gc.failedErr(seq)
	}
	return s.gc.wait(seq, func() (uint64, error) { return s.syncRound(false) })
}

// syncRound runs one sync round (see filesync.go) and returns the last
// sequence it covers. The caller holds gc.mu.
func (s *Stream) syncRound(final bool) (uint64, error) {
	s.mu.Lock()
	if s.mu.closed && !final {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	target := s.be.writtenThrough(s.mu.last)
	plan := s.be.prepareSync(s.mu.opts.Durability.Sync != SyncNever)
	s.mu.Unlock()
	err := plan.run()
	s.mu.Lock()
	s.be.finishSync(plan, err)
	s.mu.Unlock()
	return target, err
}

// UpdateConfig changes the limits, discard policy, sync policy, TTL and
// marker settings and segment settings of a live stream and enforces the
// new limits at once, removing the oldest messages as needed whatever the
// discard policy (which governs only new messages). Storage and Dir cannot
// change (ErrInvalidConfig); FS, Now, Logger, OnExpire, OnCorrupt,
// AppendLock, HoldExpiry, LogClock, Staging and CommitThrough are fixed at
// Open and ignored here.
func (s *Stream) UpdateConfig(opts Options) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	cur := &s.mu.opts
	if opts.Storage != cur.Storage || (cur.Storage == FileStorage && opts.Dir != cur.Dir) {
		return fmt.Errorf("%w: Storage and Dir cannot change", ErrInvalidConfig)
	}
	opts.FS, opts.Now, opts.Logger = cur.FS, cur.Now, cur.Logger
	opts.OnExpire, opts.AppendLock, opts.HoldExpiry, opts.OnCorrupt = cur.OnExpire, cur.AppendLock, cur.HoldExpiry, cur.OnCorrupt
	opts.LogClock = cur.LogClock // the stream's clock (s.clock) is chosen at Open
	opts.Staging, opts.CommitThrough = cur.Staging, cur.CommitThrough
	opts.fill()
	if err := opts.validate(); err != nil {
		return err
	}
	retime := opts.ttlFloor() != cur.ttlFloor()
	*cur = opts
	if retime {
		s.retimeLocked()
	}
	s.syncAlways.Store(opts.Storage == FileStorage && opts.Durability.Sync == SyncAlways)
	s.enforceAllLocked(s.clock().UnixNano())
	s.updateExpiryLocked()
	s.wake()
	return nil
}

// Options returns the stream's options, with defaults filled in; change
// the limits of a copy and pass it to UpdateConfig.
func (s *Stream) Options() Options {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.opts
}

// Close flushes and, unless SyncNever, fsyncs what was written, and
// releases the stream's files. Every later call returns ErrClosed, except
// Close, which returns the first Close's result.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		s.gc.mu.Lock()
		defer s.gc.mu.Unlock()
		var err error
		if s.fb != nil {
			_, err = s.syncRound(true)
		}
		s.mu.Lock()
		s.closeErr = errors.Join(err, s.be.close())
		s.mu.Unlock()
	})
	return s.closeErr
}

// Destroy closes the stream and removes its directory and files.
func (s *Stream) Destroy() error {
	err := s.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(err, s.be.destroy())
}

// wake asks the background goroutine to re-read the expiry time and the
// sync interval.
func (s *Stream) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// updateExpiryLocked recomputes nextExpiry after the first message, the
// MaxAge walk's position or MaxAge changed.
func (s *Stream) updateExpiryLocked() {
	next := int64(math.MaxInt64)
	if age := s.mu.opts.inlineAge(); age > 0 {
		if seq := s.ageStartLocked(); seq <= s.mu.last {
			next = s.entLocked(seq).ts + age
		}
	}
	if old := s.nextExpiry.Swap(next); next < old {
		s.wake()
	}
}

// expireIfDue removes expired messages if the first one is due, and
// returns the clock's time (0 if nothing can expire, so no reading of the
// clock was needed).
func (s *Stream) expireIfDue() int64 {
	next := s.nextExpiry.Load()
	if next == math.MaxInt64 {
		return 0
	}
	now := s.clock().UnixNano()
	if now >= next {
		s.mu.Lock()
		if !s.mu.closed {
			s.expireLocked(now)
		}
		s.mu.Unlock()
	}
	return now
}

// loop is the background goroutine: it runs a sync round every
// Durability.Interval (file storage), removes messages as MaxAge expires
// them, and runs the expiry rounds of TTLs and markers (expiry.go).
func (s *Stream) loop() {
	defer close(s.done)
	var tick <-chan time.Time
	var ticker *time.Ticker
	var interval time.Duration
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.RLock()
		iv := s.mu.opts.Durability.Interval
		round := s.nextRoundLocked()
		s.roundAt.Store(round)
		s.mu.RUnlock()
		if s.fb != nil && iv != interval {
			if ticker != nil {
				ticker.Stop()
			}
			ticker, interval = time.NewTicker(iv), iv
			tick = ticker.C
		}
		wait := time.Hour
		if next := min(s.nextExpiry.Load(), round); next != math.MaxInt64 {
			wait = min(max(time.Duration(next-s.clock().UnixNano()), time.Millisecond), time.Hour)
		}
		timer.Reset(wait)
		select {
		case <-s.stop:
			if ticker != nil {
				ticker.Stop()
			}
			return
		case <-tick:
			s.backgroundSync()
		case <-timer.C:
			s.expireIfDue()
			if round != math.MaxInt64 && s.clock().UnixNano() >= round {
				s.expireRound()
			}
		case <-s.kick:
		}
	}
}

// backgroundSync runs a sync round from the background goroutine.
func (s *Stream) backgroundSync() {
	s.gc.mu.Lock()
	err := s.gc.runLocked(func() (uint64, error) { return s.syncRound(false) })
	s.gc.mu.Unlock()
	if err != nil && !errors.Is(err, ErrClosed) {
		s.syncWarn.Log(s.log, slog.LevelError, "store: background sync", "err", err)
	}
}
