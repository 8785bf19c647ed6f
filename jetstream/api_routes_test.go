package jetstream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// routeCase is a subject, the pattern of the route it must find ("" for
// none) and what that route must capture.
type routeCase struct {
	subj, pattern string
	args          apiArgs
}

// TestRouteAPI: each subject finds the route and captures the reference
// server's subscriptions would, malformed ones none (the requester then
// sees no responders).
func TestRouteAPI(t *testing.T) {
	for _, tc := range []routeCase{
		{"INFO", "INFO", apiArgs{}},
		{"INFO.X", "", apiArgs{}},
		{"", "", apiArgs{}},
		{"STREAM.CREATE.S", "STREAM.CREATE.*", apiArgs{"S"}},
		{"STREAM.CREATE.", "STREAM.CREATE.*", apiArgs{""}},
		{"STREAM.CREATE.S.T", "", apiArgs{}},
		{"STREAM.CREATE", "", apiArgs{}},
		{"STREAM.NAMES", "STREAM.NAMES", apiArgs{}},
		{"STREAM.NAMES.S", "", apiArgs{}},
		{"STREAM.MSG.GET.S", "STREAM.MSG.GET.*", apiArgs{"S"}},
		{"STREAM.MSG.GET", "", apiArgs{}},
		{"DIRECT.GET.S", "DIRECT.GET.*", apiArgs{"S"}},
		{"DIRECT.GET.S.a.b", "DIRECT.GET.*.>", apiArgs{"S", "a.b"}},
		{"DIRECT.GET.S.", "DIRECT.GET.*.>", apiArgs{"S", ""}},
		{"DIRECT.GET", "", apiArgs{}},
		{"CONSUMER.CREATE.S", "CONSUMER.CREATE.*", apiArgs{"S"}},
		{"CONSUMER.CREATE.S.C", "CONSUMER.CREATE.*.*", apiArgs{"S", "C"}},
		{"CONSUMER.CREATE.S.C.f.>", "CONSUMER.CREATE.*.*.>", apiArgs{"S", "C", "f.>"}},
		{"CONSUMER.CREATE", "", apiArgs{}},
		{"CONSUMER.DURABLE.CREATE.S.C", "CONSUMER.DURABLE.CREATE.*.*", apiArgs{"S", "C"}},
		{"CONSUMER.DURABLE.CREATE.S", "", apiArgs{}},
		{"CONSUMER.DURABLE.UPDATE.S.C", "", apiArgs{}},
		{"CONSUMER.INFO.S.C", "CONSUMER.INFO.*.*", apiArgs{"S", "C"}},
		{"CONSUMER.INFO.S", "", apiArgs{}},
		{"CONSUMER.INFO.S.C.D", "", apiArgs{}},
		{"CONSUMER.NAMES.S", "CONSUMER.NAMES.*", apiArgs{"S"}},
		{"CONSUMER.NAMES.S.C", "", apiArgs{}},
		{"CONSUMER.MSG.NEXT.S.C", "CONSUMER.MSG.NEXT.>", apiArgs{"S.C"}},
		{"CONSUMER.MSG.NEXT.", "CONSUMER.MSG.NEXT.>", apiArgs{""}},
		{"CONSUMER.MSG.NEXT", "", apiArgs{}},
	} {
		t.Run(tc.subj, func(t *testing.T) {
			r, a := routeAPI(tc.subj)
			if tc.pattern == "" {
				require.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			require.Equal(t, tc.pattern, strings.Join(r.toks, "."))
			require.Equal(t, tc.args, a)
		})
	}
}

// TestRouteAPIUnshadowed: every route answers a subject written as its
// pattern, so no route is shadowed by one before it; every request about
// one stream goes to that stream's worker, the account-wide ones to the
// API worker, and only pull requests stay on the requester.
func TestRouteAPIUnshadowed(t *testing.T) {
	for i := range apiRoutes {
		want := &apiRoutes[i]
		pattern := strings.Join(want.toks, ".")
		subj := strings.NewReplacer("*", "x", ">", "y.z").Replace(pattern)
		got, _ := routeAPI(subj)
		require.Same(t, want, got, pattern)
		switch pattern {
		case "CONSUMER.MSG.NEXT.>":
			require.Equal(t, onRequester, want.worker, pattern)
			require.NotNil(t, want.direct, pattern)
		case "INFO", "STREAM.NAMES", "STREAM.LIST":
			require.Equal(t, onAPIWorker, want.worker, pattern)
			require.NotNil(t, want.answer, pattern)
		default:
			require.Equal(t, onStreamWorker, want.worker, pattern)
			require.NotNil(t, want.answer, pattern)
		}
	}
}

// TestRouteAPIAllocs: routing a pull request allocates nothing.
func TestRouteAPIAllocs(t *testing.T) {
	subj := "CONSUMER.MSG.NEXT.ORDERS.worker"
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if r, _ := routeAPI(subj); r == nil {
			t.Fatal("no route")
		}
	}))
}

// TestRouteKinds: the response type an account without JetStream answers
// a route with (its kind) is the one the route's handler answers with.
func TestRouteKinds(t *testing.T) {
	opts := server.DefaultOptions()
	opts.Host, opts.Port = "127.0.0.1", server.RandomPort
	s, err := server.New(opts)
	require.NoError(t, err)
	js, err := New(s, Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	defer func() { _ = js.Close() }()
	ja := js.account(server.GlobalAccountName)
	for i := range apiRoutes {
		r := &apiRoutes[i]
		if r.answer == nil || r.kind == "" || r.kind == unanswered {
			continue
		}
		subj := strings.NewReplacer("*", "S", ">", "s").Replace(strings.Join(r.toks, "."))
		_, args := routeAPI(subj)
		b, err := json.Marshal(r.answer(ja, apiRequest{ja: ja, subject: subj}, args))
		require.NoError(t, err)
		var v struct{ Type string }
		require.NoError(t, json.Unmarshal(b, &v))
		require.Equal(t, typePrefix+r.kind+"_response", v.Type, subj)
	}
}

// TestRouteTargets: in a cluster, the meta leader answers the account-wide
// APIs and the changes of streams (their placement too), each with an
// answer of its own; the
// stream's server answers everything about one stream; every route has a
// target.
func TestRouteTargets(t *testing.T) {
	meta := map[string]bool{"INFO": true, "STREAM.CREATE.*": true, "STREAM.UPDATE.*": true,
		"STREAM.DELETE.*": true, "STREAM.NAMES": true, "STREAM.LIST": true, "STREAM.PEER.REMOVE.*": true}
	for _, r := range apiRoutes {
		pattern := strings.Join(r.toks, ".")
		t.Run(pattern, func(t *testing.T) {
			if meta[pattern] {
				require.Equal(t, targetMeta, r.target)
				require.NotNil(t, r.meta, "the meta leader's answer")
				return
			}
			require.Equal(t, targetStream, r.target)
			require.Nil(t, r.meta)
			require.True(t, strings.Contains(pattern, "*") || strings.HasSuffix(pattern, ">"), "a stream route captures the stream")
		})
	}
}
