// Package storetest holds the file systems the tests of the store and of
// the packages built on it share: MemFS, an in-memory file system that can
// model a crash (of the process, or of the operating system, which keeps
// only what was fsynced), and FaultFS, which wraps another file system and
// injects the failures a disk has: writes that run out of space, fsyncs
// and reads that fail, directory creations that stall.
//
// Both implement vfs.FS, the interface store.FS names, and import nothing
// of the store itself, so that the store's own (internal) tests use them
// too:
//
//	mem := storetest.NewMemFS()
//	s, _ := store.Open(store.Options{Dir: "/s", FS: mem})
//	... append, fsync some of it ...
//	crashed := mem.CrashClone() // the disk as a power loss leaves it
//	s2, _ := store.Open(store.Options{Dir: "/s", FS: crashed})
//
//	disk := storetest.NewFaultFS(store.OSFS)
//	disk.Match = storetest.IsSegment // faults hit message segments only
//	disk.SetFull(true)               // appends fail with ENOSPC
//
// Both are safe for concurrent use.
package storetest
