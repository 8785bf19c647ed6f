package server_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/server"
)

// conf writes a configuration file in operator mode with the full
// resolver in dir, deletes allowed, the system account preloaded.
func (f *fullResolver) conf(dir string) string {
	conf := fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver {\n  type: full\n  dir: %q\n  allow_delete: true\n}\nresolver_preload {\n  %s: %q\n}\n",
		f.op.JWT, f.sys.Pub, dir, f.sys.Pub, f.sys.JWT)
	name := filepath.Join(f.t.TempDir(), "full.conf")
	require.NoError(f.t, os.WriteFile(name, []byte(conf), 0o600))
	return name
}

// claimsStep is one request of the claims differential: a subject and a
// body, and how to compare the answers (JSON without the server's
// identity, a LIST's accounts as a set, or the raw bytes).
type claimsStep struct {
	name, subject, body string
	raw                 bool
	// refused, if set, is why Skiff refuses what nats-server answers
	// "jwt updated": the test requires exactly that and no more.
	refused string
}

// TestDifferentialClaims sends the same claims requests (what `nsc push`,
// `nsc pull` and `nsc push --prune` send) to nats-server and Skiff, each
// with the full resolver in its own directory, and requires the same
// answers but for the answering server's identity: updates accepted and
// refused, lookups, lists, deletes allowed and refused; then which users
// connect.
func TestDifferentialClaims(t *testing.T) {
	f := newFullResolver(t)
	a := f.op.Account("A")
	b := f.op.Account("B")
	foreign := jwttest.NewOperator(t).Account("F")
	expired := f.op.Account("X", jwttest.AccountExpires(time.Now().Add(-time.Hour)))
	never := f.op.Account("NEVER")
	users := map[string]*jwttest.User{"a": a.User("u"), "b": b.User("u")}

	steps := []claimsStep{
		{name: "update A", subject: "$SYS.REQ.CLAIMS.UPDATE", body: a.JWT},
		{name: "update A again", subject: "$SYS.REQ.CLAIMS.UPDATE", body: a.JWT},
		{name: "update B on its subject", subject: "$SYS.REQ.ACCOUNT." + b.Pub + ".CLAIMS.UPDATE", body: b.JWT},
		{name: "not a JWT", subject: "$SYS.REQ.CLAIMS.UPDATE", body: "hello"},
		// nats-server stores an account JWT of an operator it does not
		// trust (its users are refused later, at CONNECT) and answers an
		// expired one "jwt updated" without storing it. Skiff refuses both
		// with an error, so that `nsc push` says what went wrong.
		{name: "foreign operator", subject: "$SYS.REQ.CLAIMS.UPDATE", body: foreign.JWT, refused: "not signed by a trusted operator"},
		{name: "expired", subject: "$SYS.REQ.CLAIMS.UPDATE", body: expired.JWT, refused: "claim is expired"},
		{name: "another account's subject", subject: "$SYS.REQ.ACCOUNT." + b.Pub + ".CLAIMS.UPDATE", body: a.JWT},
		{name: "lookup A", subject: "$SYS.REQ.ACCOUNT." + a.Pub + ".CLAIMS.LOOKUP", raw: true},
		{name: "lookup an absent account", subject: "$SYS.REQ.ACCOUNT." + never.Pub + ".CLAIMS.LOOKUP", raw: true},
		{name: "list", subject: "$SYS.REQ.CLAIMS.LIST"},
		{name: "delete signed by an account", subject: "$SYS.REQ.CLAIMS.DELETE", body: deleteSignedBy(t, a)},
		{name: "delete the system account", subject: "$SYS.REQ.CLAIMS.DELETE", body: f.op.DeleteRequest(f.sys.Pub)},
		{name: "delete B", subject: "$SYS.REQ.CLAIMS.DELETE", body: f.op.DeleteRequest(b.Pub)},
		{name: "list after the delete", subject: "$SYS.REQ.CLAIMS.LIST"},
		{name: "lookup B after the delete", subject: "$SYS.REQ.ACCOUNT." + b.Pub + ".CLAIMS.LOOKUP", raw: true},
	}

	run := func(name, url string) (answers []string, connects map[string]bool) {
		sys, err := nats.Connect(url, nats.UserCredentials(f.sys.User("admin").CredsFile(t)))
		require.NoError(t, err)
		defer sys.Close()
		for _, st := range steps {
			m, err := sys.Request(st.subject, []byte(st.body), 5*time.Second)
			require.NoError(t, err, "%s: %s", name, st.name)
			got := normalizeClaimsAnswer(t, m.Data, st.raw, foreign.Pub)
			if st.refused != "" {
				want := `"message":"jwt updated"`
				if name == "skiff" {
					want = st.refused
				}
				require.Contains(t, got, want, "%s: %s", name, st.name)
				got = "(differs)"
			}
			answers = append(answers, st.name+": "+got)
		}
		connects = map[string]bool{}
		for who, u := range users {
			nc, err := nats.Connect(url, nats.UserCredentials(u.CredsFile(t)), nats.NoReconnect())
			connects[who] = err == nil
			if nc != nil {
				nc.Close()
			}
		}
		return answers, connects
	}

	ro := referenceConfOptions(t, f.conf(t.TempDir()))
	ro.NoSystemAccount = false
	refAnswers, refConnects := run("nats-server", runReference(t, ro).ClientURL())

	bc, err := broker.LoadConfig(f.conf(t.TempDir()))
	require.NoError(t, err)
	o := bc.Server
	o.Host, o.Port, o.HTTPPort = "127.0.0.1", server.RandomPort, 0
	answers, connects := run("skiff", RunServer(t, o).ClientURL())

	require.Equal(t, refAnswers, answers)
	require.Equal(t, refConnects, connects)
	require.Equal(t, map[string]bool{"a": true, "b": false}, connects)
}

// deleteSignedBy is a delete request of acc signed by acc itself, not by
// the operator.
func deleteSignedBy(t *testing.T, acc *jwttest.Account) string {
	t.Helper()
	gc := jwt.NewGenericClaims(acc.Pub)
	gc.Data["accounts"] = []string{acc.Pub}
	req, err := gc.Encode(acc.Key)
	require.NoError(t, err)
	return req
}

// normalizeClaimsAnswer renders an answer for comparison: raw bytes as
// they are; JSON without the server's identity, a list's accounts
// sorted, without the account unlisted (nats-server's list has the
// foreign operator's account it stored).
func normalizeClaimsAnswer(t *testing.T, data []byte, raw bool, unlisted string) string {
	t.Helper()
	if raw {
		return string(data)
	}
	var v map[string]any
	require.NoError(t, json.Unmarshal(data, &v), string(data))
	delete(v, "server")
	if list, ok := v["data"].([]any); ok {
		list = slices.DeleteFunc(list, func(x any) bool { return x == unlisted })
		slices.SortFunc(list, func(x, y any) int { return cmp.Compare(fmt.Sprint(x), fmt.Sprint(y)) })
		v["data"] = list
	}
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}
