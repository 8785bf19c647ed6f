package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Scaling up a stream made with one replica (design 3.8). In a cluster, a
// stream of one replica has no raft group: its store is written by its
// server alone. Scaled up, the meta state places it on more servers and
// marks it as having a group (StreamAssignment.Raft); its server then
// turns it into a replicated stream in place:
//
//  1. it closes the stream (consumers and store flushed);
//  2. it writes its durable consumers, configuration and state, as a
//     replicated stream keeps them (consumersFile, with no op reflected:
//     index 0), then meta.json with the new configuration, Raft and
//     Founding, then drops the consumers' own directories;
//  3. it opens the stream again, replicated: with no log of the group and
//     Founding set, it founds the group as its only voter, over the store
//     and the consumers it holds; it leads at once, and the membership
//     rules (replica_members.go) add the other peers, which join empty.
//     Before the first is added, the leader snapshots the group and drops
//     its whole log: a new member takes a snapshot, then the messages
//     from a peer, never the log from its first entry, which does not
//     hold what the store held before the group.
//
// Founding is cleared at the replica's first checkpoint, when the group's
// first entries are on disk: a server that lost its raft directory after
// that joins the group again instead of founding another. A crash at any
// step leaves either the stream of one replica as it was (the meta state
// then still places it on more servers, and reconcile turns it again) or
// the replicated one. Ephemeral consumers end, as they do when a
// replicated stream's leader changes.
//
// A memory stream is turned the same way, but for what is in memory only:
// its store is stopped and kept open through the close (stream.shut), and
// the replicated stream's new store takes its messages, at their
// sequences, with their timestamps, before anything reads it
// (copyMessages); the old store is closed after. For as long as the copy
// takes, the stream's messages are held twice. Durable consumers that keep
// no state on disk (those of a memory stream, and any with mem_storage)
// give theirs as they stood when they stopped (consumer.snapshot). A
// memory stream keeps no checkpoint: Founding is cleared once its group's
// first snapshot is recorded (replica_snapshot.go), which is on disk in
// the group's log, and which comes before any other member is added. A
// crash before then loses the messages, as any crash of a memory stream
// does: the stream founds its group again, empty, its log dropped if it
// had one (its entries would follow messages no longer there). Publishes
// that reach the stream while it stops are refused (ingest checks
// closing; shut waits for the ones under way), not stored in the old
// store after the copy read it.

// convertWait is how long a server waits for the meta leader's update
// before it turns a stream scaled up from one replica by itself
// (reconcile).
const convertWait = 2 * time.Second

// convertToReplica turns st, a stream of one replica without a group,
// into a replicated stream with the configuration cfg, and returns it.
// On the stream's worker, ja.mu not held.
func (ja *jsAccount) convertToReplica(st *stream, cfg StreamConfig) (*stream, error) {
	var seed *store.Stream // a memory stream's messages, for the new store
	if st.config().Storage == MemoryStorage {
		seed = st.store
		defer func() { _ = seed.Close() }()
	}
	stopped, err := st.shut(false, seed != nil)
	if err != nil {
		return nil, fmt.Errorf("closing the stream: %w", err)
	}
	cons, err := st.durableConsumerStates()
	if err == nil {
		cons.Consumers = append(cons.Consumers, stoppedConsumerStates(stopped, cons)...)
	}
	if err == nil {
		var b []byte
		if b, err = json.Marshal(cons); err == nil {
			err = writeFileAtomic(filepath.Join(st.dir, consumersFile), b)
		}
	}
	meta := streamMeta{Config: cfg, Created: st.created, Group: st.group.Load(), Raft: true, Founding: true}
	if err == nil {
		err = writeMeta(filepath.Join(st.dir, metaFile), meta)
	}
	if err == nil {
		err = os.RemoveAll(filepath.Join(st.dir, "consumers"))
	}
	if err == nil {
		err = os.MkdirAll(filepath.Join(st.dir, "consumers"), 0o755)
	}
	var nst *stream
	if err == nil {
		nst, err = ja.openStream(meta, false, seed)
	}
	if err := ja.replaced(st, nst, cfg.Subjects, err); err != nil {
		// Closed, and not served until the next start, which opens what
		// the steps left on disk (reconcile then turns it again).
		return nil, err
	}
	ja.js.log.Info("stream turned replicated: its group is founded here", "account", ja.name, "stream", st.name,
		"messages", nst.store.State().Msgs, "consumers", len(cons.Consumers))
	return nst, nil
}

// replaced puts nst, the stream st closed and opened again, in st's
// place; or, given the error that stopped it, takes st (with its
// subjects) out of the account's streams and records it failed, and
// returns the error.
func (ja *jsAccount) replaced(st, nst *stream, subjects []string, err error) error {
	ja.mu.Lock()
	if err != nil {
		if ja.mu.streams[st.name] == st {
			delete(ja.mu.streams, st.name)
			ja.unindexSubjectsLocked(subjects)
		}
		ja.mu.Unlock()
		ja.failStream(st.name, err)
		return err
	}
	ja.mu.streams[st.name] = nst
	ja.mu.Unlock()
	return nil
}

// durableConsumerStates reads the durable consumers of a closed stream
// of one replica from their directories: configuration, creation, owner
// and progress.
func (st *stream) durableConsumerStates() (*consumersSnapshot, error) {
	dir := filepath.Join(st.dir, "consumers")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return &consumersSnapshot{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := &consumersSnapshot{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		meta, err := readMeta[consumerMeta](filepath.Join(dir, e.Name(), metaFile))
		if errors.Is(err, os.ErrNotExist) || (err == nil && meta.Config.Durable == "") {
			continue // never created, or ephemeral: it ends
		}
		if err != nil {
			return nil, fmt.Errorf("consumer %q: %w", e.Name(), err)
		}
		// (A consumer with mem_storage has no state on disk: it starts
		// again from its configuration.)
		cs, err := store.OpenConsumerStateOptions(store.ConsumerOptions{Dir: filepath.Join(dir, e.Name(), "state"), FS: st.js.opts.FS})
		if err != nil {
			return nil, fmt.Errorf("consumer %q: %w", e.Name(), err)
		}
		snap, err := cs.Load()
		if cerr := cs.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("consumer %q: %w", e.Name(), err)
		}
		out.Consumers = append(out.Consumers, consumerSnap{Name: e.Name(), Meta: meta, State: snap})
	}
	return out, nil
}

// stoppedConsumerStates returns the states of the durable consumers among
// stopped that keep none on disk, which have (those of a memory stream,
// and those with mem_storage), as they stood when they stopped; not those
// already in onDisk.
func stoppedConsumerStates(stopped []*consumer, onDisk *consumersSnapshot) []consumerSnap {
	var out []consumerSnap
	for _, c := range stopped {
		meta := c.meta()
		if meta.Config.Durable == "" || slices.ContainsFunc(onDisk.Consumers, func(s consumerSnap) bool { return s.Name == c.name }) {
			continue
		}
		out = append(out, consumerSnap{Name: c.name, Meta: meta, State: c.snapshot()})
	}
	return out
}

// takingOptions is so without the limits that would refuse a message
// copyMessages puts in (DiscardNew with max_msgs, max_bytes or
// max_msgs_per_subject lowered by the update that turns the stream): the
// store takes every message, then so's limits, which remove the oldest
// whatever the discard policy, as a file stream's update does.
func takingOptions(so store.Options) store.Options {
	so.MaxMsgs, so.MaxBytes, so.MaxMsgsPerSubject = 0, 0, 0
	so.Discard, so.DiscardNewPerSubject = store.DiscardOld, false
	return so
}

// groupCompacted reports whether a group's log on this server was ever
// compacted behind a snapshot (true if the log cannot say: it is not
// dropped then).
func (js *JetStream) groupCompacted(group uint64) bool {
	first, err := js.raft.GroupFirstIndex(group)
	return err != nil || first > 1
}

// copyMessages puts every message of src into dst, an empty store, at its
// sequence, with its timestamp and TTL, and leaves dst's last sequence
// and time at src's, gaps and all.
func copyMessages(dst, src *store.Stream) error {
	o := dst.Options()
	ttls := o.AllowMsgTTL || o.SubjectDeleteMarkerTTL > 0
	for seq := src.State().FirstSeq; ; {
		m, err := src.Next(seq, "")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if last := dst.State().LastSeq; m.Seq > last+1 {
			if err := dst.Skip(m.Seq-1, m.Timestamp); err != nil {
				return err
			}
		}
		var ttl time.Duration
		if ttls {
			ttl = store.HeaderTTL(m.Header)
		}
		if err := dst.AppendAt(m.Seq, m.Timestamp, m.Subject, m.Header, m.Data, ttl); err != nil {
			return fmt.Errorf("message %d: %w", m.Seq, err)
		}
		seq = m.Seq + 1
	}
	s := src.State()
	var ts int64
	if !s.LastTime.IsZero() {
		ts = s.LastTime.UnixNano()
	}
	return dst.Skip(s.LastSeq, ts)
}

// founded clears Founding once the replica's first checkpoint is written
// (a memory stream: its group's first snapshot): the group's first
// entries are on disk.
func (r *replica) founded() {
	st := r.st
	if !st.founding.Load() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	meta := streamMeta{Config: st.config(), Created: st.created, Group: st.group.Load(), ConfigIndex: st.configIndex.Load(), Raft: true}
	if err := writeMeta(filepath.Join(st.dir, metaFile), meta); err != nil {
		st.js.log.Warn("replicated stream's founding not recorded as done: tried again", "stream", st.name, "err", err)
		return
	}
	st.founding.Store(false)
	if !st.checkpoints() {
		// A memory stream's consumers as they were turned are in the
		// group's snapshot now; the file would be read at no start.
		if err := os.Remove(filepath.Join(st.dir, consumersFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			st.js.log.Warn("turned memory stream's consumers file not removed", "stream", st.name, "err", err)
		}
	}
}
