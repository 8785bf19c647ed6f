package multiraft_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// TestScripts runs the data-driven scripts of testdata/*.txt against a
// harness: one command a line, # for comments.
//
//	servers N                      N servers (first line)
//	group G voters=1,2,3           a group, bootstrapped on its voters
//	campaign G node=N              N campaigns for G
//	propose G node=N data=x [count=K]   K proposals x0..x(K-1) (or one, x)
//	forget G node=N                N forgets G's leader
//	transfer G node=N to=M         N hands G's leadership to M
//	net drop=P dup=P delay=T reorder=on|off   faults from now on
//	partition 1|2,3                cut the links between the sets
//	heal | crash N | restart N | wipe N
//	linkdown N peer=M | linkup N peer=M   tell N its link to M went down/up
//	stabilize                      deliver, save and process until quiet
//	tick [K]                       K rounds of: tick every server, stabilize
//	mark G                         remember G's leader and term
//	settle [K]                     heal, restart, converge within K ticks
//	expect leader G = N | in N,M | none | unchanged
//	expect applied G = a,b,c [on=1,2]   data applied, in order
//	expect held G node=N = wiped|none
//	expect campaign-refused G node=N
//
// The harness checks its invariants all along (committed entries agree,
// one leader per term, held replicas grant no vote).
func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			runScript(t, f)
		})
	}
}

type scriptRun struct {
	t     *testing.T
	h     *harness
	file  string
	line  int
	marks map[uint64][2]uint64
}

func runScript(t *testing.T, file string) {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	r := &scriptRun{t: t, file: file, marks: map[uint64][2]uint64{}}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		r.line++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r.run(strings.Fields(line))
	}
	require.NoError(t, sc.Err())
}

func (r *scriptRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s:%d: "+format, append([]any{r.file, r.line}, args...)...)
}

// args splits "k=v" words after the positional ones.
func (r *scriptRun) args(words []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok && k != "" {
			kv[k] = v
		} else {
			pos = append(pos, w)
		}
	}
	return pos, kv
}

func (r *scriptRun) num(s string) uint64 {
	r.t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		r.fatalf("not a number: %q", s)
	}
	return n
}

func (r *scriptRun) ids(s string) []uint64 {
	var out []uint64
	for _, p := range strings.Split(s, ",") {
		out = append(out, r.num(p))
	}
	return out
}

func (r *scriptRun) node(kv map[string]string) *server {
	r.t.Helper()
	s := r.h.servers[r.num(kv["node"])]
	if s == nil || !s.up {
		r.fatalf("node %s is not up", kv["node"])
	}
	return s
}

func (r *scriptRun) run(words []string) {
	r.t.Helper()
	pos, kv := r.args(words[1:])
	arg := func(i int) string {
		if i >= len(pos) {
			r.fatalf("%s: missing argument %d", words[0], i+1)
		}
		return pos[i]
	}
	if r.h == nil && words[0] != "servers" {
		r.fatalf("the first command must be servers")
	}
	switch words[0] {
	case "servers":
		r.h = newHarness(r.t, 1, int(r.num(arg(0))))
	case "group":
		r.h.addGroup(r.num(arg(0)), r.ids(kv["voters"]))
	case "campaign":
		if err := r.node(kv).node.Campaign(r.num(arg(0))); err != nil {
			r.fatalf("campaign: %v", err)
		}
	case "propose":
		g, s := r.num(arg(0)), r.node(kv)
		if kv["count"] == "" {
			r.h.propose(s.id, g, kv["data"])
			return
		}
		for i := range r.num(kv["count"]) {
			r.h.propose(s.id, g, fmt.Sprintf("%s%d", kv["data"], i))
		}
	case "forget":
		if err := r.node(kv).node.ForgetLeader(r.num(arg(0))); err != nil {
			r.fatalf("forget: %v", err)
		}
	case "transfer":
		if err := r.node(kv).node.TransferLeadership(r.num(arg(0)), r.num(kv["to"])); err != nil {
			r.fatalf("transfer: %v", err)
		}
	case "net":
		f := multiraftest.Faults{Reorder: kv["reorder"] == "on"}
		f.Drop, _ = strconv.ParseFloat(kv["drop"], 64)
		f.Dup, _ = strconv.ParseFloat(kv["dup"], 64)
		f.Delay, _ = strconv.Atoi(kv["delay"])
		r.h.ft.SetFaults(f)
	case "partition":
		var sets [][]uint64
		for _, set := range strings.Split(arg(0), "|") {
			sets = append(sets, r.ids(set))
		}
		r.h.ft.Partition(sets...)
	case "heal":
		r.h.ft.Heal()
	case "crash":
		r.h.crash(r.num(arg(0)))
	case "restart":
		r.h.restart(r.num(arg(0)))
	case "wipe":
		r.h.wipe(r.num(arg(0)))
	case "linkdown", "linkup":
		s := r.h.servers[r.num(arg(0))]
		if words[0] == "linkdown" {
			s.node.LinkDown(r.num(kv["peer"]))
		} else {
			s.node.LinkUp(r.num(kv["peer"]))
		}
	case "stabilize":
		r.h.stabilize()
	case "tick":
		k := uint64(1)
		if len(pos) > 0 {
			k = r.num(pos[0])
		}
		for range k {
			r.h.tick()
			r.h.stabilize()
		}
	case "mark":
		g := r.num(arg(0))
		lead, term := r.h.leaderOf(g)
		r.marks[g] = [2]uint64{lead, term}
	case "settle":
		k := 200
		if len(pos) > 0 {
			k = int(r.num(pos[0]))
		}
		r.h.settle(k)
	case "expect":
		r.expect(words[1], pos[1:], kv)
	default:
		r.fatalf("unknown command %q", words[0])
	}
}

func (r *scriptRun) expect(what string, pos []string, kv map[string]string) {
	r.t.Helper()
	if len(pos) == 0 {
		r.fatalf("expect %s: no group", what)
	}
	g := r.num(pos[0])
	rest := pos[1:]
	switch what {
	case "leader":
		lead, term := r.h.leaderOf(g)
		switch {
		case len(rest) == 1 && rest[0] == "none":
			if lead != 0 {
				r.fatalf("group %d: leader %d, want none", g, lead)
			}
		case len(rest) == 1 && rest[0] == "unchanged":
			if m := r.marks[g]; m != [2]uint64{lead, term} {
				r.fatalf("group %d: leader %d term %d, marked %d term %d", g, lead, term, m[0], m[1])
			}
		case len(rest) == 2 && rest[0] == "=":
			if want := r.num(rest[1]); lead != want {
				r.fatalf("group %d: leader %d, want %d", g, lead, want)
			}
		case len(rest) == 2 && rest[0] == "in":
			if !slices.Contains(r.ids(rest[1]), lead) {
				r.fatalf("group %d: leader %d, want one of %s", g, lead, rest[1])
			}
		default:
			r.fatalf("expect leader: bad form %v", rest)
		}
	case "applied":
		if len(rest) != 2 || rest[0] != "=" {
			r.fatalf("expect applied: bad form %v", rest)
		}
		want := strings.Split(rest[1], ",")
		on := r.h.groups[g]
		if kv["on"] != "" {
			on = r.ids(kv["on"])
		}
		for _, id := range on {
			got := r.h.servers[id].sms[g].datas
			if !slices.Equal(got, want) {
				r.fatalf("group %d server %d applied %v, want %v", g, id, got, want)
			}
		}
	case "held":
		if len(rest) != 2 || rest[0] != "=" {
			r.fatalf("expect held: bad form %v", rest)
		}
		held, err := r.node(kv).node.Held(g)
		if err != nil || held.String() != rest[1] {
			r.fatalf("group %d node %s: held %s (%v), want %s", g, kv["node"], held, err, rest[1])
		}
	case "campaign-refused":
		if err := r.node(kv).node.Campaign(g); err == nil || !strings.Contains(err.Error(), multiraft.ErrHeld.Error()) {
			r.fatalf("group %d node %s: campaign returned %v, want ErrHeld", g, kv["node"], err)
		}
	default:
		r.fatalf("unknown expectation %q", what)
	}
}
