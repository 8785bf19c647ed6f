package subject

import "strings"

// Intersects reports whether some subject matches both patterns a and b:
// two streams whose subjects intersect would both claim that subject.
// Both must be valid patterns.
func Intersects(a, b string) bool {
	return intersects(strings.Split(Canonical(a), "."), strings.Split(Canonical(b), "."))
}

func intersects(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	// ">" wants one or more tokens: any non-empty rest can give them.
	if len(a) > 0 && KindOf(a[0]) == Rest {
		return len(b) > 0
	}
	if len(b) > 0 && KindOf(b[0]) == Rest {
		return len(a) > 0
	}
	if len(a) > 0 && KindOf(a[0]) == Any {
		return intersects(a[1:], b) || (len(b) > 0 && intersects(a, b[1:]))
	}
	if len(b) > 0 && KindOf(b[0]) == Any {
		return intersects(a, b[1:]) || (len(a) > 0 && intersects(a[1:], b))
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if KindOf(a[0]) == One || KindOf(b[0]) == One || a[0] == b[0] {
		return intersects(a[1:], b[1:])
	}
	return false
}
