// Package chaosfs simulates a machine's power loss over a real directory,
// for the fault-injection suites of replicated streams (issue 13, design
// 7.3): a process's files are cut back to what an operating system crash
// would keep, which a kill -9 alone never shows, since the kernel keeps
// what the process wrote.
//
// FS wraps a vfs.FS (the operating system's) and records in an
// append-only journal what every change made durable: a file created, its
// size at each successful Sync, a truncation, a rename, a removal, a
// directory synced. Cut replays the journal after the process is gone and
// cuts the power: every file the journal knows is truncated to the size
// its last Sync saw, a file never synced (nor its directory since it was
// made) is removed, and the machine's boot ID changes (FS.BootID, which
// store/raftlog takes as the operating system's: raftlog.Machine).
//
//	fsys, _ := chaosfs.Open(vfs.OS, "/data/chaosfs.journal") // the server writes through fsys
//	...                                                      // kill -9 the server
//	rep, _ := chaosfs.Cut("/data/chaosfs.journal")           // the power goes
//	fsys, _ = chaosfs.Open(vfs.OS, "/data/chaosfs.journal")  // the next boot
//
// In process, PowerOff stands for the kill: from then on every change
// through the FS fails, so a server shut down afterwards changes nothing
// the cut keeps.
//
// # The model
//
// It is storetest.MemFS's, on disk: a file keeps what its last Sync saw;
// directory entries (made, renamed, removed) are durable at once, except
// that a file never synced is removed unless its directory was synced
// after it was made. Two differences come from working on a real disk,
// where nothing can be brought back: a truncation, or a file created over
// an old one, is durable at once (its size is the smaller of the last
// Sync's and the truncation's), and bytes overwritten in place below the
// synced size keep their new value. Each is one of the outcomes a real
// crash may have, so a system that survives every cut survives them; the
// cut just does not draw every outcome. Files written around the FS (the
// JetStream metadata jetstream writes with os, each fsynced and renamed
// into place) are not in the journal, and are kept as they are.
//
// # Journal
//
// One record a line, paths quoted as Go strings (strconv.Quote), absolute:
//
//	boot 3                  the machine booted for the 3rd time since the journal began
//	create "/d/f"           f was made
//	sync 4096 "/d/f"        f had 4096 bytes when a Sync of it succeeded
//	trunc 100 "/d/f"        f was truncated to 100 bytes (0: created over an old one)
//	rename "/d/a" "/d/b"    a was renamed over b
//	remove "/d/f"           f was removed
//	syncdir "/d"            d's entries were synced
//
// The journal is written (not fsynced) before the change's caller hears
// of it: it survives a kill -9 of the process it describes, which is all
// it needs. FS is safe for concurrent use.
package chaosfs
