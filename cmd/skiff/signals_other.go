//go:build !unix

package main

import (
	"errors"
	"os"
	"syscall"
)

var serveSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

func isReopen(os.Signal) bool   { return false }
func isLameDuck(os.Signal) bool { return false }

var commandSignals = map[string]syscall.Signal{}

func sendSignal(int, string) error { return errors.New("signals are not supported on this system") }
