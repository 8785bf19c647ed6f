package broker

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// referenceBlocks maps the functions of nats-server's opts.go that read a
// block's keys to the key path TestEveryReferenceKey's rows use for that
// block ("" is the top level). Blocks Skiff refuses whole (gateway,
// leafnodes, an account's mappings, mqtt, websocket
// authorization, auth callout, ...) are absent: no key inside them can be
// read.
var referenceBlocks = map[string]string{
	"processConfigFileLine":      "",
	"parseAuthorization":         "authorization.",
	"parseUsers":                 "authorization.users[0].",
	"parseUserPermissions":       "authorization.users[0].permissions.",
	"parseSubjectPermission":     "authorization.users[0].permissions.publish.",
	"parseTLS":                   "tls.",
	"parseJetStream":             "jetstream.",
	"parseCluster":               "cluster.",
	"parseWebsocket":             "websocket.",
	"parseAccounts":              "accounts.A.",
	"parseAccountLimits":         "accounts.A.limits.",
	"parseExportStreamOrService": "accounts.A.exports[0].",
	"parseImportStreamOrService": "accounts.A.imports[0].",
	"parseAccount":               "accounts.A.imports[0].stream.",
	// parseJetStreamForAccount's first key switch is on a limit's name
	// (its switch on "enabled"/"disabled" is on a value).
	"parseJetStreamForAccount": "accounts.A.jetstream.",
}

// inBase are keys a block's rows all carry in their base configuration
// (a TLS block needs its certificate and key to load at all), so they have
// no row of their own; TestEveryReferenceKey's base configurations still
// exercise them.
var inBase = map[string][]string{
	"tls.":                          {"cert_file", "key_file"},
	"authorization.users[0].":       {"user", "password"},
	"accounts.A.imports[0].stream.": {"account", "subject"},
}

// TestReferenceKeysComplete reads the key switches of the nats-server
// version this module builds against, from its own source, and requires a
// TestEveryReferenceKey row for every key they know. The table of rows is
// written by hand; this keeps it from falling behind nats-server.
func TestReferenceKeysComplete(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/nats-io/nats-server/v2").Output()
	require.NoError(t, err, "locating nats-server's source")
	src := filepath.Join(strings.TrimSpace(string(out)), "server", "opts.go")
	reference := keySwitches(t, src)

	rows := map[string]map[string]bool{}
	for _, prefix := range referenceBlocks {
		rows[prefix] = map[string]bool{}
		for _, k := range inBase[prefix] {
			rows[prefix][k] = true
		}
	}
	for _, r := range referenceKeys() {
		for _, prefix := range referenceBlocks {
			if rest, ok := strings.CutPrefix(usersIndexZero(r.path), prefix); ok {
				rows[prefix][strings.FieldsFunc(rest, func(c rune) bool { return c == '.' || c == '[' })[0]] = true
			}
		}
	}

	for fn, prefix := range referenceBlocks {
		keys := reference[fn]
		require.GreaterOrEqual(t, len(keys), 2, "found no key switch in %s: has opts.go changed shape?", fn)
		var missing []string
		for _, k := range keys {
			if !rows[prefix][k] {
				missing = append(missing, prefix+k)
			}
		}
		sort.Strings(missing)
		require.Empty(t, missing, "nats-server's %s reads keys TestEveryReferenceKey has no row for", fn)
	}
}

// usersIndexZero writes every users[N] as users[0], so that rows about
// the second user (an nkey user) count for the users block.
func usersIndexZero(path string) string {
	i := strings.Index(path, "users[")
	if i < 0 {
		return path
	}
	j := strings.Index(path[i:], "]")
	if j < 0 {
		return path
	}
	return path[:i] + "users[0]" + path[i+j+1:]
}

// keySwitches returns, for each function of src, the string cases of its
// outermost switch on strings.ToLower(key), where key ranges over a map's
// keys (or is processConfigFileLine's parameter k): the keys that function
// reads. Switches on values (strings.ToLower(vv)) are not key switches.
func keySwitches(t *testing.T, src string) map[string][]string {
	fset := gotoken.NewFileSet()
	f, err := parser.ParseFile(fset, src, nil, 0)
	require.NoError(t, err)
	found := map[string][]string{}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		keyVars := map[string]bool{}
		if fd.Name.Name == "processConfigFileLine" {
			keyVars["k"] = true
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if rs, ok := n.(*ast.RangeStmt); ok {
				if id, ok := rs.Key.(*ast.Ident); ok {
					keyVars[id.Name] = true
				}
			}
			return true
		})
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if _, done := found[fd.Name.Name]; done {
				return false
			}
			sw, ok := n.(*ast.SwitchStmt)
			if !ok || !lowerOf(sw.Tag, keyVars) {
				return true
			}
			var keys []string
			for _, st := range sw.Body.List {
				for _, e := range st.(*ast.CaseClause).List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
						s, err := strconv.Unquote(lit.Value)
						require.NoError(t, err)
						keys = append(keys, s)
					}
				}
			}
			found[fd.Name.Name] = keys
			return false
		})
	}
	return found
}

// lowerOf reports whether e is strings.ToLower(v) for one of vars.
func lowerOf(e ast.Expr, vars map[string]bool) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "ToLower" {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "strings" {
		return false
	}
	id, ok := call.Args[0].(*ast.Ident)
	return ok && vars[id.Name]
}
