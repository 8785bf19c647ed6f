package conf

import (
	"errors"
	"os"
	"slices"
	"strconv"
)

// variable resolves $name: the nearest earlier key name in the maps being
// filled, innermost first, else the environment variable name. Inside an
// environment variable's value only the environment counts, as in
// nats-server.
func (p *parser) variable(name, path string, line int) (Value, error) {
	var v Value
	found := false
	if len(p.envVars) == 0 {
		for i := len(p.scopes) - 1; i >= 0 && !found; i-- {
			v, found = p.scopes[i].Get(name)
		}
	}
	if !found {
		var err error
		if v, found, err = p.env(name, path, line); err != nil {
			return Value{}, err
		}
	}
	if !found {
		return Value{}, p.errorAt(line, ErrUnknownVariable, "%s: $%s is neither an earlier key nor an environment variable", path, name)
	}
	if p.depth+v.height > MaxDepth {
		return Value{}, p.errorAt(line, ErrTooDeep, "%s: $%s nests maps and arrays more than %d deep", path, name, MaxDepth)
	}
	if p.expanded += v.weight; p.expanded > MaxExpansion {
		return Value{}, p.errorAt(line, ErrTooLarge, "%s: variables expand to more than %d bytes", path, MaxExpansion)
	}
	v = rebase(v, path)
	v.line, v.file = line, p.file
	return v, nil
}

// env reads the environment variable name as a value, so that PORT=4222
// is an integer. A value that is not valid syntax, such as `two words`, is
// taken as a plain string.
func (p *parser) env(name, path string, line int) (Value, bool, error) {
	raw, ok := os.LookupEnv(name)
	if !ok {
		return Value{}, false, nil
	}
	if slices.Contains(p.envVars, name) {
		return Value{}, false, p.errorAt(line, ErrVariableCycle, "%s: environment variable $%s refers back to itself", path, name)
	}
	saved := p.cursor
	p.cursor = cursor{buf: []byte(raw), line: line, file: saved.file}
	p.envVars = append(p.envVars, name)
	v, err := p.envValue(path)
	p.envVars = p.envVars[:len(p.envVars)-1]
	p.cursor = saved
	if errors.Is(err, ErrSyntax) {
		return p.scalar(KindString, raw, path, line), true, nil
	}
	// Lines inside the variable's value mean nothing to the reader of the
	// file: point at the reference.
	var e *Error
	if errors.As(err, &e) {
		e.Line = line
	}
	return v, err == nil, err
}

// envValue reads the one value an environment variable holds.
func (p *parser) envValue(path string) (Value, error) {
	p.skipBlank(true)
	v, err := p.value(path)
	if err != nil {
		return Value{}, err
	}
	if p.skipBlank(true); !p.eof() {
		return Value{}, p.syntax("unexpected %s after the value", p.found())
	}
	return v, nil
}

// rebase copies v to sit at path, renaming the paths inside it, so that
// errors about a value reached through a variable name where it is used.
func rebase(v Value, path string) Value {
	v.path = path
	switch v.kind {
	case KindArray:
		arr := make([]Value, len(v.arr))
		for i, e := range v.arr {
			arr[i] = rebase(e, path+"["+strconv.Itoa(i)+"]")
		}
		v.arr = arr
	case KindMap:
		m := &Map{entries: make([]entry, len(v.m.entries)), index: v.m.index}
		for i, e := range v.m.entries {
			m.entries[i] = entry{key: e.key, val: rebase(e.val, joinKey(path, e.key))}
		}
		v.m = m
	}
	return v
}
