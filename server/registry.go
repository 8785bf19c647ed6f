package server

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// registry is the server's accounts by name. Reads are lock-free: a CONNECT
// and every RS+, RS- and RMSG from a peer look an account up, and accounts
// change rarely (at New; later phases add JWT accounts at run time), so a
// write copies the map and publishes the copy.
type registry struct {
	m  atomic.Pointer[map[string]*Account]
	mu sync.Mutex // serializes writers
	// added, if set, is called with every account registered after it
	// was set, once the account can be looked up (outside mu). Set in
	// New, then only read.
	added func(*Account)
}

// lookup returns the account named name, or nil.
func (r *registry) lookup(name string) *Account {
	m := r.m.Load()
	if m == nil {
		return nil
	}
	return (*m)[name]
}

// lookupBytes is lookup for a name in a protocol buffer: the m[string(b)]
// form does not allocate.
func (r *registry) lookupBytes(name []byte) *Account {
	m := r.m.Load()
	if m == nil {
		return nil
	}
	return (*m)[string(name)]
}

// add registers a unless an account of that name exists, and returns the
// account registered under the name and whether it is a.
func (r *registry) add(a *Account) (*Account, bool) {
	if cur, added := r.store(a); !added {
		return cur, false
	}
	if r.added != nil {
		r.added(a)
	}
	return a, true
}

func (r *registry) store(a *Account) (*Account, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.m.Load()
	if old != nil {
		if cur := (*old)[a.name]; cur != nil {
			return cur, false
		}
	}
	next := make(map[string]*Account, 1+lenOf(old))
	if old != nil {
		maps.Copy(next, *old)
	}
	next[a.name] = a
	// Readers see either the old map or the whole new one.
	r.m.Store(&next)
	return a, true
}

func lenOf(m *map[string]*Account) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// all returns every account, sorted by name ("$G" first).
func (r *registry) all() []*Account {
	m := r.m.Load()
	if m == nil {
		return nil
	}
	out := slices.Collect(maps.Values(*m))
	slices.SortFunc(out, func(a, b *Account) int { return cmp.Compare(a.name, b.name) })
	return out
}
