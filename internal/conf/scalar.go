package conf

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// numLit is a bare word read as a number: an integer, a float or a size.
type numLit struct {
	kind Kind // KindInt (sizes too) or KindFloat
	i    int64
	f    float64
	unit string // lower-cased size unit, "" for none
	err  error  // non-nil when the literal is well formed but out of range
}

// sizeUnits maps a lower-cased unit to its multiplier: one letter for
// powers of 1000, with b, i or ib for powers of 1024, as nats-server does.
var sizeUnits = func() map[string]int64 {
	m := make(map[string]int64)
	var dec, bin int64 = 1, 1
	for _, p := range "kmgtpe" {
		dec *= 1000
		bin *= 1024
		m[string(p)] = dec
		for _, suffix := range []string{"b", "i", "ib"} {
			m[string(p)+suffix] = bin
		}
	}
	return m
}()

var errOutOfRange = errors.New("out of range")

// parseNumber reads s as
//
//	[+-] digits [ "." digits [ (e|E) [+-] digits ] | unit ]
//
// where digits may be separated by single underscores. It reports false
// when s is not a number, in which case a bare word is a string.
func parseNumber(s string) (numLit, bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	j := scanDigits(s, i)
	if j == i {
		return numLit{}, false
	}
	switch {
	case j == len(s):
		n, err := strconv.ParseInt(stripUnderscores(s), 10, 64)
		return numLit{kind: KindInt, i: n, err: rangeErr(err)}, true
	case s[j] == '.':
		k := scanDigits(s, j+1)
		if k == j+1 {
			return numLit{}, false
		}
		if k < len(s) && (s[k] == 'e' || s[k] == 'E') {
			e := k + 1
			if e < len(s) && (s[e] == '+' || s[e] == '-') {
				e++
			}
			if k = scanDigits(s, e); k == e {
				return numLit{}, false
			}
		}
		if k != len(s) {
			return numLit{}, false
		}
		f, err := strconv.ParseFloat(stripUnderscores(s), 64)
		return numLit{kind: KindFloat, f: f, err: rangeErr(err)}, true
	}
	unit := strings.ToLower(s[j:])
	mult, ok := sizeUnits[unit]
	if !ok {
		return numLit{}, false
	}
	n, err := strconv.ParseInt(stripUnderscores(s[:j]), 10, 64)
	if err == nil && (n > math.MaxInt64/mult || n < math.MinInt64/mult) {
		err = errOutOfRange
	}
	return numLit{kind: KindInt, i: n * mult, unit: unit, err: rangeErr(err)}, true
}

// parseSize reads s as an integer with an optional size unit. It reports
// false when s is not one, and an error when it is but does not fit.
func parseSize(s string) (int64, bool, error) {
	lit, ok := parseNumber(s)
	if !ok || lit.kind != KindInt {
		return 0, false, nil
	}
	return lit.i, true, lit.err
}

// scanDigits returns the end of the run of digits starting at i, allowing
// an underscore only between two digits.
func scanDigits(s string, i int) int {
	start := i
	for i < len(s) {
		switch c := s[i]; {
		case isDigit(c):
			i++
		case c == '_' && i > start && isDigit(s[i-1]) && i+1 < len(s) && isDigit(s[i+1]):
			i++
		default:
			return i
		}
	}
	return i
}

func stripUnderscores(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	return strings.ReplaceAll(s, "_", "")
}

func rangeErr(err error) error {
	if err != nil {
		return errOutOfRange
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseBool reads the six boolean words, in any case.
func parseBool(s string) (b, ok bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}
