package store_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/skiffmq/skiff/store"
)

func ExampleOpen() {
	// Memory storage here; a file-backed stream needs only a Dir, and
	// recovers what is there when it is opened again.
	s, err := store.Open(store.Options{Storage: store.MemoryStorage, MaxMsgsPerSubject: 2})
	if err != nil {
		panic(err)
	}
	defer func() { _ = s.Close() }()
	for _, subj := range []string{"orders.eu", "orders.us", "orders.eu", "orders.eu"} {
		seq, _, err := s.Append(subj, nil, []byte("payload"), 0)
		if err != nil {
			panic(err)
		}
		// Before acknowledging a publisher: a no-op for memory storage.
		if err := s.WaitDurable(seq); err != nil {
			panic(err)
		}
	}
	st := s.State()
	fmt.Println(st.Msgs, st.FirstSeq, st.LastSeq, st.NumDeleted)
	_, err = s.Get(1)
	fmt.Println(errors.Is(err, store.ErrNotFound)) // the oldest orders.eu made room
	// Output:
	// 3 2 4 0
	// true
}

func ExampleStream_Next() {
	s, _ := store.Open(store.Options{Storage: store.MemoryStorage})
	defer func() { _ = s.Close() }()
	for _, subj := range []string{"orders.eu.created", "stock.eu", "orders.us.created", "orders.eu.paid"} {
		if _, _, err := s.Append(subj, nil, nil, 0); err != nil {
			fmt.Println(err)
		}
	}
	// A consumer with a filter reads on from its position.
	for from := uint64(1); ; {
		m, err := s.Next(from, "orders.*.created")
		if err != nil {
			break
		}
		fmt.Println(m.Seq, m.Subject)
		from = m.Seq + 1
	}
	// Output:
	// 1 orders.eu.created
	// 3 orders.us.created
}

func ExampleStream_Purge() {
	s, _ := store.Open(store.Options{Storage: store.MemoryStorage})
	defer func() { _ = s.Close() }()
	for _, subj := range []string{"a.1", "b.1", "a.2", "a.1", "b.2"} {
		if _, _, err := s.Append(subj, nil, nil, 0); err != nil {
			fmt.Println(err)
		}
	}
	n, _ := s.Purge(store.PurgeRequest{Subject: "a.#", Keep: 1})
	fmt.Println(n, s.Subjects(""))
	n, _ = s.Purge(store.PurgeRequest{})
	st := s.State()
	fmt.Println(n, st.FirstSeq, st.LastSeq)
	// Output:
	// 2 map[a.1:1 b.1:1 b.2:1]
	// 3 6 5
}

func ExampleConsumerState() {
	c := store.NewMemoryConsumerState() // or OpenConsumerState(dir, nil, store.SyncAlways)
	defer func() { _ = c.Close() }()
	_ = c.Delivered(1, 10, 1, 0) // consumer seq 1 delivered stream seq 10
	_ = c.Delivered(2, 11, 1, 0)
	_ = c.Ack(2, 11) // out of order: the floor waits for 10
	st, _ := c.Load()
	fmt.Println(st.AckFloor, len(st.Pending))
	_ = c.Ack(1, 10)
	st, _ = c.Load()
	fmt.Println(st.AckFloor, len(st.Pending))
	// Output:
	// {0 9} 1
	// {2 11} 0
}

func ExampleOpen_reopen() {
	// A file-backed stream recovers its messages, deletes and sequence
	// when opened again on the same directory.
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	s, err := store.Open(store.Options{Dir: dir}) // SyncAlways: WaitDurable fsyncs
	if err != nil {
		panic(err)
	}
	for _, subj := range []string{"orders.eu", "orders.us", "orders.eu"} {
		seq, _, err := s.Append(subj, nil, []byte("payload"), 0)
		if err != nil {
			panic(err)
		}
		if err := s.WaitDurable(seq); err != nil {
			panic(err)
		}
	}
	if err := s.Delete(2); err != nil {
		panic(err)
	}
	if err := s.Close(); err != nil {
		panic(err)
	}

	s, err = store.Open(store.Options{Dir: dir})
	if err != nil {
		panic(err)
	}
	defer func() { _ = s.Close() }()
	st := s.State()
	fmt.Println(st.Msgs, st.FirstSeq, st.LastSeq, st.NumDeleted)
	seq, _, _ := s.Append("orders.us", nil, nil, 0)
	fmt.Println(seq) // sequences go on where they stopped
	// Output:
	// 2 1 3 1
	// 4
}
