package server

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Subsz is the body of /subsz: statistics of the subscription indexes of
// every account (or, with acc=NAME, of one) and, with subs=true, one page
// of their subscriptions.
//
// Skiff's index has no result cache, so num_cache and cache_hit_rate are
// 0. The fanout figures are computed from a snapshot of the index, per
// distinct pattern: a pattern's fanout is the number of deliveries its own
// subscriptions take from one message (one per plain subscription, one per
// queue group), not counting other patterns that match the same subject.
// max_fanout is the largest, avg_fanout the mean over patterns.
//
// num_matches counts the messages clients published (each is one lookup):
// those of the account's clients with acc=NAME.
type Subsz struct {
	ID  string    `json:"server_id"`
	Now time.Time `json:"now"`
	SublistStats
	// Total counts the subscriptions selected (those that test matches, if
	// given), on every page; it is filled with or without subs=true.
	Total  int         `json:"total"`
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
	Subs   []SubDetail `json:"subscriptions_list,omitempty"`
}

// SubDetail describes one subscription.
type SubDetail struct {
	// Account is the subscription's account, in /subsz (nats-server's
	// /connz leaves it out, as Skiff's does).
	Account string `json:"account,omitempty"`
	Subject string `json:"subject"`
	Queue   string `json:"qgroup,omitempty"`
	Sid     string `json:"sid"`
	// Msgs counts deliveries only for a subscription with a maximum, from
	// the UNSUB that set it; otherwise it is 0.
	Msgs int64  `json:"msgs"`
	Max  int64  `json:"max,omitempty"`
	Cid  uint64 `json:"cid"`
}

// subszQuery is a parsed /subsz request.
type subszQuery struct {
	subs          bool
	offset, limit int
	test          string // a literal subject; "": no filter
	acc           string // an account's name; "": every account
}

func parseSubszQuery(r *http.Request) (subszQuery, error) {
	q := newQuery(r.URL.Query())
	sq := subszQuery{subs: q.bool("subs"), test: q.v.Get("test"), acc: q.v.Get("acc")}
	sq.offset, sq.limit = q.page()
	if q.err != nil {
		return sq, q.err
	}
	if sq.test != "" {
		if err := subject.ValidateLiteral(sq.test); err != nil {
			return sq, fmt.Errorf("%w test=%q: want a literal subject: %v", errBadQuery, sq.test, err)
		}
	}
	return sq, nil
}

func (m *monitor) handleSubsz(w http.ResponseWriter, r *http.Request) {
	sq, err := parseSubszQuery(r)
	if err == nil && sq.acc != "" {
		if _, ok := m.s.LookupAccount(sq.acc); !ok {
			err = fmt.Errorf("%w acc=%q: no such account", errBadQuery, sq.acc)
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m.subsz(sq, time.Now()))
}

// subsz answers from one snapshot of each account's index, so that its
// counts and list agree. A snapshot is O(1) to take, and the walk that
// lists it blocks no publisher or subscriber, but it is O(subscriptions).
func (m *monitor) subsz(sq subszQuery, now time.Time) *Subsz {
	s := m.s
	accs := s.Accounts()
	if sq.acc != "" {
		a, _ := s.LookupAccount(sq.acc) // checked in handleSubsz
		accs = []*Account{a}
	}
	var entries []match.Subscription[*subscription]
	var hit map[*subscription]bool
	if sq.test != "" {
		hit = map[*subscription]bool{}
	}
	for _, a := range accs {
		snap := a.subs.ReadOnlySnapshot()
		entries = append(entries, snap.Snapshot()...)
		if hit != nil {
			var r match.Result[*subscription]
			// Validated in parseSubszQuery: Lookup cannot fail.
			_ = snap.Lookup(sq.test, &r)
			for _, sub := range r.Plain {
				hit[sub] = true
			}
			for _, g := range r.Groups {
				for _, sub := range g.Members {
					hit[sub] = true
				}
			}
		}
	}
	sz := &Subsz{ID: s.id, Now: now.UTC(), Offset: sq.offset, Limit: sq.limit}
	sz.NumSubs = uint32(len(entries))
	for _, a := range accs {
		sz.NumInserts += uint64(a.subInserts.Load())
		sz.NumRemoves += uint64(a.subRemoves.Load())
	}
	if sq.acc != "" {
		sz.NumMatches = uint64(accs[0].usage().traffic.inMsgs)
	} else {
		sz.NumMatches = uint64(m.counters().inMsgs)
	}
	sz.MaxFanout, sz.AvgFanout = fanout(entries)
	if hit != nil {
		entries = slices.DeleteFunc(entries, func(e match.Subscription[*subscription]) bool { return !hit[e.Subscriber] })
	}
	sz.Total = len(entries)
	if !sq.subs {
		return sz
	}
	details := make([]SubDetail, len(entries))
	for i, e := range entries {
		details[i] = e.Subscriber.detail()
		details[i].Account = e.Subscriber.acc.name
	}
	slices.SortFunc(details, compareSubDetail)
	lo, hi := paginate(len(details), sq.offset, sq.limit)
	sz.Subs = details[lo:hi]
	return sz
}

// fanout returns the largest and the mean fanout over the distinct
// patterns of entries, per account (see Subsz).
func fanout(entries []match.Subscription[*subscription]) (maxFan uint32, avg float64) {
	type pattern struct {
		acc     *Account
		pattern string
	}
	type group struct {
		pattern
		queue string
	}
	perPattern := map[pattern]uint32{}
	groups := map[group]bool{}
	for _, e := range entries {
		p := pattern{e.Subscriber.acc, e.Pattern}
		if e.Queue != "" {
			g := group{p, e.Queue}
			if groups[g] {
				continue // one member of a group receives
			}
			groups[g] = true
		}
		perPattern[p]++
	}
	var sum uint64
	for _, n := range perPattern {
		maxFan = max(maxFan, n)
		sum += uint64(n)
	}
	if len(perPattern) > 0 {
		avg = float64(sum) / float64(len(perPattern))
	}
	return maxFan, avg
}
