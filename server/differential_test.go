package server_test

// Differential tests run the same client session against Skiff and against
// the reference nats-server, started in process, and require both to answer
// the same. Nothing here says what the right answer is: the reference
// server's answer is, whatever it is.
//
// The raw-protocol sessions are scripts in testdata/diff/*.txt, one or more
// cases per file:
//
//	# a comment
//	case verbose-ordering          starts a case; a subtest of the file's
//	option max_payload 16          server options, the same for both servers
//	c1 send SUB foo 1\r\n          bytes for connection c1 (dialled on first use)
//	c2 send PUB foo 2\r\nhi\r\n
//	c1 sync                        PING, then read until its PONG (or close)
//	c1 expect-close                read until the server closes
//	c1 settle                      wait a moment (diffSettle): a server
//	                               releases a closed connection after the
//	                               client saw the close, nats-server too
//	conf accounts                  instead of options: both servers load
//	                               testdata/diff/conf/accounts.conf
//
// Options: max_payload, max_control_line, max_subs, max_connections,
// auth_timeout (a duration), token, username and password (one user),
// user NAME PASSWORD (one of a list), and pub_allow, pub_deny, sub_allow,
// sub_deny NAME SUBJECT... for a listed user's permissions. A conf file is
// what the options cannot say (accounts): Skiff reads it with
// broker.LoadConfig, nats-server with its ProcessConfigFile; the listen
// address and keep-alive of both are the harness's.
//
// Send text is taken literally after template expansion ({{repeat "a" 100}};
// {{sign "SEED"}}: the signature of the nonce of the connection's INFO
// by that nkey seed, for an nkey user's CONNECT; {{reply}}: the reply
// subject of the last message the connection received, for a responder)
// and with the escapes \r \n \t \s (space) \\ and \xHH. A sync also waits
// for the PONGs owed to PINGs the script sent itself. Everything each
// connection receives is recorded; at each sync and expect-close the
// connection's new output is rendered into a transcript, and the two
// servers' transcripts must be equal. Output is attributed only at those
// points, so a script synchronizes every connection whose output it wants
// to see in order: each connection's own stream is deterministic even
// where the order across connections is not. At the end of a case every
// connection still open is synchronized once more.
//
// Rendering normalizes what legitimately differs between two servers:
//   - INFO is reduced to a fixed set of keys, compared by value where both
//     servers must agree (proto, headers, max_payload, auth_required, ...)
//     and by JSON type where they cannot (server_id, client_id, port, ...).
//   - PING from the server (its keep-alive) is dropped.
//   - A run of identical messages delivered on one connection to several
//     sids (one publish matching several subscriptions) is sorted, since
//     the order among the copies is not part of the protocol.
//   - A connection reset by the server counts as a close.
//   - A reply subject of a service import's response table (_R_.xxx.yyy,
//     random in both servers) is shown as _R_.<n>, n counting the distinct
//     ones the connection received, in messages and in -ERR lines; the
//     Nats-Request-Info header's JSON is shown with its keys sorted and,
//     where servers differ by nature (start, id, server, rtt), the value's
//     type only, and the message's sizes are those of what is shown.

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// diffTimeout bounds every wait of a script step. Both servers answer on
// loopback in well under a millisecond; the bound is only reached when a
// server does not answer at all (a divergence, or a bug).
const diffTimeout = 1500 * time.Millisecond

// diffSettle is how long a settle step waits: longer than either server
// takes to release a connection it closed, on a loaded machine.
const diffSettle = 250 * time.Millisecond

// diffUser is a user both servers can be configured with.
type diffUser struct {
	name, pass                           string
	pubAllow, pubDeny, subAllow, subDeny []string
}

// diffConfig is a server configuration both servers can express. Zero
// fields mean each server's default (which are the same).
type diffConfig struct {
	maxPayload, maxControlLine, maxSubs, maxConns int
	authTimeout                                   time.Duration
	token, username, password                     string
	users                                         []*diffUser
	conf                                          string // a configuration file instead of the above
}

func (c *diffConfig) user(name string) (*diffUser, error) {
	for _, u := range c.users {
		if u.name == name {
			return u, nil
		}
	}
	return nil, fmt.Errorf("no user %q (declare it with option user first)", name)
}

func (c *diffConfig) skiffOptions() server.Options {
	o := server.Options{
		MaxPayload:       c.maxPayload,
		MaxControlLine:   c.maxControlLine,
		MaxSubscriptions: c.maxSubs,
		MaxConnections:   c.maxConns,
		AuthTimeout:      c.authTimeout,
		Token:            c.token,
		Username:         c.username,
		Password:         c.password,
		PingInterval:     time.Hour,
	}
	for _, u := range c.users {
		su := server.User{Name: u.name, Password: u.pass}
		if u.pubAllow != nil || u.pubDeny != nil || u.subAllow != nil || u.subDeny != nil {
			su.Permissions = &server.Permissions{
				Publish:   server.SubjectPermission{Allow: u.pubAllow, Deny: u.pubDeny},
				Subscribe: server.SubjectPermission{Allow: u.subAllow, Deny: u.subDeny},
			}
		}
		o.Users = append(o.Users, su)
	}
	return o
}

func (c *diffConfig) referenceOptions() *natsserver.Options {
	o := &natsserver.Options{
		Host:                  "127.0.0.1",
		Port:                  -1,
		NoLog:                 true,
		NoSigs:                true,
		NoSystemAccount:       true,
		DisableShortFirstPing: true,
		PingInterval:          time.Hour,
		MaxPayload:            int32(c.maxPayload),
		MaxControlLine:        int32(c.maxControlLine),
		MaxSubs:               c.maxSubs,
		MaxConn:               c.maxConns,
		AuthTimeout:           c.authTimeout.Seconds(),
		Authorization:         c.token,
		Username:              c.username,
		Password:              c.password,
	}
	perm := func(allow, deny []string) *natsserver.SubjectPermission {
		if allow == nil && deny == nil {
			return nil
		}
		return &natsserver.SubjectPermission{Allow: allow, Deny: deny}
	}
	for _, u := range c.users {
		nu := &natsserver.User{Username: u.name, Password: u.pass}
		if u.pubAllow != nil || u.pubDeny != nil || u.subAllow != nil || u.subDeny != nil {
			nu.Permissions = &natsserver.Permissions{
				Publish:   perm(u.pubAllow, u.pubDeny),
				Subscribe: perm(u.subAllow, u.subDeny),
			}
		}
		o.Users = append(o.Users, nu)
	}
	return o
}

// diffStartReference starts the reference nats-server in process and shuts it
// down when the test ends. It returns the client address.
func diffStartReference(t testing.TB, cfg diffConfig) string {
	t.Helper()
	o := cfg.referenceOptions()
	if cfg.conf != "" {
		o = referenceConfOptions(t, cfg.conf)
	}
	return runReference(t, o).Addr().String()
}

// referenceConfOptions reads the configuration file conf as nats-server
// does, for a server of the harness: on 127.0.0.1, a random port, without
// a system account (Skiff has none yet), logs, signals or early pings.
func referenceConfOptions(t testing.TB, conf string) *natsserver.Options {
	t.Helper()
	o, err := natsserver.ProcessConfigFile(conf)
	require.NoError(t, err)
	o.Host, o.Port, o.NoLog, o.NoSigs, o.NoSystemAccount = "127.0.0.1", -1, true, true, true
	o.DisableShortFirstPing, o.PingInterval = true, time.Hour
	return o
}

// runReference starts nats-server in process with o, waits until it
// accepts clients, and shuts it down when the test ends.
func runReference(t testing.TB, o *natsserver.Options) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(o)
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	require.True(t, ns.ReadyForConnections(5*time.Second), "nats-server did not start")
	return ns
}

// diffStartSkiff starts Skiff with the same configuration.
func diffStartSkiff(t testing.TB, cfg diffConfig) string {
	t.Helper()
	o := cfg.skiffOptions()
	if cfg.conf != "" {
		bc, err := broker.LoadConfig(cfg.conf)
		require.NoError(t, err)
		o = bc.Server
		o.Port, o.HTTPPort, o.PingInterval = server.RandomPort, 0, time.Hour
	}
	return RunServer(t, o).Addr().String()
}

// diffScript is one case of a script file.
type diffScript struct {
	name     string
	pos      string // file:line of the case line
	cfg      diffConfig
	steps    []diffStep
	differs  string   // why Skiff deliberately differs here ("" for none)
	skiffHas []string // transcript lines Skiff produces and the reference does not
}

type diffStep struct {
	conn string
	op   string // send, sync, expect-close, settle
	data []byte // for send
	src  string // the step as written, for the transcript
}

var diffTemplateFuncs = template.FuncMap{
	"repeat": strings.Repeat,
	// sign leaves a mark that the session replaces, when it sends, with
	// the signature of the connection's nonce.
	"sign": func(seed string) string { return diffSignMark + seed + diffSignMark },
	// reply leaves a mark replaced, when the session sends, by the
	// reply subject of the last message the connection received.
	"reply": func() string { return diffReplyMark },
}

const (
	diffSignMark  = "\x00sign\x00"
	diffReplyMark = "\x00reply\x00"
)

// signNonces replaces every sign mark in data with the signature of
// nonce by the mark's seed, in the URL-safe base64 clients send.
func signNonces(data []byte, nonce string) ([]byte, error) {
	for {
		i := bytes.Index(data, []byte(diffSignMark))
		if i < 0 {
			return data, nil
		}
		rest := data[i+len(diffSignMark):]
		j := bytes.Index(rest, []byte(diffSignMark))
		if j < 0 {
			return nil, errors.New("an unterminated sign mark")
		}
		kp, err := nkeys.FromSeed(rest[:j])
		if err != nil {
			return nil, err
		}
		sig, err := kp.Sign([]byte(nonce))
		if err != nil {
			return nil, err
		}
		enc := base64.RawURLEncoding.EncodeToString(sig)
		data = slices.Concat(data[:i], []byte(enc), rest[j+len(diffSignMark):])
	}
}

// parseDiffFile reads a script file.
func parseDiffFile(path string) ([]*diffScript, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var scripts []*diffScript
	var cur *diffScript
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		pos := fmt.Sprintf("%s:%d", filepath.Base(path), n)
		line := strings.TrimRight(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		if word == "case" {
			if rest == "" {
				return nil, fmt.Errorf("%s: case without a name", pos)
			}
			cur = &diffScript{name: rest, pos: pos}
			scripts = append(scripts, cur)
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%s: %q before the first case", pos, line)
		}
		if word == "differs" {
			if rest == "" {
				return nil, fmt.Errorf("%s: differs needs a reason", pos)
			}
			cur.differs = rest
			continue
		}
		if word == "skiff-has" {
			if cur.differs == "" {
				return nil, fmt.Errorf("%s: skiff-has outside a differs case", pos)
			}
			cur.skiffHas = append(cur.skiffHas, rest)
			continue
		}
		if word == "option" {
			if err := parseDiffOption(&cur.cfg, strings.Fields(rest)); err != nil {
				return nil, fmt.Errorf("%s: %w", pos, err)
			}
			continue
		}
		if word == "conf" {
			cur.cfg.conf = filepath.Join(filepath.Dir(path), "conf", rest+".conf")
			if _, err := os.Stat(cur.cfg.conf); err != nil {
				return nil, fmt.Errorf("%s: %w", pos, err)
			}
			continue
		}
		if !isDiffConnName(word) {
			return nil, fmt.Errorf("%s: unknown directive %q", pos, word)
		}
		op, arg, _ := strings.Cut(rest, " ")
		step := diffStep{conn: word, op: op, src: line}
		switch op {
		case "send":
			if step.data, err = expandSendText(arg); err != nil {
				return nil, fmt.Errorf("%s: %w", pos, err)
			}
			step.src = fmt.Sprintf("%s send %q", word, step.data)
		case "sync", "expect-close", "settle":
			if arg != "" {
				return nil, fmt.Errorf("%s: %s takes no argument", pos, op)
			}
		default:
			return nil, fmt.Errorf("%s: unknown step %q", pos, op)
		}
		cur.steps = append(cur.steps, step)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range scripts {
		if seen[s.name] {
			return nil, fmt.Errorf("%s: case %q defined twice", s.pos, s.name)
		}
		seen[s.name] = true
	}
	return scripts, nil
}

func isDiffConnName(s string) bool {
	if len(s) < 2 || s[0] != 'c' {
		return false
	}
	_, err := strconv.Atoi(s[1:])
	return err == nil
}

func parseDiffOption(cfg *diffConfig, f []string) error {
	if len(f) < 2 {
		return fmt.Errorf("option %v: want a name and a value", f)
	}
	atoi := func(p *int) error {
		n, err := strconv.Atoi(f[1])
		*p = n
		return err
	}
	switch f[0] {
	case "max_payload":
		return atoi(&cfg.maxPayload)
	case "max_control_line":
		return atoi(&cfg.maxControlLine)
	case "max_subs":
		return atoi(&cfg.maxSubs)
	case "max_connections":
		return atoi(&cfg.maxConns)
	case "auth_timeout":
		d, err := time.ParseDuration(f[1])
		cfg.authTimeout = d
		return err
	case "token":
		cfg.token = f[1]
	case "username":
		cfg.username = f[1]
	case "password":
		cfg.password = f[1]
	case "user": // user NAME PASSWORD
		if len(f) != 3 {
			return fmt.Errorf("option user: want a name and a password")
		}
		cfg.users = append(cfg.users, &diffUser{name: f[1], pass: f[2]})
	case "pub_allow", "pub_deny", "sub_allow", "sub_deny": // pub_allow NAME SUBJECT...
		u, err := cfg.user(f[1])
		if err != nil {
			return err
		}
		list := map[string]*[]string{"pub_allow": &u.pubAllow, "pub_deny": &u.pubDeny, "sub_allow": &u.subAllow, "sub_deny": &u.subDeny}[f[0]]
		*list = append(*list, f[2:]...)
	default:
		return fmt.Errorf("unknown option %q", f[0])
	}
	return nil
}

// expandSendText expands templates, then escapes.
func expandSendText(s string) ([]byte, error) {
	tmpl, err := template.New("send").Funcs(diffTemplateFuncs).Parse(s)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nil); err != nil {
		return nil, err
	}
	s = b.String()
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+1 == len(s) {
			return nil, errors.New("a trailing backslash")
		}
		i++
		switch s[i] {
		case 'r':
			out = append(out, '\r')
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 's':
			out = append(out, ' ')
		case '\\':
			out = append(out, '\\')
		case 'x':
			if i+2 >= len(s) {
				return nil, errors.New(`a short \x escape`)
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil {
				return nil, fmt.Errorf(`bad \x escape: %w`, err)
			}
			out = append(out, byte(v))
			i += 2
		default:
			return nil, fmt.Errorf(`unknown escape \%c`, s[i])
		}
	}
	return out, nil
}

// diffConn is one raw connection of a running script. A goroutine reads
// everything the server sends into raw and renders complete operations
// into lines, which the script reports at its synchronization points.
type diffConn struct {
	name   string
	nc     net.Conn
	notify chan struct{} // a token after every read
	sent   diffPings     // what the script sent: its PINGs are owed a PONG

	mu       sync.Mutex
	nonce    string         // of the first INFO, for {{sign}}
	reply    string         // of the last message, for {{reply}}
	replies  map[string]int // _R_ reply subjects, numbered as seen
	raw      []byte         // every byte received
	off      int            // raw[:off] is rendered
	lines    []string       // rendered, not yet reported
	pongs    int
	closed   bool // the server closed (or reset) the connection
	err      error
	reported bool // <closed> is in the transcript
}

func (c *diffConn) readLoop() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.nc.Read(buf)
		c.mu.Lock()
		c.raw = append(c.raw, buf[:n]...)
		c.render()
		if err != nil {
			c.closed, c.err = true, err
		}
		c.mu.Unlock()
		select {
		case c.notify <- struct{}{}:
		default:
		}
		if err != nil {
			return
		}
	}
}

// wait waits until done (called with c.mu held) holds, or diffTimeout.
func (c *diffConn) wait(done func() bool) bool {
	timer := time.NewTimer(diffTimeout)
	defer timer.Stop()
	for {
		c.mu.Lock()
		ok := done()
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-c.notify:
		case <-timer.C:
			return false
		}
	}
}

// render turns the complete operations in raw[off:] into lines.
func (c *diffConn) render() {
	for {
		rest := c.raw[c.off:]
		i := bytes.Index(rest, []byte("\r\n"))
		if i < 0 {
			return
		}
		line := string(rest[:i])
		n := i + 2
		op, args, _ := strings.Cut(line, " ")
		switch op {
		case "MSG", "HMSG":
			size, ok := diffMsgSize(op, args)
			if !ok {
				c.lines = append(c.lines, "?? "+strconv.Quote(line))
				break
			}
			if len(rest) < n+size+2 {
				return // the payload is not all here yet
			}
			payload := rest[n : n+size]
			if f := strings.Fields(args); len(f) == 4+btoi(op == "HMSG") {
				c.reply = f[2]
			}
			line, payload = c.normalizeMsg(op, args, payload)
			rendered := diffPrintable(line) + " | " + strconv.Quote(string(payload))
			if end := rest[n+size : n+size+2]; string(end) != "\r\n" {
				rendered += " <then " + strconv.Quote(string(end)) + " instead of CRLF>"
			}
			c.lines = append(c.lines, rendered)
			n += size + 2
		case "-ERR":
			// A permissions violation may name a reply subject.
			c.lines = append(c.lines, diffPrintable(diffReplySubject.ReplaceAllStringFunc(line, c.replyName)))
		case "PING":
			// The server's keep-alive: when it comes is a matter of timing.
		case "PONG":
			c.pongs++
			c.lines = append(c.lines, line)
		case "INFO":
			c.lines = append(c.lines, diffRenderInfo(args))
			if c.nonce == "" {
				var in struct {
					Nonce string `json:"nonce"`
				}
				_ = json.Unmarshal([]byte(args), &in)
				c.nonce = in.Nonce
			}
		default:
			c.lines = append(c.lines, diffPrintable(line))
		}
		c.off += n
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diffVaryingInfo are the Nats-Request-Info keys whose values differ
// between two servers by nature.
var diffVaryingInfo = map[string]bool{"start": true, "id": true, "server": true, "rtt": true}

// normalizeMsg renders the random parts of a message the same for both
// servers: _R_ reply subjects and the Nats-Request-Info header, with the
// sizes recomputed.
func (c *diffConn) normalizeMsg(op, args string, payload []byte) (string, []byte) {
	f := strings.Fields(args)
	if op == "MSG" && len(f) == 4 || op == "HMSG" && len(f) == 5 {
		if r := f[2]; strings.HasPrefix(r, "_R_.") {
			f[2] = c.replyName(r)
		}
	}
	if op == "HMSG" {
		hdrLen, err := strconv.Atoi(f[len(f)-2])
		key := []byte("\r\nNats-Request-Info: ")
		if i := bytes.Index(payload, key); err == nil && hdrLen <= len(payload) && i >= 0 && i < hdrLen {
			start := i + len(key)
			end := start + bytes.Index(payload[start:], []byte("\r\n"))
			var info map[string]any
			if json.Unmarshal(payload[start:end], &info) == nil {
				for k, v := range info {
					if diffVaryingInfo[k] {
						info[k] = fmt.Sprintf("<%T>", v)
					}
				}
				b, _ := json.Marshal(info) // keys sorted
				payload = slices.Concat(payload[:start], b, payload[end:])
				hdrLen += len(b) - (end - start)
				f[len(f)-2], f[len(f)-1] = strconv.Itoa(hdrLen), strconv.Itoa(len(payload))
			}
		}
	}
	return op + " " + strings.Join(f, " "), payload
}

// diffReplySubject is a reply subject of a service import's response
// table, as both servers make them.
var diffReplySubject = regexp.MustCompile(`_R_\.[0-9A-Za-z]+\.[0-9A-Za-z]+`)

// replyName returns how the _R_ reply subject r is shown: _R_.<n>, n
// counting the distinct ones the connection received.
func (c *diffConn) replyName(r string) string {
	if c.replies == nil {
		c.replies = map[string]int{}
	}
	n, ok := c.replies[r]
	if !ok {
		n = len(c.replies) + 1
		c.replies[r] = n
	}
	return fmt.Sprintf("_R_.<%d>", n)
}

// diffPrintable returns a line as is if it prints, or quoted.
func diffPrintable(line string) string {
	if strconv.CanBackquote(line) {
		return line
	}
	return "?? " + strconv.Quote(line)
}

// diffMsgSize returns the total size from MSG or HMSG arguments.
func diffMsgSize(op, args string) (int, bool) {
	f := strings.Fields(args)
	if (op == "MSG" && len(f) != 3 && len(f) != 4) || (op == "HMSG" && len(f) != 4 && len(f) != 5) {
		return 0, false
	}
	n, err := strconv.Atoi(f[len(f)-1])
	return n, err == nil && n >= 0
}

// INFO keys both servers must agree on, and keys whose values differ by
// nature (so only their JSON type is compared).
var (
	diffInfoValueKeys = []string{"proto", "headers", "max_payload", "auth_required", "tls_required", "host", "client_ip",
		"connect_info", "remote_account"}
	diffInfoTypeKeys = []string{"server_id", "server_name", "version", "go", "port", "client_id", "nonce"}
)

func diffRenderInfo(args string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return "INFO <bad JSON " + strconv.Quote(args) + ">"
	}
	var f []string
	for _, k := range diffInfoValueKeys {
		if v, ok := m[k]; ok {
			b, _ := json.Marshal(v)
			f = append(f, k+"="+string(b))
		}
	}
	for _, k := range diffInfoTypeKeys {
		if v, ok := m[k]; ok {
			f = append(f, fmt.Sprintf("%s=<%T>", k, v))
		}
	}
	slices.Sort(f)
	return "INFO " + strings.Join(f, " ")
}

// diffSession runs one script against one server.
type diffSession struct {
	addr  string
	conns map[string]*diffConn
	order []*diffConn
	out   strings.Builder
}

// diffResult is what one server did with a script.
type diffResult struct {
	transcript string
	raw        string // every connection's bytes, for the failure message
}

func runDiffScript(t *testing.T, sc *diffScript, addr string) diffResult {
	t.Helper()
	s := &diffSession{addr: addr, conns: map[string]*diffConn{}}
	defer func() {
		for _, c := range s.order {
			_ = c.nc.Close()
		}
	}()
	for _, st := range sc.steps {
		c := s.conn(t, st.conn)
		fmt.Fprintln(&s.out, st.src)
		switch st.op {
		case "send":
			c.mu.Lock()
			nonce, reply := c.nonce, c.reply
			c.mu.Unlock()
			data, err := signNonces(st.data, nonce)
			require.NoError(t, err)
			data = bytes.ReplaceAll(data, []byte(diffReplyMark), []byte(reply))
			c.sent.feed(data)
			_, _ = c.nc.Write(data) // a write to a closed connection shows in what follows
		case "sync":
			s.sync(c)
		case "expect-close":
			c.wait(func() bool { return c.closed })
			if !s.report(c) {
				fmt.Fprintf(&s.out, "%s < <still open>\n", c.name)
			}
		case "settle":
			time.Sleep(diffSettle)
		}
	}
	fmt.Fprintln(&s.out, "end")
	for _, c := range s.order {
		s.sync(c)
	}
	var raw strings.Builder
	for _, c := range s.order {
		c.mu.Lock()
		fmt.Fprintf(&raw, "  %s: %q", c.name, c.raw)
		if c.err != nil {
			fmt.Fprintf(&raw, " then %v", c.err)
		}
		raw.WriteByte('\n')
		c.mu.Unlock()
	}
	return diffResult{transcript: s.out.String(), raw: raw.String()}
}

// conn returns the named connection, dialling it on first use and waiting
// for the server's first line (or close), so that connections reach the
// server in the order the script names them.
func (s *diffSession) conn(t *testing.T, name string) *diffConn {
	if c := s.conns[name]; c != nil {
		return c
	}
	nc, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	c := &diffConn{name: name, nc: nc, notify: make(chan struct{}, 1)}
	s.conns[name] = c
	s.order = append(s.order, c)
	go c.readLoop()
	c.wait(func() bool { return c.off > 0 || c.closed })
	return c
}

// sync pings and waits for the PONG (and those owed for the script's own
// PINGs), then reports.
func (s *diffSession) sync(c *diffConn) {
	c.sent.feed([]byte("PING\r\n"))
	c.mu.Lock()
	// At least one more PONG, even where the count of PINGs sent is off
	// (a payload size that does not match its payload).
	want, closed := max(c.sent.pings, c.pongs+1), c.closed
	c.mu.Unlock()
	if !closed {
		_, _ = c.nc.Write([]byte("PING\r\n"))
		if !c.wait(func() bool { return c.pongs >= want || c.closed }) {
			if !s.report(c) {
				fmt.Fprintf(&s.out, "%s < <no PONG>\n", c.name)
			}
			return
		}
		if s.reportThrough(c, want) {
			return
		}
	}
	s.report(c)
}

// reportThrough writes the lines up to the PONG that brought the count to
// want and keeps those after it for the next report: where a line sent
// after that PONG lands (an asynchronous INFO, say) must not depend on
// whether it came in the same read. It reports whether lines were kept.
func (s *diffSession) reportThrough(c *diffConn, want int) (kept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.pongs
	for _, l := range c.lines {
		if l == "PONG" {
			n-- // n ends as the PONGs reported before
		}
	}
	cut := len(c.lines)
	for i, l := range c.lines {
		if l == "PONG" {
			if n++; n >= want {
				cut = i + 1
				break
			}
		}
	}
	if cut == len(c.lines) {
		return false
	}
	for _, l := range diffSortCopies(c.lines[:cut]) {
		fmt.Fprintf(&s.out, "%s < %s\n", c.name, l)
	}
	c.lines = slices.Clone(c.lines[cut:])
	return true
}

// report writes the connection's new lines into the transcript, and
// reports whether the server has closed the connection.
func (s *diffSession) report(c *diffConn) (closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range diffSortCopies(c.lines) {
		fmt.Fprintf(&s.out, "%s < %s\n", c.name, l)
	}
	c.lines = nil
	if c.closed && !c.reported {
		if c.off < len(c.raw) {
			fmt.Fprintf(&s.out, "%s < <partial %q>\n", c.name, c.raw[c.off:])
			c.off = len(c.raw)
		}
		fmt.Fprintf(&s.out, "%s < <closed>\n", c.name)
		c.reported = true
	}
	return c.closed
}

// diffPings counts the PINGs in what a client sent, so that a sync knows
// how many PONGs to wait for. It reads the stream as a server would, well
// enough for scripts: lines, with PUB and HPUB payloads skipped.
type diffPings struct {
	pings   int
	pending []byte
	skip    int  // payload bytes (and CRLF) still to skip
	lost    bool // a PUB size it could not read: stop counting
}

func (p *diffPings) feed(data []byte) {
	p.pending = append(p.pending, data...)
	for !p.lost {
		if p.skip > 0 {
			n := min(p.skip, len(p.pending))
			p.pending, p.skip = p.pending[n:], p.skip-n
			if p.skip > 0 {
				return
			}
		}
		i := bytes.IndexByte(p.pending, '\n')
		if i < 0 {
			return
		}
		f := strings.Fields(string(bytes.TrimSuffix(p.pending[:i], []byte("\r"))))
		p.pending = p.pending[i+1:]
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "PING":
			p.pings++
		case "PUB", "HPUB":
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil || n < 0 {
				p.lost = true
				return
			}
			p.skip = n + 2
		}
	}
}

// diffSortCopies sorts each run of rendered messages that differ only in their
// sid: copies of one message to several subscriptions of a connection. An
// INFO with connect_info, which both servers send after a CONNECT on their
// own time, goes first in the lines reported at once: where it lands
// among the messages that came then is not part of the behaviour.
func diffSortCopies(lines []string) []string {
	lines = slices.Clone(lines)
	slices.SortStableFunc(lines, func(a, b string) int {
		ai, bi := diffAsyncInfo(a), diffAsyncInfo(b)
		switch {
		case ai && !bi:
			return -1
		case bi && !ai:
			return 1
		}
		return 0
	})
	key := func(l string) (string, bool) {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 4 || (f[0] != "MSG" && f[0] != "HMSG") {
			return "", false
		}
		return f[0] + " " + f[1] + " " + f[3], true // without f[2], the sid
	}
	out := slices.Clone(lines)
	for i := 0; i < len(out); {
		k, ok := key(out[i])
		j := i + 1
		for ok && j < len(out) {
			if k2, ok2 := key(out[j]); !ok2 || k2 != k {
				break
			}
			j++
		}
		slices.Sort(out[i:j])
		i = j
	}
	return out
}

// diffAsyncInfo reports whether a rendered line is the INFO a server
// sends once a CONNECT is accepted (connect_info).
func diffAsyncInfo(l string) bool {
	return strings.HasPrefix(l, "INFO ") && strings.Contains(l, " connect_info=true")
}

// diffScriptFiles returns the script files.
func diffScriptFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "diff", "*.txt"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// TestDifferentialScripts runs every case of testdata/diff against both
// servers and requires equal transcripts.
func TestDifferentialScripts(t *testing.T) {
	for _, file := range diffScriptFiles(t) {
		scripts, err := parseDiffFile(file)
		require.NoError(t, err)
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			for _, sc := range scripts {
				t.Run(sc.name, func(t *testing.T) {
					ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
					got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
					t.Logf("%s: reference transcript:\n%s", sc.pos, ref.transcript)
					if sc.differs != "" {
						// A deliberate difference: Skiff must do what the
						// script says and the reference must not, so that
						// the case fails if either changes.
						t.Logf("deliberate difference: %s", sc.differs)
						require.NotEmpty(t, sc.skiffHas, "%s: a differs case needs skiff-has lines", sc.pos)
						for _, want := range sc.skiffHas {
							require.Contains(t, got.transcript, want, "%s: Skiff's transcript:\n%s", sc.pos, got.transcript)
							require.NotContains(t, ref.transcript, want, "%s: the reference now does this too; drop the differs", sc.pos)
						}
						return
					}
					require.Equal(t, ref.transcript, got.transcript,
						"%s: Skiff's transcript differs from nats-server's\nnats-server bytes:\n%sSkiff bytes:\n%s",
						sc.pos, ref.raw, got.raw)
				})
			}
		})
	}
}

// TestDifferentialScriptSyntax checks the script reader itself.
func TestDifferentialScriptSyntax(t *testing.T) {
	b, err := expandSendText(`PUB a 3\r\n{{repeat "x" 3}}\x41\s\t\\`)
	require.NoError(t, err)
	require.Equal(t, "PUB a 3\r\nxxxA \t\\", string(b))
	for _, bad := range []string{`\q`, `\x4`, `\`, `{{nope}}`} {
		_, err := expandSendText(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t,
		[]string{"+OK", `MSG a 1 1 | "x"`, `MSG a 2 1 | "x"`, `MSG a 3 1 | "x"`, `MSG b 1 1 | "x"`, "PONG"},
		diffSortCopies([]string{"+OK", `MSG a 3 1 | "x"`, `MSG a 1 1 | "x"`, `MSG a 2 1 | "x"`, `MSG b 1 1 | "x"`, "PONG"}))
	var p diffPings
	p.feed([]byte("PUB a 6\r\nPING\r\n\r\nping\r\nHPUB b 2 4\r\n\r\nPI"))
	require.Equal(t, 1, p.pings, "a PING in a payload is not one")
	p.feed([]byte("\r\nPi"))
	p.feed([]byte("Ng\r\n"))
	require.Equal(t, 2, p.pings)
}

// diffMalformedArgs are argument lists that the reference server refuses by
// closing the connection without a word, while Skiff deliberately sends
// -ERR 'Unknown Protocol Operation' first. (UNSUB with a maximum that is not
// a number is not here: the reference server takes it as a plain UNSUB.)
var diffMalformedArgs = []string{
	"PUB foo\r\n",
	"PUB foo bar baz 5\r\n",
	"PUB foo x\r\n",
	"PUB foo -1\r\n",
	"HPUB foo 5\r\n",
	"HPUB foo 10 5\r\n",
	"HPUB foo x 5\r\n",
	"SUB foo\r\n",
	"SUB foo q 1 extra\r\n",
	"UNSUB 1 2 3\r\n",
}

// TestDifferentialMalformedArgs checks the one deliberate difference on
// malformed PUB/HPUB/SUB/UNSUB arguments: the reference server closes
// silently, Skiff sends -ERR 'Unknown Protocol Operation' and closes.
func TestDifferentialMalformedArgs(t *testing.T) {
	for _, line := range diffMalformedArgs {
		t.Run(strings.TrimSpace(line), func(t *testing.T) {
			sc := &diffScript{name: line, pos: "diffMalformedArgs", steps: []diffStep{
				{conn: "c1", op: "send", data: []byte("CONNECT {\"verbose\":false,\"headers\":true}\r\n")},
				{conn: "c1", op: "sync"},
				{conn: "c1", op: "send", data: []byte(line)},
				{conn: "c1", op: "expect-close"},
			}}
			for i, st := range sc.steps {
				sc.steps[i].src = "c1 " + st.op
				if st.op == "send" {
					sc.steps[i].src = fmt.Sprintf("c1 send %q", st.data)
				}
			}
			ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
			got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
			const closed = "c1 < <closed>\n"
			require.Contains(t, ref.transcript, "c1 expect-close\n"+closed,
				"nats-server no longer closes silently:\n%s", ref.raw)
			want := strings.Replace(ref.transcript, closed, "c1 < -ERR 'Unknown Protocol Operation'\n"+closed, 1)
			require.Equal(t, want, got.transcript, "nats-server bytes:\n%sSkiff bytes:\n%s", ref.raw, got.raw)
		})
	}
}
