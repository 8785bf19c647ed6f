// Package gobench reads the text that `go test -bench` prints and reduces
// repeated runs (-count) to medians, for Skiff's benchmark reports.
//
// A result line is a name, an iteration count, then value-unit pairs:
//
//	BenchmarkMatch/algo=cstrie/op=lookup/state=hot-2  4015635  89.02 ns/op  0 B/op  0 allocs/op
//
// The "-2" suffix (GOMAXPROCS) is dropped from names, and each
// "key=value" path element of a name becomes a parameter.
package gobench

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Set is the results of one or more benchmark runs.
type Set struct {
	// Header holds the "key: value" lines go test prints before results
	// (goos, goarch, pkg, cpu).
	Header map[string]string
	// Names lists benchmark names in the order first seen.
	Names   []string
	results map[string]*Result
}

// Result is every sample of one benchmark, by unit ("ns/op", "B/op", or a
// custom metric such as "msgs/s").
type Result struct {
	Name    string
	Samples map[string][]float64
}

// Parse reads go test output. Lines that are not results or header lines
// are ignored, so the whole output of a run can be fed in.
func Parse(r io.Reader) (*Set, error) {
	s := &Set{Header: map[string]string{}, results: map[string]*Result{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, ": "); ok && !strings.Contains(k, " ") && !strings.HasPrefix(k, "Benchmark") {
			s.Header[k] = v
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue
		}
		name := trimProcs(f[0])
		res := s.results[name]
		if res == nil {
			res = &Result{Name: name, Samples: map[string][]float64{}}
			s.results[name] = res
			s.Names = append(s.Names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("gobench: %q: %w", line, err)
			}
			res.Samples[f[i+1]] = append(res.Samples[f[i+1]], v)
		}
	}
	return s, sc.Err()
}

// trimProcs drops a trailing "-N" GOMAXPROCS suffix.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// Get returns the result named name, or nil.
func (s *Set) Get(name string) *Result { return s.results[name] }

// Median returns the median of the samples of unit for the benchmark
// named name, and the number of samples.
func (s *Set) Median(name, unit string) (float64, int) {
	r := s.results[name]
	if r == nil {
		return 0, 0
	}
	return Median(r.Samples[unit]), len(r.Samples[unit])
}

// Median returns the median of xs (0 for none).
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Params returns the key=value elements of a benchmark name, and the first
// element (the function name).
func Params(name string) (fn string, params map[string]string) {
	parts := strings.Split(name, "/")
	params = map[string]string{}
	for _, p := range parts[1:] {
		if k, v, ok := strings.Cut(p, "="); ok {
			params[k] = v
		}
	}
	return parts[0], params
}

// Runs returns the largest number of samples any benchmark has: the -count
// of the run(s).
func (s *Set) Runs() int {
	n := 0
	for _, r := range s.results {
		for _, v := range r.Samples {
			n = max(n, len(v))
		}
	}
	return n
}
