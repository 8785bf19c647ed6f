package server

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

// accountJWTAt mints an account JWT for a new key, or for kp if given,
// signed by a fresh operator; it returns the key, its public key and the
// JWT.
func accountJWTAt(t *testing.T, kp nkeys.KeyPair, name string) (nkeys.KeyPair, string, string) {
	t.Helper()
	if kp == nil {
		var err error
		kp, err = nkeys.CreateAccount()
		require.NoError(t, err)
	}
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	ac := jwt.NewAccountClaims(pub)
	ac.Name = name
	raw, err := ac.Encode(op)
	require.NoError(t, err)
	return kp, pub, raw
}

// TestDirStore: what the full resolver's directory keeps, and refuses.
func TestDirStore(t *testing.T) {
	dir := t.TempDir()
	o := &ResolverOptions{Dir: dir, Limit: 2, AllowDelete: true}
	st, skipped, err := openDirStore(vfs.OS, o)
	require.NoError(t, err)
	require.Empty(t, skipped)
	empty := st.sum()

	kpA, a, rawA := accountJWTAt(t, nil, "A")
	changed, err := st.saveIfNewer(a, rawA)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = st.saveIfNewer(a, rawA)
	require.NoError(t, err)
	require.False(t, changed, "the same JWT again changes nothing")
	_, b, rawB := accountJWTAt(t, nil, "B")
	_, err = st.saveIfNewer(a, rawB)
	require.ErrorIs(t, err, errResolverSubject)
	_, err = st.saveIfNewer(b, rawB)
	require.NoError(t, err)
	_, c, rawC := accountJWTAt(t, nil, "C")
	_, err = st.saveIfNewer(c, rawC)
	require.ErrorIs(t, err, errResolverFull, "limit 2")

	// A newer JWT of A replaces it; then the older one is refused.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	_, _, rawA2 := accountJWTAt(t, kpA, "A2")
	_, err = st.saveIfNewer(a, rawA2)
	require.NoError(t, err)
	_, err = st.saveIfNewer(a, rawA)
	require.ErrorIs(t, err, errResolverOlder)

	// Reopened: the same JWTs, the same hash, whatever the order.
	withAB := st.sum()
	require.NotEqual(t, empty, withAB)
	st2, skipped, err := openDirStore(vfs.OS, o)
	require.NoError(t, err)
	require.Empty(t, skipped)
	require.Equal(t, withAB, st2.sum())
	got, err := st2.load(a)
	require.NoError(t, err)
	require.Equal(t, rawA2, got)

	held, err := st2.remove(b)
	require.NoError(t, err)
	require.True(t, held)
	require.FileExists(t, filepath.Join(dir, b+".jwt.deleted"))
	require.Equal(t, []string{a}, st2.list())
	_, err = st2.load(b)
	require.ErrorIs(t, err, errAccountMissing)
}

// TestDirStoreBadFiles: at open, a torn write's temporary file is
// removed, and a file that is not an account JWT of the key it is named
// by is reported and left alone.
func TestDirStoreBadFiles(t *testing.T) {
	dir := t.TempDir()
	_, a, rawA := accountJWTAt(t, nil, "A")
	_, b, _ := accountJWTAt(t, nil, "B")
	require.NoError(t, os.WriteFile(filepath.Join(dir, a+".jwt"), []byte(rawA+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, a+".jwt.tmp"), []byte(rawA[:20]), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, b+".jwt"), []byte(rawA), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "garbage.jwt"), []byte("nope"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("not mine"), 0o644))
	st, skipped, err := openDirStore(vfs.OS, &ResolverOptions{Dir: dir})
	require.NoError(t, err)
	require.Len(t, skipped, 2, "%v", skipped)
	require.Equal(t, []string{a}, st.list())
	require.NoFileExists(t, filepath.Join(dir, a+".jwt.tmp"))
	require.FileExists(t, filepath.Join(dir, b+".jwt"), "left for an operator to look at")
}

// TestDirStoreFullDisk: a JWT that cannot be written is refused with the
// disk's error, and the store keeps what it had, on disk and in memory.
func TestDirStoreFullDisk(t *testing.T) {
	disk := storetest.NewFaultFS(vfs.OS)
	dir := t.TempDir()
	st, _, err := openDirStore(disk, &ResolverOptions{Dir: dir})
	require.NoError(t, err)
	kp, a, raw := accountJWTAt(t, nil, "A")
	_, err = st.saveIfNewer(a, raw)
	require.NoError(t, err)
	before := st.sum()
	disk.SetFull(true)
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	_, _, raw2 := accountJWTAt(t, kp, "A2")
	_, err = st.saveIfNewer(a, raw2)
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
	require.Equal(t, before, st.sum())
	got, err := st.load(a)
	require.NoError(t, err)
	require.Equal(t, raw, got)
	disk.SetFull(false)
	st2, skipped, err := openDirStore(vfs.OS, &ResolverOptions{Dir: dir})
	require.NoError(t, err)
	require.Empty(t, skipped)
	got, err = st2.load(a)
	require.NoError(t, err)
	require.Equal(t, raw, got, "the old JWT is whole on disk")
}
