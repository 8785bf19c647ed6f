//go:build !unix

package jetstream

// openFileLimit is unknown here: the default bound applies.
func openFileLimit() (uint64, bool) { return 0, false }
