package store

import "io"

// appendFile is a file written only at its end. A failed or short write is
// undone by truncating back, so a full disk never leaves a partial record
// behind; if the undo fails too, the file is marked broken and the undo is
// retried before the next write.
type appendFile struct {
	f      File
	size   int64 // bytes of whole, good writes; the write offset
	broken bool
}

// append writes the parts, one after the other, in full or, on error,
// leaves the file as it was (or broken, to be repaired by the next append).
func (a *appendFile) append(parts ...[]byte) error {
	if a.broken {
		if err := a.rewind(); err != nil {
			return err
		}
	}
	var total int64
	for _, b := range parts {
		if len(b) == 0 {
			continue
		}
		n, err := a.f.Write(b)
		if err == nil && n < len(b) {
			err = io.ErrShortWrite
		}
		if err != nil {
			_ = a.rewind() // on failure it marks the file broken
			return err
		}
		total += int64(n)
	}
	a.size += total
	return nil
}

// rewind cuts the file back to its good size.
func (a *appendFile) rewind() error {
	if err := a.f.Truncate(a.size); err != nil {
		a.broken = true
		return err
	}
	if _, err := a.f.Seek(a.size, io.SeekStart); err != nil {
		a.broken = true
		return err
	}
	a.broken = false
	return nil
}
