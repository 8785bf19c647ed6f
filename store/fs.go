package store

import "github.com/skiffmq/skiff/store/vfs"

// FS is the file system a file-backed Stream or ConsumerState uses; see
// package vfs for its contract. Tests wrap it to inject faults, or replace
// it with an in-memory one (package storetest).
type FS = vfs.FS

// File is an open file of an FS. An *os.File satisfies it.
type File = vfs.File

// OSFS is the operating system's file system.
var OSFS = vfs.OS

// syncDir fsyncs a directory so that files created, renamed or removed in
// it survive a crash.
func syncDir(fs FS, dir string) error { return vfs.SyncDir(fs, dir) }
