package chaosfs

import (
	"fmt"
	"strings"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Losses are the power losses of a fault-injection run that may take
// writes acknowledged under a sync policy (design 2.4): those of a
// quorum of a group's replicas or more, under a policy that acknowledges
// before fsyncing. The power loss of fewer than a quorum takes nothing
// acknowledged under any policy (the replica is held until caught up), and
// is not added. The zero value is not usable; NewLosses makes one.
type Losses struct {
	d     store.Durability
	spans [][2]time.Time
}

// NewLosses returns the losses of a run whose writes are acknowledged
// under d.
func NewLosses(d store.Durability) *Losses { return &Losses{d: d} }

// Add records a power loss of a quorum or more that began at from and was
// complete at to.
func (l *Losses) Add(from, to time.Time) {
	if l.d.Sync == store.SyncAlways {
		return // nothing acknowledged was left unsynced
	}
	slack := l.d.Interval + 50*time.Millisecond // an interval, and an fsync's time
	l.spans = append(l.spans, [2]time.Time{from.Add(-slack), to.Add(50 * time.Millisecond)})
}

// Any reports whether a loss may have taken anything acknowledged.
func (l *Losses) Any() bool { return len(l.spans) > 0 }

// Allowed reports whether a write acknowledged at ack may be lost: under
// interval, one acknowledged within a loss's span (from the interval plus
// 50 ms before the power went to 50 ms after it was gone); under never,
// any acknowledged before a loss's span ended (the operating system may
// have kept it unwritten for as long as it liked).
func (l *Losses) Allowed(ack time.Time) bool {
	for _, s := range l.spans {
		if !ack.After(s[1]) && (l.d.Sync == store.SyncNever || !ack.Before(s[0])) {
			return true
		}
	}
	return false
}

// String lists the spans.
func (l *Losses) String() string {
	var b strings.Builder
	for i, s := range l.spans {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[%s, %s]", s[0].Format(time.StampMilli), s[1].Format(time.StampMilli))
	}
	return b.String()
}
