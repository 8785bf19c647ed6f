package corebench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's CPU times: USER_HZ, which Linux
// fixes at 100 for every architecture's user-space ABI.
const userHZ = 100

// procCPU returns the CPU time (user and system) process pid has used so
// far, from /proc/PID/stat (Linux only).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, the 14th and 15th fields of a
// /proc/PID/stat line. The command name (the 2nd, in parentheses) may
// hold spaces and parentheses itself, so fields count from the last ')'.
func parseStatCPU(line string) (time.Duration, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("corebench: /proc stat without a command name: %q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is the 3rd field, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("corebench: /proc stat with %d fields after the name", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("corebench: /proc stat CPU time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// cpuTimes returns the CPU time each server of c has used so far.
func (c *Cluster) cpuTimes() ([]time.Duration, error) {
	out := make([]time.Duration, len(c.Procs))
	for i, p := range c.Procs {
		t, err := procCPU(p.PID())
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// perMsg formats d spread over n messages, in microseconds.
func perMsg(d time.Duration, n int) string {
	return strconv.FormatFloat(float64(d)/float64(time.Microsecond)/float64(n), 'f', 2, 64) + " µs"
}
