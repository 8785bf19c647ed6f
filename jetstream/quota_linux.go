package jetstream

import "syscall"

// defaultMaxMemory is 75% of the machine's memory, as nats-server's
// default max_memory_store.
func defaultMaxMemory() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil || si.Totalram == 0 {
		return DefaultMaxMemory
	}
	return int64(uint64(si.Totalram) * uint64(si.Unit) / 4 * 3)
}
