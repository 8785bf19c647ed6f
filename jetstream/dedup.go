package jetstream

import "time"

// dedupWindow remembers message IDs for a stream's duplicate window, in
// arrival order so that expiry pops from the front. Its size is bounded by
// MaxDedupIDs whatever the window. Not safe for concurrent use.
type dedupWindow struct {
	window time.Duration
	ids    map[string]uint64
	order  []dedupEntry
	head   int
	last   string // the most recent ID, for Nats-Expected-Last-Msg-Id
}

type dedupEntry struct {
	id  string
	at  time.Time
	seq uint64
}

func (d *dedupWindow) init(window time.Duration) {
	d.window, d.ids = window, map[string]uint64{}
}

func (d *dedupWindow) expire(now time.Time) {
	for d.head < len(d.order) && (now.Sub(d.order[d.head].at) > d.window || len(d.ids) > MaxDedupIDs) {
		e := d.order[d.head]
		if d.ids[e.id] == e.seq {
			delete(d.ids, e.id)
		}
		d.order[d.head] = dedupEntry{}
		d.head++
	}
	if d.head > 1024 && d.head > len(d.order)/2 {
		d.order = append([]dedupEntry(nil), d.order[d.head:]...)
		d.head = 0
	}
}

func (d *dedupWindow) lookup(id string, now time.Time) (uint64, bool) {
	d.expire(now)
	seq, ok := d.ids[id]
	return seq, ok
}

func (d *dedupWindow) add(id string, seq uint64, now time.Time) {
	d.ids[id] = seq
	d.order = append(d.order, dedupEntry{id: id, at: now, seq: seq})
	d.last = id
	d.expire(now)
}

// rebuildDedup refills the duplicate window from the stored messages'
// Nats-Msg-Id headers after a restart, so that a publisher retrying
// across the restart is still deduplicated.
func (st *stream) rebuildDedup() {
	window := st.config().Duplicates
	if window <= 0 {
		return
	}
	now := time.Now()
	for seq := st.store.SeqAtOrAfterTime(now.Add(-window)); ; {
		m, err := st.store.Next(seq, "")
		if err != nil {
			return
		}
		seq = m.Seq + 1
		if len(m.Header) == 0 {
			st.ingestMu.lastMsgID = ""
			continue
		}
		id, ok := parseHeaders(m.Header).get("Nats-Msg-Id")
		st.ingestMu.lastMsgID = id
		if ok {
			st.ingestMu.dedup.add(id, m.Seq, time.Unix(0, m.Timestamp))
		}
	}
}
