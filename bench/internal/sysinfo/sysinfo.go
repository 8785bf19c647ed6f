// Package sysinfo describes the machine a benchmark ran on, for the
// reports in docs/benchmarks: CPU model and count, memory, kernel and Go
// version. It reads Linux's /proc and falls back to what the Go runtime
// knows elsewhere.
package sysinfo

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Machine is a description of the host.
type Machine struct {
	CPU       string // model name
	CPUs      int    // logical CPUs the Go runtime sees
	MemoryGiB float64
	Kernel    string
	OS        string // GOOS/GOARCH
	Go        string // the go command's version if found, else the runtime's
}

// Read describes the current machine.
func Read() Machine {
	m := Machine{
		CPU:  firstField("/proc/cpuinfo", "model name"),
		CPUs: runtime.NumCPU(),
		OS:   runtime.GOOS + "/" + runtime.GOARCH,
		Go:   runtime.Version(),
	}
	if kb, err := strconv.ParseFloat(strings.TrimSuffix(firstField("/proc/meminfo", "MemTotal"), " kB"), 64); err == nil {
		m.MemoryGiB = kb / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.Go = strings.TrimPrefix(strings.TrimSpace(string(out)), "go version ")
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	return m
}

// Markdown renders the description as a bullet list.
func (m Machine) Markdown() string {
	return fmt.Sprintf("- CPU: %s, %d logical CPUs\n- Memory: %.1f GiB\n- OS: %s, kernel %s\n- Go: %s\n",
		m.CPU, m.CPUs, m.MemoryGiB, m.OS, m.Kernel, m.Go)
}

// firstField returns the value of the first "key: value" line with key in
// a /proc file.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
