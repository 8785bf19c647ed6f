//go:build !linux

package vfs

import "os"

func preallocate(*os.File, int64, int64) error { return ErrNoPreallocate }
