package server

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/skiffmq/skiff/store/vfs"
)

// The full resolver keeps its account JWTs in one directory, as
// nats-server's (DirJWTStore, unsharded), so that a directory written by
// one can be read by the other:
//
//	<dir>/<account public key>.jwt           the account's JWT
//	<dir>/<account public key>.jwt.deleted   a deleted one (allow_delete without hard_delete)
//
// A JWT is written to a temporary file (<key>.jwt.tmp), synced and
// renamed over the old one, and the directory synced (vfs.WriteFile): after a crash the file holds the old
// JWT or the new one, never a torn mix. The JWTs are also held in memory
// (at most Limit of them), so that a lookup, on a client's or a route's
// read loop, never waits on the disk.

// Why the full resolver refuses a JWT or a delete.
var (
	errResolverFull    = errors.New("jwt store is full")
	errResolverOlder   = errors.New("the stored JWT of the account was issued later")
	errResolverSubject = errors.New("jwt subject nkey and provided nkey do not match")
	errResolverNoDel   = errors.New("delete must be enabled in server config")
)

const (
	dirJWTExt     = ".jwt"
	dirDeletedExt = ".deleted"
	dirTempExt    = ".tmp" // vfs.WriteFile's
)

// dirStore is the full resolver's directory. Safe for concurrent use.
type dirStore struct {
	fs         vfs.FS
	dir        string
	limit      int
	allowDel   bool
	hardDelete bool

	mu   sync.Mutex
	jwts map[string]string // by account public key
	// hash is the XOR of the SHA-256 of every JWT held: two stores with
	// the same JWTs have the same hash, whatever the order they came in
	// (nats-server's, compared by $SYS.REQ.CLAIMS.PACK).
	hash [sha256.Size]byte
}

// openDirStore opens (creating it if need be) the directory of o and
// reads its JWTs. A file that is not an account JWT of the key it is
// named by is left alone and reported in skipped; leftover temporary
// files of an interrupted write are removed.
func openDirStore(fsys vfs.FS, o *ResolverOptions) (st *dirStore, skipped []error, err error) {
	st = &dirStore{fs: fsys, dir: o.Dir, limit: cmp.Or(o.Limit, DefaultResolverLimit), allowDel: o.AllowDelete,
		hardDelete: o.HardDelete, jwts: map[string]string{}}
	if err := fsys.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("resolver dir: %w", err)
	}
	names, err := fsys.ReadDir(o.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("resolver dir: %w", err)
	}
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, dirJWTExt+dirTempExt):
			_ = fsys.Remove(filepath.Join(o.Dir, name)) // a write a crash interrupted
			continue
		case !strings.HasSuffix(name, dirJWTExt):
			continue
		}
		pub := strings.TrimSuffix(name, dirJWTExt)
		b, err := vfs.ReadFile(fsys, filepath.Join(o.Dir, name))
		if err != nil {
			skipped = append(skipped, fmt.Errorf("%s: %w", name, err))
			continue
		}
		raw := strings.TrimSpace(string(b))
		if err := checkStored(pub, raw); err != nil {
			skipped = append(skipped, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if len(st.jwts) >= st.limit {
			skipped = append(skipped, fmt.Errorf("%s: %w (limit %d)", name, errResolverFull, st.limit))
			continue
		}
		st.put(pub, raw)
	}
	return st, skipped, nil
}

// checkStored checks that raw is an account JWT of the account pub; its
// signature and trust are the server's to check.
func checkStored(pub, raw string) error {
	if !nkeys.IsValidPublicAccountKey(pub) {
		return fmt.Errorf("%q is not an account public key", pub)
	}
	ac, err := jwt.DecodeAccountClaims(raw)
	if err != nil {
		return err
	}
	if ac.Subject != pub {
		return errResolverSubject
	}
	return nil
}

// put holds raw as pub's JWT, in place of the one held. Called with mu
// held, or before the store is shared.
func (st *dirStore) put(pub, raw string) {
	if old, ok := st.jwts[pub]; ok {
		xorHash(&st.hash, old)
	}
	st.jwts[pub] = raw
	xorHash(&st.hash, raw)
}

func xorHash(h *[sha256.Size]byte, raw string) {
	sum := sha256.Sum256([]byte(raw))
	for i := range h {
		h[i] ^= sum[i]
	}
}

// load returns the JWT of pub, or errAccountMissing.
func (st *dirStore) load(pub string) (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if raw, ok := st.jwts[pub]; ok {
		return raw, nil
	}
	return "", errAccountMissing
}

// saveIfNewer stores raw as the JWT of the account pub, on disk then in
// memory, unless the store holds that very JWT (changed is false) or one
// issued later (errResolverOlder), or holding one more would pass the
// limit (errResolverFull).
func (st *dirStore) saveIfNewer(pub, raw string) (changed bool, err error) {
	if err := checkStored(pub, raw); err != nil {
		return false, err
	}
	nc, err := jwt.DecodeGeneric(raw)
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if old, ok := st.jwts[pub]; ok {
		// nats-server takes two JWTs with the same ID for one; but the
		// ID hashes only the JWT's standard fields, so two JWTs issued
		// in the same second share it: Skiff compares the JWTs whole.
		if old == raw {
			return false, nil
		}
		if oc, err := jwt.DecodeGeneric(old); err == nil && oc.IssuedAt > nc.IssuedAt {
			return false, errResolverOlder
		}
	} else if len(st.jwts) >= st.limit {
		return false, fmt.Errorf("%w (limit %d)", errResolverFull, st.limit)
	}
	if err := vfs.WriteFile(st.fs, filepath.Join(st.dir, pub+dirJWTExt), []byte(raw)); err != nil {
		return false, err
	}
	st.put(pub, raw)
	return true, nil
}

// remove deletes the account pub's JWT: renamed <key>.jwt.deleted, or
// removed with hardDelete. It reports whether the store held it.
func (st *dirStore) remove(pub string) (bool, error) {
	if !st.allowDel {
		return false, errResolverNoDel
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	raw, ok := st.jwts[pub]
	if !ok {
		return false, nil
	}
	path := filepath.Join(st.dir, pub+dirJWTExt)
	var err error
	if st.hardDelete {
		err = st.fs.Remove(path)
	} else {
		err = st.fs.Rename(path, path+dirDeletedExt)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	if err := vfs.SyncDir(st.fs, st.dir); err != nil {
		return false, err
	}
	delete(st.jwts, pub)
	xorHash(&st.hash, raw)
	return true, nil
}

// list returns the public keys of the accounts held, sorted.
func (st *dirStore) list() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	keys := make([]string, 0, len(st.jwts))
	for k := range st.jwts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// all returns the JWTs held by account public key.
func (st *dirStore) all() map[string]string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make(map[string]string, len(st.jwts))
	for k, v := range st.jwts {
		out[k] = v
	}
	return out
}

// sum returns the hash of what the store holds.
func (st *dirStore) sum() [sha256.Size]byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.hash
}
