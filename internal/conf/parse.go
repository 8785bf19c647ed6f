package conf

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Limits on what the parser accepts. Configuration files are small; these
// only stop a hostile or broken input from using unbounded memory or stack.
const (
	// MaxInputSize bounds the bytes read: a file and all it includes.
	MaxInputSize = 16 << 20
	// MaxDepth bounds how deeply maps and arrays nest, includes and
	// variables counted.
	MaxDepth = 64
	// MaxIncludeDepth bounds how deeply includes nest.
	MaxIncludeDepth = 10
	// MaxExpansion bounds the bytes that variable references add, so that
	// a few lines of $A referring to $B cannot expand exponentially.
	MaxExpansion = 16 << 20
)

// Parse parses a configuration held in memory. It has no file system, so
// an include directive is an error wrapping ErrInclude; use ParseFile or
// ParseFS for files that include others.
func Parse(data []byte) (*Map, error) {
	p := &parser{}
	if len(data) > MaxInputSize {
		return nil, &Error{Line: 1, Msg: fmt.Sprintf("input is %d bytes, more than the %d allowed", len(data), MaxInputSize), Err: ErrTooLarge}
	}
	return p.root(cursor{buf: data, line: 1})
}

// ParseFile parses the configuration file at path. An include names a file
// relative to the directory of the file that includes it, or an absolute
// path.
func ParseFile(path string) (*Map, error) {
	return parseSource(osSource{}, path)
}

// ParseFS parses the configuration file name in fsys. Includes are read
// from fsys too, relative to the including file; names follow fs.ValidPath
// once joined, so an include cannot leave fsys.
func ParseFS(fsys fs.FS, name string) (*Map, error) {
	return parseSource(fsSource{fsys}, name)
}

func parseSource(src source, name string) (*Map, error) {
	p := &parser{src: src}
	data, err := p.read(name)
	if err != nil {
		return nil, &Error{File: name, Msg: err.Error(), Err: err}
	}
	p.files = []string{src.id(name)}
	return p.root(cursor{buf: data, line: 1, file: name})
}

// parser reads one configuration: a file, the files it includes and the
// environment variables it refers to. Each of those is read through the
// embedded cursor, saved and restored around the detour.
type parser struct {
	cursor
	src      source   // nil for Parse: includes are rejected
	files    []string // ids of the files being read, outermost first, for cycles
	bytes    int      // bytes read so far, all files
	depth    int      // maps and arrays open
	scopes   []*Map   // maps being filled, outermost first, for $NAME
	envVars  []string // environment variables being expanded, for cycles
	expanded int      // weight added by variable references
}

func (p *parser) root(c cursor) (*Map, error) {
	p.cursor = c
	m := newMap()
	p.scopes = append(p.scopes, m)
	if err := p.document(m, ""); err != nil {
		return nil, err
	}
	m.compact()
	return m, nil
}

// document reads a whole file into m: entries, or entries wrapped in one
// pair of braces as in JSON.
func (p *parser) document(m *Map, prefix string) error {
	p.skipBOM()
	p.skipBlank(true)
	if p.peek() != '{' || p.eof() {
		return p.body(m, prefix, 0, 0)
	}
	open := p.line
	p.pos++
	if err := p.body(m, prefix, '}', open); err != nil {
		return err
	}
	p.skipBlank(true)
	if !p.eof() {
		return p.syntax("unexpected %s after the '}' that closes the file", p.found())
	}
	return nil
}

// body reads entries into m until closing ('}', or 0 for the end of the
// input). open is the line of the opening brace, for errors.
//
//	body  = { entry ( newline | "," | ";" ) } [ closing ]
//	entry = key [ ":" | "=" ] value | "include" file
func (p *parser) body(m *Map, prefix string, closing byte, open int) error {
	for {
		p.skipBlank(true)
		if p.eof() {
			if closing != 0 {
				return p.errorAt(open, ErrSyntax, "the '{' on this line is never closed")
			}
			return nil
		}
		if closing != 0 && p.peek() == closing {
			p.pos++
			return nil
		}
		if err := p.entry(m, prefix); err != nil {
			return err
		}
		p.skipBlank(false)
		switch c := p.peek(); {
		case p.eof(), isNewline(c), closing != 0 && c == closing:
		case c == ',' || c == ';':
			p.pos++
		default:
			return p.syntax("expected a new line, ',' or ';' after a value, found %s", p.found())
		}
	}
}

func (p *parser) entry(m *Map, prefix string) error {
	line := p.line
	key, bare, err := p.key()
	if err != nil {
		return err
	}
	if bare && strings.EqualFold(key, "include") && p.isInclude() {
		return p.include(m, prefix)
	}
	path := joinKey(prefix, key)
	if err := p.separator(key, line); err != nil {
		return err
	}
	v, err := p.value(path)
	if err != nil {
		return err
	}
	v.line = line
	m.set(key, v)
	return nil
}

// key reads a quoted or bare key; bare reports which.
func (p *parser) key() (key string, bare bool, err error) {
	switch p.peek() {
	case '"', '\'':
		key, err = p.quoted()
		return key, false, err
	}
	if key = p.word(isKeyEnd); key == "" {
		return "", false, p.syntax("expected a key, found %s", p.found())
	}
	return key, true, nil
}

// separator skips the optional ':' or '=' after a key and the blanks
// before the value. The value must start on the key's line, except that a
// map or array may open on a later one (Allman-style braces).
func (p *parser) separator(key string, line int) error {
	p.skipSpaces()
	if c := p.peek(); !p.eof() && (c == ':' || c == '=') {
		p.pos++
	}
	p.skipBlank(false)
	if !p.atNewlineOrEOF() {
		return nil
	}
	p.skipBlank(true)
	if c := p.peek(); !p.eof() && (c == '{' || c == '[') {
		return nil
	}
	return p.errorAt(line, ErrSyntax, "key %q has no value", key)
}

// value reads any value; path names it in errors.
func (p *parser) value(path string) (Value, error) {
	line := p.line
	if p.eof() {
		return Value{}, p.syntax("expected a value, found end of file")
	}
	switch c := p.peek(); c {
	case '{':
		return p.mapValue(path, line)
	case '[':
		return p.arrayValue(path, line)
	case '"', '\'':
		s, err := p.quoted()
		if err != nil {
			return Value{}, err
		}
		return p.scalar(KindString, s, path, line), nil
	case '}', ']', ',', ';', '\n', '\r':
		return Value{}, p.syntax("expected a value, found %s", p.found())
	}
	word := p.word(isWordEnd)
	if word == "" {
		return Value{}, p.syntax("expected a value, found %s", p.found())
	}
	return p.bare(word, path, line)
}

// bare classifies a bare word: variable, boolean, number, size or string.
func (p *parser) bare(word, path string, line int) (Value, error) {
	if word[0] == '$' {
		if len(word) == 1 {
			return Value{}, p.syntax("'$' needs a variable name")
		}
		// A digit after $ cannot start a variable name; it is a bcrypt
		// hash such as $2a$11$..., which nats-server accepts unquoted.
		if !isDigit(word[1]) {
			return p.variable(word[1:], path, line)
		}
	}
	if b, ok := parseBool(word); ok {
		v := p.scalar(KindBool, word, path, line)
		v.b = b
		return v, nil
	}
	if lit, ok := parseNumber(word); ok {
		if lit.err != nil {
			return Value{}, p.errorAt(line, ErrRange, "%s: %q does not fit in 64 bits", path, word)
		}
		v := p.scalar(lit.kind, word, path, line)
		v.i, v.f = lit.i, lit.f
		return v, nil
	}
	return p.scalar(KindString, word, path, line), nil
}

func (p *parser) scalar(k Kind, text, path string, line int) Value {
	return Value{kind: k, text: text, line: line, file: p.file, path: path, weight: len(text) + 3}
}

func (p *parser) mapValue(path string, line int) (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	p.pos++
	m := newMap()
	p.scopes = append(p.scopes, m)
	err := p.body(m, path, '}', line)
	p.scopes = p.scopes[:len(p.scopes)-1]
	p.depth--
	if err != nil {
		return Value{}, err
	}
	m.compact()
	v := Value{kind: KindMap, m: m, line: line, file: p.file, path: path, weight: 4}
	for k, e := range m.All() {
		v.weight += len(k) + e.weight + 3
		v.height = max(v.height, e.height)
	}
	v.height++
	return v, nil
}

func (p *parser) arrayValue(path string, line int) (Value, error) {
	if err := p.enter(); err != nil {
		return Value{}, err
	}
	defer func() { p.depth-- }()
	p.pos++
	v := Value{kind: KindArray, arr: []Value{}, line: line, file: p.file, path: path, weight: 4}
	for {
		p.skipBlank(true)
		switch c := p.peek(); {
		case p.eof():
			return Value{}, p.errorAt(line, ErrSyntax, "the '[' on this line is never closed")
		case c == ']':
			p.pos++
			v.height++
			return v, nil
		case c == ',':
			return Value{}, p.syntax("unexpected ',' in an array: an element is missing")
		}
		e, err := p.value(path + "[" + strconv.Itoa(len(v.arr)) + "]")
		if err != nil {
			return Value{}, err
		}
		v.arr = append(v.arr, e)
		v.weight += e.weight + 2
		v.height = max(v.height, e.height)
		p.skipBlank(false)
		switch c := p.peek(); {
		case p.eof(), isNewline(c), c == ']':
		case c == ',':
			p.pos++
		default:
			return Value{}, p.syntax("expected ',' or ']' after an array element, found %s", p.found())
		}
	}
}

func (p *parser) enter() error {
	if p.depth >= MaxDepth {
		return p.errorf(ErrTooDeep, "maps and arrays nest more than %d deep", MaxDepth)
	}
	p.depth++
	return nil
}

func (p *parser) syntax(format string, args ...any) error {
	return p.errorAt(p.line, ErrSyntax, format, args...)
}

func (p *parser) errorf(sentinel error, format string, args ...any) error {
	return p.errorAt(p.line, sentinel, format, args...)
}

// joinKey extends a key path: "a" and "b" make "a.b".
func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}
