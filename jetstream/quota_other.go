//go:build !linux

package jetstream

// defaultMaxMemory is DefaultMaxMemory where the machine's memory is not
// read.
func defaultMaxMemory() int64 { return DefaultMaxMemory }
