package conf

import (
	"strings"
	"unicode/utf8"
)

// writer renders values in the canonical syntax. It quotes every string,
// so no string can turn into a number, boolean, variable or comment when
// read back, and writes other scalars as their original text, so a size
// such as 2m keeps reading as two minutes.
type writer struct{ b strings.Builder }

// inlineWidth is the widest array of scalars written on one line.
const inlineWidth = 72

func (w *writer) entries(m *Map, depth int) {
	for k, v := range m.All() {
		w.indent(depth)
		w.key(k)
		if v.kind == KindMap {
			w.b.WriteByte(' ')
		} else {
			w.b.WriteString(": ")
		}
		w.value(v, depth)
		w.b.WriteByte('\n')
	}
}

func (w *writer) value(v Value, depth int) {
	switch v.kind {
	case KindString:
		w.quote(v.text)
	case KindInt, KindFloat, KindBool:
		w.b.WriteString(v.text)
	case KindMap:
		if v.m.Len() == 0 {
			w.b.WriteString("{}")
			return
		}
		w.b.WriteString("{\n")
		w.entries(v.m, depth+1)
		w.indent(depth)
		w.b.WriteByte('}')
	case KindArray:
		w.array(v.arr, depth)
	}
}

// array writes short arrays of scalars on one line, others one element
// per line.
func (w *writer) array(arr []Value, depth int) {
	width := 0
	for _, e := range arr {
		if e.kind == KindArray || e.kind == KindMap {
			width = inlineWidth + 1
			break
		}
		width += e.weight
	}
	if width <= inlineWidth {
		w.b.WriteByte('[')
		for i, e := range arr {
			if i > 0 {
				w.b.WriteString(", ")
			}
			w.value(e, depth)
		}
		w.b.WriteByte(']')
		return
	}
	w.b.WriteString("[\n")
	for _, e := range arr {
		w.indent(depth + 1)
		w.value(e, depth+1)
		w.b.WriteByte('\n')
	}
	w.indent(depth)
	w.b.WriteByte(']')
}

func (w *writer) indent(depth int) {
	for range depth {
		w.b.WriteString("  ")
	}
}

// key writes a key bare when it is plainly a bare key, else quoted.
func (w *writer) key(k string) {
	if isPlainKey(k) {
		w.b.WriteString(k)
		return
	}
	w.quote(k)
}

// isPlainKey reports whether k reads back as itself when written bare. It
// is stricter than the parser, which accepts more bare keys.
func isPlainKey(k string) bool {
	if k == "" || strings.EqualFold(k, "include") {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '$':
		case i > 0 && (c == '.' || c == '-' || c == '*' || c == '>'):
		default:
			return false
		}
	}
	return true
}

// quote writes s double-quoted. Printable text goes through as is; quotes,
// backslashes and control characters are escaped, and bytes that are not
// UTF-8 (which \x escapes can produce) are written as \x escapes.
func (w *writer) quote(s string) {
	const hexDigits = "0123456789abcdef"
	w.b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			w.b.WriteString(`\x`)
			w.b.WriteByte(hexDigits[s[i]>>4])
			w.b.WriteByte(hexDigits[s[i]&0xF])
		case r == '"' || r == '\\':
			w.b.WriteByte('\\')
			w.b.WriteRune(r)
		case r == '\n':
			w.b.WriteString(`\n`)
		case r == '\r':
			w.b.WriteString(`\r`)
		case r == '\t':
			w.b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			w.b.WriteString(`\u00`)
			w.b.WriteByte(hexDigits[r>>4])
			w.b.WriteByte(hexDigits[r&0xF])
		default:
			w.b.WriteString(s[i : i+size])
		}
		i += size
	}
	w.b.WriteByte('"')
}
