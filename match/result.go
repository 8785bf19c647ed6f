package match

// smallDedup is the size up to which repeats are found by scanning rather
// than through a map: scanning a few cache lines beats hashing.
const smallDedup = 16

// Result receives the answer of a Lookup: every matching plain subscriber
// once, and per queue group the matching members once. Its owner reuses it
// across lookups so that its slices keep their capacity; a Result must not
// be used by two lookups at once.
//
// The zero value is an empty Result ready to use.
type Result[S comparable] struct {
	// Plain lists the plain subscribers whose patterns match, each once.
	Plain []S
	// Groups lists, per queue group name with a matching entry, the
	// matching members, each once. A broker picks one member per group.
	Groups []Group[S]

	sets  []*Set[S]            // sets added since Reset, to ignore a set reached twice
	plain map[S]struct{}       // membership of Plain once it outgrows smallDedup
	queue map[qkey[S]]struct{} // membership of Groups' members, likewise
}

type qkey[S comparable] struct {
	queue string
	sub   S
}

// Reset empties r, keeping its capacity.
func (r *Result[S]) Reset() {
	r.Plain = r.Plain[:0]
	r.Groups = r.Groups[:0]
	r.sets = r.sets[:0]
	if len(r.plain) > 0 {
		clear(r.plain)
	}
	if len(r.queue) > 0 {
		clear(r.queue)
	}
}

// Len returns the number of subscribers in r, counting every group member.
func (r *Result[S]) Len() int {
	n := len(r.Plain)
	for i := range r.Groups {
		n += len(r.Groups[i].Members)
	}
	return n
}

// Add merges the subscribers of one matching pattern into r. Matcher
// implementations call it once per matching pattern. Adding the same *Set
// twice in one lookup (a pattern reached along two paths through a "#") has
// no further effect, and a subscriber matched by several patterns appears
// once. Add does not retain set's slices in r.
func (r *Result[S]) Add(set *Set[S]) {
	if set.Empty() {
		return
	}
	for _, seen := range r.sets {
		if seen == set {
			return
		}
	}
	first := len(r.sets) == 0
	r.sets = append(r.sets, set)
	if first {
		// The common case: one pattern matches, nothing can repeat.
		r.Plain = append(r.Plain, set.Plain...)
		for i := range set.Groups {
			r.newGroup(set.Groups[i].Queue, set.Groups[i].Members)
		}
		return
	}
	for _, sub := range set.Plain {
		r.addPlain(sub)
	}
	for i := range set.Groups {
		g := &set.Groups[i]
		j := r.groupIndex(g.Queue)
		if j < 0 {
			r.newGroup(g.Queue, g.Members)
			continue
		}
		for _, sub := range g.Members {
			r.addMember(j, sub)
		}
	}
}

func (r *Result[S]) addPlain(sub S) {
	if len(r.Plain) < smallDedup {
		if indexOf(r.Plain, sub) < 0 {
			r.Plain = append(r.Plain, sub)
		}
		return
	}
	if len(r.plain) == 0 {
		if r.plain == nil {
			r.plain = make(map[S]struct{}, 2*len(r.Plain))
		}
		for _, s := range r.Plain {
			r.plain[s] = struct{}{}
		}
	}
	if _, ok := r.plain[sub]; !ok {
		r.plain[sub] = struct{}{}
		r.Plain = append(r.Plain, sub)
	}
}

func (r *Result[S]) addMember(j int, sub S) {
	g := &r.Groups[j]
	if len(g.Members) < smallDedup {
		if indexOf(g.Members, sub) < 0 {
			g.Members = append(g.Members, sub)
		}
		return
	}
	if r.queue == nil {
		r.queue = make(map[qkey[S]]struct{})
	}
	if _, indexed := r.queue[qkey[S]{g.Queue, g.Members[0]}]; !indexed {
		for _, s := range g.Members {
			r.queue[qkey[S]{g.Queue, s}] = struct{}{}
		}
	}
	k := qkey[S]{g.Queue, sub}
	if _, ok := r.queue[k]; !ok {
		r.queue[k] = struct{}{}
		g.Members = append(g.Members, sub)
	}
}

func (r *Result[S]) groupIndex(queue string) int {
	for i := range r.Groups {
		if r.Groups[i].Queue == queue {
			return i
		}
	}
	return -1
}

// newGroup appends a group, reusing the Members capacity left in r.Groups'
// backing array by earlier lookups.
func (r *Result[S]) newGroup(queue string, members []S) {
	n := len(r.Groups)
	if n < cap(r.Groups) {
		r.Groups = r.Groups[:n+1]
		g := &r.Groups[n]
		g.Queue = queue
		g.Members = append(g.Members[:0], members...)
		return
	}
	r.Groups = append(r.Groups, Group[S]{Queue: queue, Members: append([]S(nil), members...)})
}
