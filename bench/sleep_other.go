//go:build !linux

package bench

import "time"

// sleep waits d (see sleep_linux.go for why Linux does better).
func sleep(d time.Duration) { time.Sleep(d) }
