//go:build !unix

package jetstream

// openFileLimits is unknown here: the default bound applies.
func openFileLimits() (soft, hard uint64, ok bool) { return 0, 0, false }

// raiseOpenFileLimit has nothing to raise here.
func raiseOpenFileLimit() (uint64, error) { return 0, nil }
