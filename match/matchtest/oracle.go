package matchtest

import "strings"

// Matches is the oracle the engines are checked against: the matching rules
// written as directly as possible, with no regard for speed. pattern and
// subject must be valid.
func Matches(pattern, subject string) bool {
	return matchTokens(strings.Split(pattern, "."), strings.Split(subject, "."))
}

func matchTokens(p, s []string) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	switch p[0] {
	case "#": // zero tokens, or one token and still in the '#'
		return matchTokens(p[1:], s) || (len(s) > 0 && matchTokens(p, s[1:]))
	case ">": // one or more, and it is last
		return len(s) > 0
	case "*":
		return len(s) > 0 && matchTokens(p[1:], s[1:])
	default:
		return len(s) > 0 && p[0] == s[0] && matchTokens(p[1:], s[1:])
	}
}
