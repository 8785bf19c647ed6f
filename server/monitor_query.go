package server

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// errBadQuery wraps every error a monitoring endpoint answers with 400.
var errBadQuery = errors.New("bad query parameter")

// List sizes of /connz and /subsz: the reference server's default, and a
// bound so that one request cannot make the server build an unbounded
// response. A larger limit is lowered to maxListLimit; the response's
// "limit" shows the one used.
const (
	defaultListLimit = 1024
	maxListLimit     = 10_000
)

// query reads the parameters of one request. The first bad one is kept in
// err and later reads return zero values, so that a handler parses every
// parameter and checks err once.
type query struct {
	v   url.Values
	err error
}

func newQuery(v url.Values) *query { return &query{v: v} }

func (q *query) fail(name, value, want string) {
	if q.err == nil {
		q.err = fmt.Errorf("%w %s=%q: %s", errBadQuery, name, value, want)
	}
}

// nonNegative returns the parameter as an int, or def if it is absent.
func (q *query) nonNegative(name string, def int) int {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		q.fail(name, s, "want a non-negative integer")
		return def
	}
	return n
}

// page returns offset and limit: limit defaults to defaultListLimit (also
// for limit=0, as in the reference server) and is at most maxListLimit.
func (q *query) page() (offset, limit int) {
	offset = q.nonNegative("offset", 0)
	limit = q.nonNegative("limit", defaultListLimit)
	if limit == 0 {
		limit = defaultListLimit
	}
	return offset, min(limit, maxListLimit)
}

// uint64 returns the parameter as a uint64, or 0 if it is absent.
func (q *query) uint64(name string) uint64 {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return 0
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		q.fail(name, s, "want a non-negative integer")
		return 0
	}
	return n
}

// bool returns the parameter as a bool (1, t, true, 0, f, false, ...), or
// false if it is absent.
func (q *query) bool(name string) bool {
	s := q.v.Get(name)
	if s == "" || q.err != nil {
		return false
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		q.fail(name, s, "want true or false")
		return false
	}
	return b
}

// paginate returns the part of a list of n items that offset and limit
// select, as bounds for slicing.
func paginate(n, offset, limit int) (lo, hi int) {
	lo = min(offset, n)
	return lo, lo + min(limit, n-lo)
}
