//go:build unix

package jetstream_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// The migration killed midway (SIGKILL, hence unix only): the next start
// completes it.

const migrateChildEnv = "SKIFF_MIGRATE_CHILD"

// TestMigrationCrashChild is the child of TestMigrationCrash: it starts
// JetStream on the directory the environment names, killing itself with
// SIGKILL at the migration step it names. Run alone it does nothing.
func TestMigrationCrashChild(t *testing.T) {
	env := os.Getenv(migrateChildEnv)
	if env == "" {
		t.Skip("the child of TestMigrationCrash")
	}
	var dir, at string
	require.NoError(t, json.Unmarshal([]byte(env), &[]*string{&dir, &at}))
	jetstream.SetMigrateHook(func(step string) {
		if step == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	})
	s, err := server.New(server.DefaultOptions())
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: dir})
	t.Fatalf("not killed at %s: %v", at, err)
}

// TestMigrationCrash kills a server during the migration: between the new
// directory and the rename, and between the rename and LAYOUT. The next
// start completes the migration and serves every stream and consumer.
func TestMigrationCrash(t *testing.T) {
	for _, tc := range []struct {
		at      string
		oldLeft bool // streams/ is still there
	}{
		{at: "rename", oldLeft: true},
		{at: "renamed", oldLeft: false},
	} {
		t.Run(tc.at, func(t *testing.T) {
			dir := copyPreMigration(t)
			env, err := json.Marshal([]string{dir, tc.at})
			require.NoError(t, err)
			cmd := exec.Command(os.Args[0], "-test.run=^TestMigrationCrashChild$", "-test.timeout=1m")
			cmd.Env = append(os.Environ(), migrateChildEnv+"="+string(env))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", out)
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "%s", out)

			require.DirExists(t, filepath.Join(dir, "accounts", server.GlobalAccountName))
			if tc.oldLeft {
				require.DirExists(t, filepath.Join(dir, "streams", "ORDERS"))
				require.NoDirExists(t, globalStreams(dir))
			} else {
				require.NoDirExists(t, filepath.Join(dir, "streams"))
				require.DirExists(t, filepath.Join(globalStreams(dir), "ORDERS"))
			}
			require.NoFileExists(t, filepath.Join(dir, "LAYOUT"))

			b := startAliceBroker(t, dir, jetstream.Options{})
			require.NoDirExists(t, filepath.Join(dir, "streams"))
			require.FileExists(t, filepath.Join(dir, "LAYOUT"))
			verifyPreMigrationData(t, b)
		})
	}
}
