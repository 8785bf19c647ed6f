package subject

// Kind classifies a pattern token.
type Kind uint8

const (
	// Literal is a token that matches only itself.
	Literal Kind = iota
	// One is the "*" wildcard: exactly one token.
	One
	// Rest is the ">" wildcard: one or more tokens, only as the last token.
	Rest
	// Any is the "#" wildcard: zero or more tokens, anywhere.
	Any
)

// The wildcard tokens as strings, for code that builds patterns.
const (
	OneToken  = "*"
	RestToken = ">"
	AnyToken  = "#"
)

// KindOf returns the kind of a pattern token. Only a token that is exactly
// one wildcard character is a wildcard; "foo*" is Literal.
func KindOf(tok string) Kind {
	if len(tok) != 1 {
		return Literal
	}
	switch tok[0] {
	case '*':
		return One
	case '>':
		return Rest
	case '#':
		return Any
	}
	return Literal
}

// String returns the token a Kind stands for, or "literal".
func (k Kind) String() string {
	switch k {
	case One:
		return OneToken
	case Rest:
		return RestToken
	case Any:
		return AnyToken
	}
	return "literal"
}

// nextToken returns the token of s starting at byte off and the offset of
// the token after it. An offset past len(s) means s is exhausted.
func nextToken(s string, off int) (tok string, next int) {
	for i := off; i < len(s); i++ {
		if s[i] == '.' {
			return s[off:i], i + 1
		}
	}
	return s[off:], len(s) + 1
}
