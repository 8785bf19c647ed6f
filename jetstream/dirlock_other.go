//go:build !unix

package jetstream

import "os"

// flock is a no-op where flock(2) does not exist: the store directory is
// not protected against a second server there.
func flock(*os.File) error { return nil }
