package conf

import (
	"iter"
	"strings"
)

// Map is a configuration map: entries in file order, each key once. Keys
// are kept as written; lookups ignore case, and so does the rule that a
// later entry replaces an earlier one with the same key.
//
// A nil *Map is empty. A Map is immutable once returned by Parse and safe
// for concurrent use.
type Map struct {
	entries []entry
	index   map[string]int // strings.ToLower(key) -> live entry
	dead    int            // entries replaced while parsing, dropped by compact
}

type entry struct {
	key  string
	val  Value
	dead bool
}

// Len returns the number of entries.
func (m *Map) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// Get returns the value of key, compared without regard to case. A
// missing key yields the zero Value (KindInvalid) and false.
func (m *Map) Get(key string) (Value, bool) {
	if m == nil {
		return Value{}, false
	}
	i, ok := m.index[strings.ToLower(key)]
	if !ok {
		return Value{}, false
	}
	return m.entries[i].val, true
}

// Keys returns the keys as written, in file order.
func (m *Map) Keys() []string {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	return keys
}

// All yields the entries in file order.
func (m *Map) All() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		if m == nil {
			return
		}
		for _, e := range m.entries {
			if !yield(e.key, e.val) {
				return
			}
		}
	}
}

// Walk calls fn for every value in m, depth first in file order, a
// container before its contents; v.Path() tells where each one sits. It
// stops at and returns the first error fn returns.
func (m *Map) Walk(fn func(v Value) error) error {
	for _, v := range m.All() {
		if err := walk(v, fn); err != nil {
			return err
		}
	}
	return nil
}

func walk(v Value, fn func(Value) error) error {
	if err := fn(v); err != nil {
		return err
	}
	switch v.kind {
	case KindArray:
		for _, e := range v.arr {
			if err := walk(e, fn); err != nil {
				return err
			}
		}
	case KindMap:
		return v.m.Walk(fn)
	}
	return nil
}

// Interface returns m as a map[string]any of plain Go values; see
// Value.Interface.
func (m *Map) Interface() map[string]any {
	out := make(map[string]any, m.Len())
	for k, v := range m.All() {
		out[k] = v.Interface()
	}
	return out
}

// String renders m in the canonical syntax: one `key: value` per line,
// maps as `key { ... }`, strings double-quoted, other scalars as written,
// variables and includes expanded. Parsing the result yields the same
// entries, kinds and texts; only lines differ. It is what `skiff` prints
// as the effective configuration. A file whose variables repeat a large
// value many times can print past MaxInputSize, and then does not parse
// back.
func (m *Map) String() string {
	var w writer
	w.entries(m, 0)
	return w.b.String()
}

func newMap() *Map { return &Map{index: make(map[string]int)} }

// set adds an entry, replacing any earlier one with the same key (in any
// case) the way a later line overrides an earlier one in nats-server. The
// replaced entry is only marked, so that set stays O(1); compact drops it.
func (m *Map) set(key string, v Value) {
	lk := strings.ToLower(key)
	if i, ok := m.index[lk]; ok {
		m.entries[i].dead = true
		m.dead++
	}
	m.index[lk] = len(m.entries)
	m.entries = append(m.entries, entry{key: key, val: v})
}

// compact drops replaced entries once the map is complete.
func (m *Map) compact() {
	if m.dead == 0 {
		return
	}
	live := m.entries[:0]
	for _, e := range m.entries {
		if !e.dead {
			m.index[strings.ToLower(e.key)] = len(live)
			live = append(live, e)
		}
	}
	clear(m.entries[len(live):])
	m.entries = live
	m.dead = 0
}
