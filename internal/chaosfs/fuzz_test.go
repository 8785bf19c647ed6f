package chaosfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseRecord: a journal line parses into a record that renders back
// to the same line, or is refused; never a panic.
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{
		`boot 3`, `create "/d/f"`, `sync 4096 "/d/f"`, `trunc 0 "/d/f"`, `rename "/d/a" "/d/b c"`,
		`remove "/d/\n"`, `syncdir "/d"`, `sync -1 "/d"`, `sync 1 "rel"`, `rename "/a"`, `nope`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := parseRecord(line)
		if err != nil {
			require.ErrorIs(t, err, ErrJournal)
			return
		}
		out := r.String()
		require.NotContains(t, out, "\n", "a record is one line")
		again, err := parseRecord(out)
		require.NoError(t, err, out)
		require.Equal(t, r, again)
	})
}

// TestReplayModel: the journal's rules, record by record.
func TestReplayModel(t *testing.T) {
	journal := strings.Join([]string{
		`create "/d/a"`,        // a: made, not durable
		`sync 10 "/d/b"`,       // b: 10, durable
		`trunc 4 "/d/b"`,       // b: 4
		`create "/d/c"`,        // c: made
		`syncdir "/d"`,         // a, c: durable, empty
		`rename "/d/b" "/d/c"`, // c: b's
		`create "/e/x"`,        // x: made
		`remove "/d/a"`,        // a: gone
		`trunc 7 "/f/old"`,     // old: made before the journal, 7
		`boot 2`,
		`sync 99 "/torn`, // torn: ignored
	}, "\n")
	st, err := replay(strings.NewReader(journal))
	require.NoError(t, err)
	require.Equal(t, int64(2), st.boots)
	require.Equal(t, map[string]*fileState{
		"/d/c":   {synced: 4, durable: true},
		"/e/x":   {},
		"/f/old": {synced: 7, durable: true},
	}, st.files)
	require.Equal(t, int64(len(journal)-len(`sync 99 "/torn`)), st.end)
	_, err = replay(strings.NewReader("bad line\nboot 1\n"))
	require.ErrorIs(t, err, ErrJournal)
}
