package subject

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors returned by NewTransform, wrapped with the token at fault.
var (
	// ErrTransform is returned for a source and destination whose
	// wildcards do not correspond: a reference to a wildcard the source
	// lacks, a ">" in one and not the other, a "*" left in the
	// destination without a source wildcard to take.
	ErrTransform = errors.New("subject: invalid transform")
	// ErrUnsupported is returned for a mapping function other than
	// wildcard ({{partition(...)}}, {{split(...)}}, ...) and for the "#"
	// wildcard, which NATS subjects do not have.
	ErrUnsupported = errors.New("subject: mapping function not supported")
)

// Transform maps the subjects a source pattern matches to subjects of a
// destination, as nats-server maps the subjects of imports and exports:
//
//	src        dst                      orders.eu.new ->
//	orders.*.> shop.*.>                 shop.eu.new
//	orders.*.* shop.$2.$1               shop.new.eu
//	orders.*.> x.{{wildcard(1)}}.>      x.eu.new
//
// A destination token is a literal; "*", which takes the source's next
// wildcard in order; "$N" or "{{wildcard(N)}}", which take the source's
// Nth "*" (from 1); or ">", which takes what the source's ">" matched and
// must end both or neither. Other mapping functions are refused with
// ErrUnsupported. A Transform is immutable and safe for concurrent use.
type Transform struct {
	src, dst string
	stoks    []string // source tokens; "*" and ">" are wildcards
	dtoks    []dtok
	rest     bool // both end in ">"
	stars    int  // the source's "*" tokens
}

// dtok is a destination token: a literal, or the source's wildcard ref
// (an index into the "*" tokens, from 0).
type dtok struct {
	lit string
	ref int // -1 for a literal
}

// NewTransform returns the transform from src, a pattern, to dst.
func NewTransform(src, dst string) (*Transform, error) {
	stoks, err := SplitPattern(nil, src)
	if err != nil {
		return nil, fmt.Errorf("%w: source %q: %w", ErrTransform, src, err)
	}
	t := &Transform{src: src, dst: dst, stoks: stoks}
	for _, tok := range stoks {
		switch KindOf(tok) {
		case Any:
			return nil, fmt.Errorf("%w: %q: the '#' wildcard", ErrUnsupported, src)
		case One:
			t.stars++
		case Rest:
			t.rest = true
		}
	}
	// The destination is split by hand: a mapping function may hold
	// spaces ("{{ wildcard(1) }}"), which a subject may not.
	dtoks := strings.Split(dst, ".")
	next := 0 // the source wildcard a destination "*" takes
	for i, tok := range dtoks {
		switch tok {
		case RestToken:
			if i != len(dtoks)-1 || !t.rest {
				return nil, fmt.Errorf("%w: %q: '>' must end both the source and the destination", ErrTransform, dst)
			}
			continue
		case AnyToken:
			return nil, fmt.Errorf("%w: %q: the '#' wildcard", ErrUnsupported, dst)
		case OneToken:
			if next >= t.stars {
				return nil, fmt.Errorf("%w: %q: more '*' than the source %q has", ErrTransform, dst, src)
			}
			t.dtoks = append(t.dtoks, dtok{ref: next})
			next++
			continue
		}
		ref, err := reference(tok)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%w (in %q)", err, dst)
		case ref == 0:
			if err := ValidateSubject(tok); err != nil {
				return nil, fmt.Errorf("%w: destination %q: %w", ErrTransform, dst, err)
			}
			t.dtoks = append(t.dtoks, dtok{lit: tok, ref: -1})
		case ref > t.stars:
			return nil, fmt.Errorf("%w: %q: %s refers to wildcard %d of %q, which has %d", ErrTransform, dst, tok, ref, src, t.stars)
		default:
			t.dtoks = append(t.dtoks, dtok{ref: ref - 1})
		}
	}
	if t.rest && dtoks[len(dtoks)-1] != RestToken {
		return nil, fmt.Errorf("%w: %q: '>' must end both the source %q and the destination", ErrTransform, dst, src)
	}
	return t, nil
}

// reference reads a destination token: the wildcard it refers to (from
// 1), or 0 for a literal. "$N" with N a number refers; "$" followed by
// anything else is a literal, as in nats-server.
func reference(tok string) (int, error) {
	if len(tok) > 1 && tok[0] == '$' {
		n, err := strconv.Atoi(tok[1:])
		if err != nil {
			return 0, nil
		}
		if n < 1 {
			return 0, fmt.Errorf("%w: %s: wildcards are numbered from 1", ErrTransform, tok)
		}
		return n, nil
	}
	if len(tok) <= 4 || !strings.HasPrefix(tok, "{{") || !strings.HasSuffix(tok, "}}") {
		return 0, nil
	}
	fn, args, ok := strings.Cut(strings.TrimSpace(tok[2:len(tok)-2]), "(")
	fn = strings.TrimSpace(fn)
	if !ok || !strings.HasSuffix(args, ")") {
		return 0, fmt.Errorf("%w: %s", ErrUnsupported, tok)
	}
	if !strings.EqualFold(fn, "wildcard") {
		return 0, fmt.Errorf("%w: %s: only wildcard(N) is implemented", ErrUnsupported, tok)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(args, ")")))
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %s: want wildcard(N), N from 1", ErrTransform, tok)
	}
	return n, nil
}

// Source returns the source pattern.
func (t *Transform) Source() string { return t.src }

// Destination returns the destination as written.
func (t *Transform) Destination() string { return t.dst }

// Pattern returns the pattern every mapped subject matches: the
// destination with "*" for each wildcard reference.
func (t *Transform) Pattern() string {
	var b strings.Builder
	for i, d := range t.dtoks {
		if i > 0 {
			b.WriteByte('.')
		}
		if d.ref >= 0 {
			b.WriteString(OneToken)
		} else {
			b.WriteString(d.lit)
		}
	}
	if t.rest {
		if len(t.dtoks) > 0 {
			b.WriteByte('.')
		}
		b.WriteString(RestToken)
	}
	return b.String()
}

// UsesEveryWildcard reports whether every wildcard of the source appears
// in the destination, so that two subjects the source tells apart map to
// two subjects (nats-server requires it of imports).
func (t *Transform) UsesEveryWildcard() bool {
	return t.usage(func(n int) bool { return n > 0 })
}

// usage reports whether ok holds for the count of references to each
// source wildcard.
func (t *Transform) usage(ok func(n int) bool) bool {
	var buf [16]int
	counts := buf[:0]
	if t.stars > len(buf) {
		counts = make([]int, 0, t.stars)
	}
	counts = counts[:t.stars]
	for _, d := range t.dtoks {
		if d.ref >= 0 {
			counts[d.ref]++
		}
	}
	for _, n := range counts {
		if !ok(n) {
			return false
		}
	}
	return true
}

// Reverse returns the transform that maps back what t maps: from t's
// Pattern to its source, with references where the source has wildcards.
// It needs every source wildcard used exactly once; ErrTransform
// otherwise.
func (t *Transform) Reverse() (*Transform, error) {
	if !t.usage(func(n int) bool { return n == 1 }) {
		return nil, fmt.Errorf("%w: %q -> %q: not every wildcard is used exactly once", ErrTransform, t.src, t.dst)
	}
	// The reverse's Nth wildcard is t's Nth wildcard reference, which
	// stands for source wildcard d.ref.
	back := make([]int, t.stars) // source wildcard -> reverse reference (from 1)
	n := 0
	for _, d := range t.dtoks {
		if d.ref >= 0 {
			n++
			back[d.ref] = n
		}
	}
	toks := make([]string, 0, len(t.stoks))
	star := 0
	for _, tok := range t.stoks {
		if tok == OneToken {
			toks = append(toks, "$"+strconv.Itoa(back[star]))
			star++
			continue
		}
		toks = append(toks, tok)
	}
	return NewTransform(t.Pattern(), strings.Join(toks, "."))
}

// Append appends the mapping of the subject subj to dst and reports
// whether subj matches the source (when it does not, dst is returned
// unchanged). It allocates only if dst must grow.
func (t *Transform) Append(dst []byte, subj string) ([]byte, bool) {
	var buf [16]string
	vals := buf[:0]
	off := 0
	rest := ""
	for _, st := range t.stoks {
		if off > len(subj) {
			return dst, false // the subject ran out of tokens
		}
		if st == RestToken {
			rest = subj[off:]
			off = len(subj) + 1
			break
		}
		tok, next := nextToken(subj, off)
		if st == OneToken {
			vals = append(vals, tok)
		} else if tok != st {
			return dst, false
		}
		off = next
	}
	if off <= len(subj) {
		return dst, false // tokens left over
	}
	start := len(dst)
	for _, d := range t.dtoks {
		if len(dst) > start {
			dst = append(dst, '.')
		}
		if d.ref >= 0 {
			dst = append(dst, vals[d.ref]...)
		} else {
			dst = append(dst, d.lit...)
		}
	}
	if t.rest {
		if len(dst) > start {
			dst = append(dst, '.')
		}
		dst = append(dst, rest...)
	}
	return dst, true
}

// Map returns the mapping of subj and whether subj matches the source.
func (t *Transform) Map(subj string) (string, bool) {
	b, ok := t.Append(nil, subj)
	return string(b), ok
}
