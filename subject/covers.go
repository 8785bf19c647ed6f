package subject

import "strings"

// Covers reports whether pattern a matches every subject that pattern p
// matches, so that a permission granted on a also grants p. Both must be
// valid patterns. It reasons token by token and is sound but not complete:
// when it answers true, a covers p; a few equivalent spellings it does not
// recognise (such as "*.#" against "#.*") answer false, which permission
// checks treat as "not granted", the safe side.
func Covers(a, p string) bool {
	return covers(strings.Split(Canonical(a), "."), strings.Split(Canonical(p), "."))
}

func covers(a, p []string) bool {
	if len(a) == 0 {
		return len(p) == 0
	}
	switch KindOf(a[0]) {
	case Any:
		for k := 0; k <= len(p); k++ {
			if covers(a[1:], p[k:]) {
				return true
			}
		}
		return false
	case Rest:
		// One or more tokens: p's rest must always produce at least one.
		for _, tok := range p {
			if KindOf(tok) != Any {
				return true
			}
		}
		return false
	case One:
		if len(p) == 0 || KindOf(p[0]) == Rest || KindOf(p[0]) == Any {
			return false
		}
		return covers(a[1:], p[1:])
	default:
		return len(p) > 0 && p[0] == a[0] && covers(a[1:], p[1:])
	}
}
