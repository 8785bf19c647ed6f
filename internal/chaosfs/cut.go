package chaosfs

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
)

// Report is what a Cut did.
type Report struct {
	// Files is how many files the journal knew; Truncated and Removed how
	// many the cut shortened or removed, and Bytes how much it dropped
	// from the truncated ones.
	Files, Truncated, Removed int
	Bytes                     int64
	// Boot is the number of the boot that follows.
	Boot int64
}

func (r Report) String() string {
	return fmt.Sprintf("%d files journaled, %d truncated (%d bytes dropped), %d removed; boot %d",
		r.Files, r.Truncated, r.Bytes, r.Removed, r.Boot)
}

// Cut cuts the power of the machine whose journal is at path, once the
// process that wrote through it is gone (killed, or shut down after
// PowerOff): every file the journal knows is truncated to the size its
// last Sync saw, a file never made durable is removed, and the next Open
// of the journal is the next boot. The files are changed through the
// operating system.
func Cut(path string) (Report, error) {
	j, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return Report{}, fmt.Errorf("chaosfs: %w", err)
	}
	defer func() { _ = j.Close() }()
	st, err := openJournal(j)
	if err != nil {
		return Report{}, fmt.Errorf("chaosfs: %s: %w", path, err)
	}
	rep := Report{Files: len(st.files), Boot: st.boots + 1}
	var log []record
	for _, p := range slices.Sorted(maps.Keys(st.files)) {
		f := st.files[p]
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed around the journal
		case err != nil:
			return rep, fmt.Errorf("chaosfs: %w", err)
		case !f.durable:
			if err := os.Remove(p); err != nil {
				return rep, fmt.Errorf("chaosfs: %w", err)
			}
			rep.Removed++
			log = append(log, record{op: opRemove, path: p})
		case fi.Size() > f.synced:
			if err := os.Truncate(p, f.synced); err != nil {
				return rep, fmt.Errorf("chaosfs: %w", err)
			}
			rep.Truncated++
			rep.Bytes += fi.Size() - f.synced
		}
	}
	log = append(log, record{op: opBoot, n: rep.Boot})
	for _, r := range log {
		if _, err := j.WriteString(r.String() + "\n"); err != nil {
			return rep, fmt.Errorf("chaosfs: journal: %w", err)
		}
	}
	return rep, nil
}
