//go:build !unix

package server

import "time"

// processCPUTime reports that the process's CPU time is not known here.
func processCPUTime() (time.Duration, bool) { return 0, false }
