package conf

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
)

// source is where included files come from: the operating system for
// ParseFile, an fs.FS for ParseFS.
type source interface {
	// join resolves an include name against the file that includes it.
	join(from, name string) string
	// id names a file uniquely, for cycle detection.
	id(name string) string
	open(name string) (io.ReadCloser, error)
}

type osSource struct{}

func (osSource) join(from, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(filepath.Dir(from), name)
}

func (osSource) id(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		return abs
	}
	return filepath.Clean(name)
}

func (osSource) open(name string) (io.ReadCloser, error) { return os.Open(name) }

type fsSource struct{ fsys fs.FS }

func (fsSource) join(from, name string) string { return path.Join(path.Dir(from), name) }

func (fsSource) id(name string) string { return path.Clean(name) }

func (s fsSource) open(name string) (io.ReadCloser, error) { return s.fsys.Open(name) }

// isInclude reports whether the bare key include just read is the include
// directive rather than a key: it is unless a ':' or '=' follows.
func (p *parser) isInclude() bool {
	i := p.pos
	for i < len(p.buf) && isSpace(p.buf[i]) {
		i++
	}
	return i >= len(p.buf) || (p.buf[i] != ':' && p.buf[i] != '=')
}

// include reads the file named after the include directive into m, as if
// its entries were written in place of the directive.
func (p *parser) include(m *Map, prefix string) error {
	line := p.line
	p.skipSpaces()
	var name string
	switch c := p.peek(); {
	case p.atNewlineOrEOF() || c == '{' || c == '[' || isWordEnd(c):
		return p.syntax("include needs a file name, found %s", p.found())
	case c == '"' || c == '\'':
		var err error
		if name, err = p.quoted(); err != nil {
			return err
		}
	default:
		name = p.word(isWordEnd)
	}
	if p.src == nil {
		return p.errorAt(line, ErrInclude, "include %q: Parse reads no files; use ParseFile or ParseFS", name)
	}
	full := p.src.join(p.file, name)
	id := p.src.id(full)
	if slices.Contains(p.files, id) {
		return p.errorAt(line, ErrIncludeCycle, "include %q: %s is already being read", name, full)
	}
	if len(p.files) > MaxIncludeDepth {
		return p.errorAt(line, ErrTooDeep, "include %q: includes nest more than %d deep", name, MaxIncludeDepth)
	}
	data, err := p.read(full)
	if err != nil {
		return p.errorAt(line, fmt.Errorf("%w: %w", ErrInclude, err), "include %q: %v", name, err)
	}
	saved := p.cursor
	p.cursor = cursor{buf: data, line: 1, file: full}
	p.files = append(p.files, id)
	err = p.document(m, prefix)
	p.files = p.files[:len(p.files)-1]
	p.cursor = saved
	return err
}

// read reads a whole file, keeping the total within MaxInputSize.
func (p *parser) read(name string) ([]byte, error) {
	f, err := p.src.open(name)
	if err != nil {
		return nil, err
	}
	room := MaxInputSize - p.bytes
	data, err := io.ReadAll(io.LimitReader(f, int64(room)+1))
	// A read-only file has nothing to flush: Close cannot lose data.
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	if len(data) > room {
		return nil, fmt.Errorf("%w: more than %d bytes in all", ErrTooLarge, MaxInputSize)
	}
	p.bytes += len(data)
	return data, nil
}
