//go:build tools

// Package lint pins golangci-lint for `make lint`; it is its own module so
// that the linter's dependencies stay out of Skiff's go.mod.
package lint

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
