//go:build tools

// Package nats pins the real `nats` CLI (natscli) and nats-server for
// `make tools`, which builds them into tools/bin: the CLI drives Skiff in
// server/cli_test.go and the server is the peer of the benchmarks. It is
// its own module so that their dependencies stay out of Skiff's go.mod.
package nats

import (
	_ "github.com/nats-io/nats-server/v2"
	_ "github.com/nats-io/natscli/nats"
)
