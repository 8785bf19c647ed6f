package store

import (
	"encoding/binary"
	"fmt"
)

// nextGoodOp finds, at or after offset from in a consumer log b, the next
// whole record that checks out (its op, length and checksum) and is newer
// than lsn, so that replay can go on past damage in the middle of the log.
func nextGoodOp(b []byte, from int, lsn uint64) (int, bool) {
	for p := from; p+opHeaderSize <= len(b); p++ {
		r := b[p:]
		n := int(binary.LittleEndian.Uint32(r))
		op := r[16]
		if !validOp(op) || n != opSize(op) || n > len(r) {
			continue
		}
		if recordCRC(r[:n]) != binary.LittleEndian.Uint32(r[4:]) {
			continue
		}
		if binary.LittleEndian.Uint64(r[8:]) <= lsn {
			continue
		}
		return p, true
	}
	return 0, false
}

// writeFileAtomic writes b to name through a temporary file.
func writeFileAtomic(fs FS, name string, b []byte) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err != nil {
		_ = fs.Remove(tmp)
		return fmt.Errorf("store: write %s: %w", name, err)
	}
	return nil
}
