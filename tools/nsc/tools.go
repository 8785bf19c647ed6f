//go:build tools

// Package nsc pins the `nsc` tool that generated testdata/jwt (see
// testdata/jwt/gen.sh): `make tools/bin/nsc` builds it into tools/bin. It
// is its own module so that its dependencies stay out of Skiff's go.mod.
package nsc

import (
	_ "github.com/nats-io/nsc/v2"
)
