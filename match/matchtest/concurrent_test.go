package matchtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The snapshot check must be able to fail: these histories are built so
// that a snapshot showing the given prefixes is, or is not, one instant.
func TestFeasible(t *testing.T) {
	// Writer 0: op1 [1,2], op2 [3,4]. Writer 1: op1 [5,6], op2 [7,8].
	history := [][]op{
		{{1, 2}, {3, 4}},
		{{5, 6}, {7, 8}},
	}
	tests := []struct {
		name       string
		start, end int64
		cands      [][]int
		want       bool
	}{
		{"both done", 9, 10, [][]int{{2}, {2}}, true},
		{"nothing yet", 0, 0, [][]int{{0}, {0}}, true},
		{"writer 0 done, writer 1 not started", 4, 5, [][]int{{2}, {0}}, true},
		{"missing a completed op", 9, 10, [][]int{{1}, {2}}, false},
		{"op not yet started", 0, 1, [][]int{{0}, {1}}, false},
		// Writer 1's op1 started after writer 0's op2 ended, so a state
		// with writer 1's op1 but not writer 0's op2 never existed, even
		// within a long snapshot call.
		{"real-time order broken", 0, 20, [][]int{{1}, {1}}, false},
		{"ambiguous candidates, one works", 0, 20, [][]int{{1, 2}, {1}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, feasible(tc.start, tc.end, tc.cands, history))
		})
	}
}

func TestPrefixCandidates(t *testing.T) {
	patterns := []string{"a", "b", "c"}
	// 2 rounds of 3 subscribes and 3 unsubscribes: 12 ops.
	require.Equal(t, []int{0, 6, 12}, prefixCandidates(nil, patterns, 12))
	require.Equal(t, []int{2, 8}, prefixCandidates([]string{"a", "b"}, patterns, 12))
	require.Equal(t, []int{4, 10}, prefixCandidates([]string{"b", "c"}, patterns, 12))
	require.Empty(t, prefixCandidates([]string{"a", "c"}, patterns, 12), "a hole is no prefix state")
}
