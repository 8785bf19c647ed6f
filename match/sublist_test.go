package match_test

import (
	"reflect"
	"unsafe"

	"github.com/nats-io/nats-server/v2/server"
)

// nats-server's Sublist is exported but takes *server.subscription, an
// unexported type. The method expression (*server.Sublist).Insert can still
// be passed to a generic function, whose type parameter T is then inferred
// as that type, and reflect builds values of it with the one field Insert
// reads (subject). Subscriptions are built before the timer; the timed
// calls are ordinary function calls.

// sublistPeer is nats-server's Sublist as a contender, and for the memory
// benchmark, a Sublist builder.
type sublistPeer interface {
	contender
	// prepareFill returns a function that builds a Sublist holding one
	// subscription per topic, from subscriptions made in advance.
	prepareFill(topics []string) func() *server.Sublist
}

func newSublistPeer(cache bool) sublistPeer {
	return newSublistOf(cache, (*server.Sublist).Insert)
}

type sublistOf[T any] struct {
	cache  bool
	insert func(*server.Sublist, T) error
}

func newSublistOf[T any](cache bool, insert func(*server.Sublist, T) error) *sublistOf[T] {
	return &sublistOf[T]{cache: cache, insert: insert}
}

// newSubscription returns a *server.subscription (as T) on subject.
func newSubscription[T any](subject string) T {
	var zero T
	v := reflect.New(reflect.TypeOf(zero).Elem())
	f := v.Elem().FieldByName("subject")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetBytes([]byte(subject))
	return v.Interface().(T)
}

func (p *sublistOf[T]) newSublist() *server.Sublist {
	if p.cache {
		return server.NewSublistWithCache()
	}
	return server.NewSublistNoCache()
}

func (p *sublistOf[T]) prepareFill(topics []string) func() *server.Sublist {
	pre := make([]T, len(topics))
	for i, t := range topics {
		pre[i] = newSubscription[T](t)
	}
	return func() *server.Sublist {
		sl := p.newSublist()
		for _, s := range pre {
			if err := p.insert(sl, s); err != nil {
				panic(err)
			}
		}
		return sl
	}
}

func (p *sublistOf[T]) prepare(prefill, topics []string, inserters int) (func(int), func()) {
	sl := p.prepareFill(prefill)()
	pre := make([][]T, inserters)
	for k := range pre {
		pre[k] = make([]T, len(topics))
		for j, t := range topics {
			pre[k][j] = newSubscription[T](t)
		}
	}
	insert := func(k int) {
		for _, s := range pre[k] {
			_ = p.insert(sl, s)
		}
	}
	lookup := func() {
		for _, t := range topics {
			sl.Match(t)
		}
	}
	return insert, lookup
}
