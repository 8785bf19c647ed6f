package chaosfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrJournal is a journal line that is not a record.
var ErrJournal = errors.New("chaosfs: bad journal record")

// op is a journal record's kind.
type op string

const (
	opBoot    op = "boot"
	opCreate  op = "create"
	opSync    op = "sync"
	opTrunc   op = "trunc"
	opRename  op = "rename"
	opRemove  op = "remove"
	opSyncDir op = "syncdir"
)

// record is one line of the journal: n is boot's count or sync's and
// trunc's size; to is rename's new name.
type record struct {
	op       op
	n        int64
	path, to string
}

// String renders r as its journal line, without the newline.
func (r record) String() string {
	switch r.op {
	case opBoot:
		return fmt.Sprintf("%s %d", r.op, r.n)
	case opSync, opTrunc:
		return fmt.Sprintf("%s %d %s", r.op, r.n, strconv.Quote(r.path))
	case opRename:
		return fmt.Sprintf("%s %s %s", r.op, strconv.Quote(r.path), strconv.Quote(r.to))
	}
	return fmt.Sprintf("%s %s", r.op, strconv.Quote(r.path))
}

// parseRecord reads one journal line (without its newline).
func parseRecord(line string) (record, error) {
	bad := func(why string) (record, error) {
		return record{}, fmt.Errorf("%w: %s: %.80q", ErrJournal, why, line)
	}
	name, rest, _ := strings.Cut(line, " ")
	r := record{op: op(name)}
	number := func() bool {
		var s string
		s, rest, _ = strings.Cut(rest, " ")
		n, err := strconv.ParseInt(s, 10, 64)
		r.n = n
		return err == nil && n >= 0
	}
	path := func() (string, bool) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		p, err := strconv.Unquote(q)
		rest = strings.TrimPrefix(rest[len(q):], " ")
		return p, err == nil && filepath.IsAbs(p)
	}
	var ok bool
	switch r.op {
	case opBoot:
		ok = number()
	case opSync, opTrunc:
		if ok = number(); ok {
			r.path, ok = path()
		}
	case opRename:
		if r.path, ok = path(); ok {
			r.to, ok = path()
		}
	case opCreate, opRemove, opSyncDir:
		r.path, ok = path()
	default:
		return bad("unknown record")
	}
	if !ok || rest != "" {
		return bad("malformed " + name)
	}
	return r, nil
}

// fileState is what a cut keeps of a file the journal knows.
type fileState struct {
	// synced is the size the last Sync saw (or less, after a truncation).
	synced int64
	// durable: the file survives a cut (a Sync of it, or of its directory
	// after it was made).
	durable bool
}

// state is the journal replayed: what a cut keeps.
type state struct {
	files map[string]*fileState
	boots int64
	// end is the offset after the last whole line: a line after it was
	// torn by a kill, and is cut off before the journal is appended to.
	end int64
}

// replay reads a journal. A last line without its newline (a write the
// process did not finish) is ignored; any other bad line is an error.
func replay(r io.Reader) (state, error) {
	st := state{files: map[string]*fileState{}}
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if errors.Is(err, io.EOF) {
			return st, nil // a torn last line, or none
		}
		if err != nil {
			return st, err
		}
		rec, err := parseRecord(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return st, fmt.Errorf("line at offset %d: %w", st.end, err)
		}
		st.apply(rec)
		st.end += int64(len(line))
	}
}

// apply changes the state as rec says.
func (st *state) apply(rec record) {
	f := st.files[rec.path]
	switch rec.op {
	case opBoot:
		st.boots = rec.n
	case opCreate:
		st.files[rec.path] = &fileState{}
	case opSync:
		st.files[rec.path] = &fileState{synced: rec.n, durable: true}
	case opTrunc:
		if f == nil {
			// A file the journal did not know (made before it began):
			// what the truncation left was on disk.
			st.files[rec.path] = &fileState{synced: rec.n, durable: true}
			return
		}
		f.synced = min(f.synced, rec.n)
	case opRename:
		delete(st.files, rec.to)
		if f != nil {
			st.files[rec.to] = f
			delete(st.files, rec.path)
		}
	case opRemove:
		delete(st.files, rec.path)
	case opSyncDir:
		for p, f := range st.files {
			if filepath.Dir(p) == rec.path {
				f.durable = true
			}
		}
	}
}
