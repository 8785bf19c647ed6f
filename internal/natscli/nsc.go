package natscli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// NSC runs the pinned nsc (tools/nsc, built into tools/bin by `make
// tools`) with its stores, keys and configuration in one private
// directory, so that nothing of the user's is read or written.
type NSC struct {
	t   testing.TB
	bin string
	dir string
	env []string
}

// NewNSC returns an nsc with an empty private directory.
func NewNSC(t testing.TB) *NSC {
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, ".config")}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "NSC_"), strings.HasPrefix(kv, "NKEYS_"), strings.HasPrefix(kv, "NATS_"),
			strings.HasPrefix(kv, "HOME="), strings.HasPrefix(kv, "XDG_CONFIG_HOME="):
		default:
			env = append(env, kv)
		}
	}
	return &NSC{t: t, bin: toolPath(t, "nsc"), dir: dir, env: env}
}

// Run runs nsc to completion and returns its output (stdout and stderr),
// failing the test unless it exits 0 within Timeout.
func (n *NSC) Run(args ...string) string {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.bin, append([]string{"--all-dirs", filepath.Join(n.dir, "nsc")}, args...)...)
	cmd.Env = n.env
	out, err := cmd.CombinedOutput()
	require.NoError(n.t, err, "nsc %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// Path returns the path of a file nsc wrote, relative to its directory
// (creds/OPERATOR/ACCOUNT/USER.creds, say).
func (n *NSC) Path(rel string) string { return filepath.Join(n.dir, "nsc", rel) }
