// Package multiraftest holds the test doubles of package multiraft: an
// in-memory log (MemDisk, MemLog) whose saves complete when the test says
// or on a writer goroutine, and an in-memory network (FakeTransport) that
// drops, duplicates, delays, reorders and partitions, driven by Step and
// Tick with a seeded RNG, never the wall clock.
//
//	ft := multiraftest.NewFakeTransport(seed)
//	disk := multiraftest.NewMemDisk()
//	n, _ := multiraft.New(multiraft.Options{ID: 1, Manual: true}, ft.Endpoint(1))
//	ft.Endpoint(1).SetHandler(n)
//	n.AddGroup(multiraft.GroupConfig{ID: 7, Log: disk.Log(7), StateMachine: sm, Peers: []uint64{1, 2, 3}})
//	for ft.Step() || disk.Flush() > 0 || n.Process() {
//	}
//
// Both types are safe for concurrent use; their callbacks (a save's done,
// a handler's Receive) run without their locks held.
package multiraftest
