//go:build unix

package main

import (
	"os"
	"syscall"
)

// serveSignals are the signals `skiff serve` handles, as nats-server: INT
// and TERM stop it, USR1 reopens the log file, USR2 enters lame duck mode.
var serveSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGUSR2}

func isReopen(s os.Signal) bool   { return s == syscall.SIGUSR1 }
func isLameDuck(s os.Signal) bool { return s == syscall.SIGUSR2 }

// commandSignals are what `skiff serve --signal` sends, by name.
var commandSignals = map[string]syscall.Signal{
	"stop":   syscall.SIGKILL,
	"quit":   syscall.SIGINT,
	"term":   syscall.SIGTERM,
	"reopen": syscall.SIGUSR1,
	"ldm":    syscall.SIGUSR2,
}

func sendSignal(pid int, name string) error {
	sig := commandSignals[name]
	return syscall.Kill(pid, sig)
}
