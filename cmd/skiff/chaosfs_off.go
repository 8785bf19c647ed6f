//go:build !chaosfs

package main

import "github.com/skiffmq/skiff/broker"

// chaosFS does nothing but in the chaosfs build (chaosfs.go).
func chaosFS(*broker.Config) error { return nil }
