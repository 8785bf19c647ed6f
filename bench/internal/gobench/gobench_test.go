package gobench_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench/internal/gobench"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/skiffmq/skiff/match
cpu: Intel(R) Xeon(R) Processor
BenchmarkMatch/algo=cstrie/op=lookup/state=hot-2   	 4015635	        89.02 ns/op	       0 B/op	       0 allocs/op
BenchmarkMatch/algo=cstrie/op=lookup/state=hot-2   	 4015635	        95.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkMatch/algo=cstrie/op=lookup/state=hot-2   	 4015635	        91.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkThroughput/algo=cstrie-2                         	      15	  21093453 ns/op	   4740807 msgs/s	      11 B/op	       0 allocs/op
--- some noise line
PASS
ok  	github.com/skiffmq/skiff/match	1.865s
`

func TestParse(t *testing.T) {
	s, err := gobench.Parse(strings.NewReader(sample))
	require.NoError(t, err)
	require.Equal(t, "Intel(R) Xeon(R) Processor", s.Header["cpu"])
	require.Equal(t, []string{"BenchmarkMatch/algo=cstrie/op=lookup/state=hot", "BenchmarkThroughput/algo=cstrie"}, s.Names)
	med, n := s.Median("BenchmarkMatch/algo=cstrie/op=lookup/state=hot", "ns/op")
	require.Equal(t, 3, n)
	require.InDelta(t, 91.0, med, 1e-9)
	med, _ = s.Median("BenchmarkThroughput/algo=cstrie", "msgs/s")
	require.InDelta(t, 4740807.0, med, 1e-9)
	fn, params := gobench.Params("BenchmarkMatch/algo=cstrie/op=lookup/state=hot")
	require.Equal(t, "BenchmarkMatch", fn)
	require.Equal(t, map[string]string{"algo": "cstrie", "op": "lookup", "state": "hot"}, params)
	require.Equal(t, 2.5, gobench.Median([]float64{4, 1, 2, 3}))
}
