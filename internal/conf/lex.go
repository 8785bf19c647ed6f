package conf

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// cursor is a position in the text being read: a file, or an environment
// variable's value. The parser swaps cursors to read an include or a
// variable and restores the old one after.
type cursor struct {
	buf  []byte
	pos  int
	line int
	file string
}

func (c *cursor) eof() bool { return c.pos >= len(c.buf) }

// peek returns the next byte, or 0 at the end of the input. A NUL byte in
// the input is ordinary word content, so callers test eof first where the
// difference matters.
func (c *cursor) peek() byte {
	if c.pos >= len(c.buf) {
		return 0
	}
	return c.buf[c.pos]
}

func isNewline(b byte) bool { return b == '\n' || b == '\r' }

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// atNewlineOrEOF reports whether the cursor is at the end of a line.
func (c *cursor) atNewlineOrEOF() bool { return c.eof() || isNewline(c.buf[c.pos]) }

// skipBOM skips a UTF-8 byte order mark, which some editors write.
func (c *cursor) skipBOM() {
	if len(c.buf) >= 3 && c.buf[0] == 0xEF && c.buf[1] == 0xBB && c.buf[2] == 0xBF {
		c.pos = 3
	}
}

// skipBlank skips spaces, tabs and comments, and also new lines if
// newlines is set. A comment starts with # or // and runs to the end of
// the line; the new line is left for the caller unless newlines is set.
func (c *cursor) skipBlank(newlines bool) {
	for !c.eof() {
		switch c.buf[c.pos] {
		case ' ', '\t':
			c.pos++
		case '\n':
			if !newlines {
				return
			}
			c.pos++
			c.line++
		case '\r':
			if !newlines {
				return
			}
			c.pos++
		case '#':
			c.skipComment()
		case '/':
			if c.pos+1 >= len(c.buf) || c.buf[c.pos+1] != '/' {
				return
			}
			c.skipComment()
		default:
			return
		}
	}
}

func (c *cursor) skipComment() {
	for !c.eof() && !isNewline(c.buf[c.pos]) {
		c.pos++
	}
}

func (c *cursor) skipSpaces() {
	for !c.eof() && isSpace(c.buf[c.pos]) {
		c.pos++
	}
}

// isWordEnd reports whether b ends a bare value. # and // do not: they
// start a comment only after whitespace, so URLs (nats://host:4222) and
// passwords (pa#ss) need no quotes.
func isWordEnd(b byte) bool {
	switch b {
	case ' ', '\t', '\n', '\r', ',', ';', '}', ']':
		return true
	}
	return false
}

// isKeyEnd reports whether b ends a bare key.
func isKeyEnd(b byte) bool {
	switch b {
	case ':', '=', '{', '[', '"', '\'':
		return true
	}
	return isWordEnd(b)
}

// word reads a bare word up to a byte for which end reports true.
func (c *cursor) word(end func(byte) bool) string {
	start := c.pos
	for !c.eof() && !end(c.buf[c.pos]) {
		c.pos++
	}
	return string(c.buf[start:c.pos])
}

// found describes the input at the cursor for an error message.
func (c *cursor) found() string {
	if c.eof() {
		return "end of file"
	}
	if isNewline(c.buf[c.pos]) {
		return "a new line"
	}
	r, _ := utf8.DecodeRune(c.buf[c.pos:])
	return strconv.QuoteRune(r)
}

// quoted reads a string in single or double quotes, the cursor on the
// opening quote. Double-quoted strings take Go-style escapes; single-quoted
// ones take none. Either may span lines.
func (c *cursor) quoted() (string, error) {
	q := c.buf[c.pos]
	startLine := c.line
	c.pos++
	var out []byte // nil until the first escape
	start := c.pos
	for !c.eof() {
		switch b := c.buf[c.pos]; {
		case b == q:
			s := c.buf[start:c.pos]
			c.pos++
			if out != nil {
				return string(append(out, s...)), nil
			}
			return string(s), nil
		case b == '\\' && q == '"':
			out = append(out, c.buf[start:c.pos]...)
			var err error
			if out, err = c.escape(out); err != nil {
				return "", err
			}
			start = c.pos
		case b == '\n':
			c.line++
			c.pos++
		default:
			c.pos++
		}
	}
	return "", c.errorAt(startLine, ErrSyntax, "string is never closed")
}

// escape decodes the escape sequence at the cursor, which is on the
// backslash, and appends it to out.
func (c *cursor) escape(out []byte) ([]byte, error) {
	c.pos++
	if c.eof() {
		return nil, c.errorAt(c.line, ErrSyntax, "string is never closed")
	}
	e := c.buf[c.pos]
	c.pos++
	switch e {
	case '"', '\\', '/', '\'':
		return append(out, e), nil
	case 'n':
		return append(out, '\n'), nil
	case 't':
		return append(out, '\t'), nil
	case 'r':
		return append(out, '\r'), nil
	case 'b':
		return append(out, '\b'), nil
	case 'f':
		return append(out, '\f'), nil
	case 'x':
		n, err := c.hex(2)
		return append(out, byte(n)), err
	case 'u', 'U':
		digits := 4
		if e == 'U' {
			digits = 8
		}
		n, err := c.hex(digits)
		if err != nil {
			return nil, err
		}
		if n > utf8.MaxRune || !utf8.ValidRune(rune(n)) {
			return nil, c.errorAt(c.line, ErrSyntax, "escape \\%c%0*X is not a valid Unicode code point", e, digits, n)
		}
		return utf8.AppendRune(out, rune(n)), nil
	}
	c.pos--
	return nil, c.errorAt(c.line, ErrSyntax, "invalid escape \\%s in a double-quoted string; use \\\\ for a backslash", c.found())
}

func (c *cursor) hex(digits int) (uint32, error) {
	if c.pos+digits > len(c.buf) {
		return 0, c.errorAt(c.line, ErrSyntax, "escape needs %d hexadecimal digits", digits)
	}
	n, err := strconv.ParseUint(string(c.buf[c.pos:c.pos+digits]), 16, 32)
	if err != nil {
		return 0, c.errorAt(c.line, ErrSyntax, "escape needs %d hexadecimal digits, found %q", digits, c.buf[c.pos:c.pos+digits])
	}
	c.pos += digits
	return uint32(n), nil
}

func (c *cursor) errorAt(line int, sentinel error, format string, args ...any) error {
	return &Error{File: c.file, Line: line, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}
