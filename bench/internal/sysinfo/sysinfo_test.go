package sysinfo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench/internal/sysinfo"
)

func TestRead(t *testing.T) {
	m := sysinfo.Read()
	require.Positive(t, m.CPUs)
	require.NotEmpty(t, m.Go)
	require.Contains(t, m.Markdown(), "logical CPUs")
}
