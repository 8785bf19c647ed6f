package subject

import "strings"

// Match reports whether the pattern matches the subject. Subject tokens are
// literal. Both must be valid (see SplitPattern and SplitSubject); for
// invalid input the answer is meaningless, but Match never panics.
//
// Match walks both strings once, remembering only the most recent "#" to
// resume from on a mismatch (the classic glob algorithm, over tokens): a
// later "#" can absorb anything an earlier one could, so older resume
// points are never needed. It allocates nothing.
func Match(pattern, subject string) bool {
	np, ns := len(pattern), len(subject)
	pi, si := 0, 0
	resumeP, resumeS := -1, -1 // pattern offset after the last '#', subject offset it resumes at
	for {
		if pi <= np {
			ptok, pnext := nextToken(pattern, pi)
			switch KindOf(ptok) {
			case Any:
				resumeP, resumeS = pnext, si
				pi = pnext
				continue
			case Rest:
				if si <= ns {
					return true
				}
			default:
				if si <= ns {
					stok, snext := nextToken(subject, si)
					if ptok == "*" || ptok == stok {
						pi, si = pnext, snext
						continue
					}
				}
			}
		} else if si > ns {
			return true
		}
		// Mismatch: let the last '#' absorb one more subject token.
		if resumeP < 0 || resumeS > ns {
			return false
		}
		_, resumeS = nextToken(subject, resumeS)
		pi, si = resumeP, resumeS
	}
}

// Canonical returns p with every run of adjacent "#" tokens collapsed to one
// (they match the same subjects). It returns p itself, without allocating,
// when p has no such run. p must be a valid pattern.
func Canonical(p string) string {
	if !strings.Contains(p, "#.#") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	prevAny := false
	for off := 0; off <= len(p); {
		var tok string
		tok, off = nextToken(p, off)
		isAny := tok == AnyToken
		if isAny && prevAny {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
		prevAny = isAny
	}
	return b.String()
}

// IsLiteral reports whether a valid pattern has no wildcard tokens.
func IsLiteral(p string) bool {
	for off := 0; off <= len(p); {
		var tok string
		tok, off = nextToken(p, off)
		if KindOf(tok) != Literal {
			return false
		}
	}
	return true
}
