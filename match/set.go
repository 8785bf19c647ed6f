package match

// Set holds the subscribers of one pattern: plain ones and queue groups.
//
// A *Set is a persistent value: once an engine publishes it, nobody
// modifies it, so lock-free readers may hold it while writers derive new
// sets with With and Without. A nil *Set is the empty set.
type Set[S comparable] struct {
	Plain  []S
	Groups []Group[S]
}

// Group is the members of one queue group on one pattern, or in a Result,
// the matching members of one queue group across all patterns.
type Group[S comparable] struct {
	Queue   string
	Members []S
}

// Len returns the number of entries in the set.
func (s *Set[S]) Len() int {
	if s == nil {
		return 0
	}
	n := len(s.Plain)
	for i := range s.Groups {
		n += len(s.Groups[i].Members)
	}
	return n
}

// Has reports whether the set holds (queue, sub).
func (s *Set[S]) Has(queue string, sub S) bool {
	if s == nil {
		return false
	}
	if queue == "" {
		return indexOf(s.Plain, sub) >= 0
	}
	g := s.group(queue)
	return g >= 0 && indexOf(s.Groups[g].Members, sub) >= 0
}

// With returns a new set holding s's entries and (queue, sub). If the entry
// is already present it returns s and false.
func (s *Set[S]) With(queue string, sub S) (*Set[S], bool) {
	n, added := s.Plus(queue, sub)
	if !added {
		return s, false
	}
	return &n, true
}

// Without returns a new set holding s's entries except (queue, sub), or nil
// if that leaves it empty. If the entry is absent it returns s and false.
func (s *Set[S]) Without(queue string, sub S) (*Set[S], bool) {
	n, removed := s.Minus(queue, sub)
	if !removed {
		return s, false
	}
	if n.Empty() {
		return nil, true
	}
	return &n, true
}

// Empty reports whether the set holds no entry.
func (s *Set[S]) Empty() bool {
	return s == nil || (len(s.Plain) == 0 && len(s.Groups) == 0)
}

// Plus is With for engines that embed a Set by value: it returns the new
// set as a value, sharing no backing array that s's readers may see.
func (s *Set[S]) Plus(queue string, sub S) (Set[S], bool) {
	if s.Has(queue, sub) {
		return Set[S]{}, false
	}
	var n Set[S]
	if s != nil {
		n = *s
	}
	if queue == "" {
		n.Plain = appendCopy(n.Plain, sub)
		return n, true
	}
	g := n.group(queue)
	if g < 0 {
		n.Groups = append(n.Groups[:len(n.Groups):len(n.Groups)], Group[S]{Queue: queue, Members: []S{sub}})
		return n, true
	}
	n.Groups = append([]Group[S](nil), n.Groups...)
	n.Groups[g].Members = appendCopy(n.Groups[g].Members, sub)
	return n, true
}

// Minus is Without for engines that embed a Set by value.
func (s *Set[S]) Minus(queue string, sub S) (Set[S], bool) {
	if !s.Has(queue, sub) {
		return Set[S]{}, false
	}
	n := Set[S]{Plain: s.Plain, Groups: s.Groups}
	if queue == "" {
		n.Plain = removeCopy(s.Plain, indexOf(s.Plain, sub))
		return n, true
	}
	g := s.group(queue)
	n.Groups = append([]Group[S](nil), s.Groups...)
	if len(s.Groups[g].Members) == 1 {
		n.Groups = append(n.Groups[:g], n.Groups[g+1:]...)
	} else {
		n.Groups[g].Members = removeCopy(s.Groups[g].Members, indexOf(s.Groups[g].Members, sub))
	}
	if len(n.Groups) == 0 {
		n.Groups = nil
	}
	return n, true
}

// AppendEntries appends the set's entries on pattern to dst.
func (s *Set[S]) AppendEntries(dst []Subscription[S], pattern string) []Subscription[S] {
	if s == nil {
		return dst
	}
	for _, sub := range s.Plain {
		dst = append(dst, Subscription[S]{Pattern: pattern, Subscriber: sub})
	}
	for _, g := range s.Groups {
		for _, sub := range g.Members {
			dst = append(dst, Subscription[S]{Pattern: pattern, Queue: g.Queue, Subscriber: sub})
		}
	}
	return dst
}

func (s *Set[S]) group(queue string) int {
	for i := range s.Groups {
		if s.Groups[i].Queue == queue {
			return i
		}
	}
	return -1
}

func indexOf[S comparable](list []S, sub S) int {
	for i, x := range list {
		if x == sub {
			return i
		}
	}
	return -1
}

// appendCopy returns a new slice holding list and sub, never sharing list's
// backing array (which readers may be iterating).
func appendCopy[S any](list []S, sub S) []S {
	n := make([]S, len(list)+1)
	copy(n, list)
	n[len(list)] = sub
	return n
}

// removeCopy returns a new slice holding list without element i, or nil if
// that leaves it empty.
func removeCopy[S any](list []S, i int) []S {
	if len(list) == 1 {
		return nil
	}
	n := make([]S, 0, len(list)-1)
	n = append(n, list[:i]...)
	return append(n, list[i+1:]...)
}
