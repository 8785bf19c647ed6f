package proto

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a Handler that writes every call as a line of text.
type recorder struct{ calls []string }

func (r *recorder) Connect(arg []byte) error {
	r.calls = append(r.calls, "CONNECT "+string(arg))
	return nil
}
func (r *recorder) Pub(subject, reply []byte, hdr int, msg []byte) error {
	r.calls = append(r.calls, fmt.Sprintf("PUB %s|%s|%d|%s", subject, reply, hdr, msg))
	return nil
}
func (r *recorder) Sub(subject, queue, sid []byte) error {
	r.calls = append(r.calls, fmt.Sprintf("SUB %s|%s|%s", subject, queue, sid))
	return nil
}
func (r *recorder) Unsub(sid []byte, max int64) error {
	r.calls = append(r.calls, fmt.Sprintf("UNSUB %s|%d", sid, max))
	return nil
}
func (r *recorder) Ping() error { r.calls = append(r.calls, "PING"); return nil }
func (r *recorder) Pong() error { r.calls = append(r.calls, "PONG"); return nil }

// parseChunks parses in the given pieces and returns the calls and the
// error text ("" for none).
func parseChunks(l Limits, chunks ...[]byte) ([]string, string) {
	r := &recorder{}
	p := NewParser(r, l)
	for _, c := range chunks {
		if err := p.Parse(c); err != nil {
			return r.calls, errText(err)
		}
	}
	return r.calls, ""
}

// parseReads feeds in as a connection's read loop does: reads of at most
// n bytes, each into the payload space while the parser is inside a split
// payload, else through Parse.
func parseReads(l Limits, in []byte, n int) ([]string, string) {
	r := &recorder{}
	p := NewParser(r, l)
	for len(in) > 0 {
		var err error
		if space := p.PayloadSpace(); len(space) > 0 {
			k := copy(space, in[:min(n, len(in))])
			in = in[k:]
			err = p.PayloadRead(k)
		} else {
			k := min(n, len(in))
			err, in = p.Parse(in[:k]), in[k:]
		}
		if err != nil {
			return r.calls, errText(err)
		}
	}
	return r.calls, ""
}

func errText(err error) string {
	var pe *Error
	if errors.As(err, &pe) {
		if pe.Text == "" {
			return "(silent close)"
		}
		return pe.Text
	}
	return err.Error()
}

func TestParseReads(t *testing.T) {
	limits := Limits{MaxPayload: 1 << 21}
	big := strings.Repeat("x", 1<<20)
	in := []byte("PUB big 1048576\r\n" + big + "\r\nPUB s 2\r\nhi\r\nHPUB h r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n")
	want, wantErr := parseChunks(limits, in)
	require.Empty(t, wantErr)
	require.Len(t, want, 4)
	for _, n := range []int{1, 7, 4096, 65536, 1 << 22} {
		if n == 1 && testing.Short() {
			continue
		}
		got, err := parseReads(limits, in, n)
		require.Empty(t, err, "reads of %d", n)
		require.Equal(t, want, got, "reads of %d", n)
	}
	// A payload not followed by CRLF is refused in the payload space too.
	bad := []byte("PUB a 3\r\nabcX\r\n")
	_, err := parseReads(limits, bad, 8)
	_, wholeErr := parseChunks(limits, bad)
	require.NotEmpty(t, err)
	require.Equal(t, wholeErr, err)
}

var parseCases = []struct {
	name  string
	in    string
	calls []string
	err   string
}{
	{name: "ping pong", in: "PING\r\nPONG\r\n", calls: []string{"PING", "PONG"}},
	{name: "lower case, LF only", in: "ping\npong\n", calls: []string{"PING", "PONG"}},
	{name: "connect", in: "CONNECT {\"verbose\":false}\r\n", calls: []string{`CONNECT {"verbose":false}`}},
	{name: "connect tab", in: "connect\t{}\r\n", calls: []string{"CONNECT {}"}},
	{name: "pub", in: "PUB foo 5\r\nhello\r\n", calls: []string{"PUB foo||-1|hello"}},
	{name: "pub reply", in: "PUB foo bar 5\r\nhello\r\n", calls: []string{"PUB foo|bar|-1|hello"}},
	{name: "pub tabs and spaces", in: "pub\t foo \t bar\t5  \r\nhello\r\n", calls: []string{"PUB foo|bar|-1|hello"}},
	{name: "pub empty", in: "PUB foo 0\r\n\r\n", calls: []string{"PUB foo||-1|"}},
	{name: "pub payload with CRLF inside", in: "PUB foo 4\r\n\r\n\r\n\r\n", calls: []string{"PUB foo||-1|\r\n\r\n"}},
	{name: "hpub", in: "HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", calls: []string{"PUB foo||12|NATS/1.0\r\n\r\nhi"}},
	{name: "hpub reply", in: "HPUB foo r 12 12\r\nNATS/1.0\r\n\r\n\r\n", calls: []string{"PUB foo|r|12|NATS/1.0\r\n\r\n"}},
	{name: "sub", in: "SUB foo 1\r\nSUB foo.* q 2\r\n", calls: []string{"SUB foo||1", "SUB foo.*|q|2"}},
	{name: "unsub", in: "UNSUB 1\r\nUNSUB 2 10\r\n", calls: []string{"UNSUB 1|0", "UNSUB 2|10"}},
	{name: "+OK ignored", in: "+OK\r\nPING\r\n", calls: []string{"PING"}},
	{name: "garbage", in: "HELLO\r\n", err: "Unknown Protocol Operation"},
	{name: "garbage without newline", in: "xyz", err: "Unknown Protocol Operation"},
	{name: "op with trailing letters", in: "PUBLISH foo 1\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "pub missing size", in: "PUB foo\r\n", err: "Unknown Protocol Operation"},
	{name: "pub too many args", in: "PUB a b c 1\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "pub bad size", in: "PUB foo 1x\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "pub negative size", in: "PUB foo -1\r\n", err: "Unknown Protocol Operation"},
	{name: "pub size overflow", in: "PUB foo 99999999999999999999\r\n", err: "Unknown Protocol Operation"},
	{name: "pub short payload", in: "PUB foo 3\r\nhello\r\n", err: "Unknown Protocol Operation"},
	{name: "pub long payload", in: "PUB foo 6\r\nhello\r\nPING\r\n", err: "Unknown Protocol Operation"},
	{name: "hpub header larger than total", in: "HPUB foo 5 4\r\n", err: "Unknown Protocol Operation"},
	{name: "sub one arg", in: "SUB foo\r\n", err: "Unknown Protocol Operation"},
	{name: "sub four args", in: "SUB a b c d\r\n", err: "Unknown Protocol Operation"},
	{name: "unsub bad max is no max", in: "UNSUB 1 x\r\nUNSUB 2 -1\r\n", calls: []string{"UNSUB 1|0", "UNSUB 2|0"}},
	{name: "unsub no args", in: "UNSUB\r\n", err: "Unknown Protocol Operation"},
	{name: "ping pong with args", in: "PING x\r\nPONG y\r\n", calls: []string{"PING", "PONG"}},
	{name: "client INFO ignored", in: "INFO {}\r\nPING\r\n", calls: []string{"PING"}},
	{name: "client -ERR closes silently", in: "-ERR 'x'\r\nPING\r\n", err: "(silent close)"},
	{name: "calls before an error are kept", in: "PING\r\nBAD\r\n", calls: []string{"PING"}, err: "Unknown Protocol Operation"},
	{name: "max payload", in: "PUB foo 1048577\r\n", err: "Maximum Payload Violation"},
	{name: "max control line", in: "SUB " + strings.Repeat("a", 5000) + " 1\r\n", err: "maximum control line exceeded"},
	{name: "max control line counts arguments only", in: "UNSUB " + strings.Repeat("1", 4096) + "\r\n", calls: []string{"UNSUB " + strings.Repeat("1", 4096) + "|0"}},
	{name: "max control line without newline", in: "SUB " + strings.Repeat("a", 5000), err: "maximum control line exceeded"},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := parseChunks(Limits{}, []byte(tc.in))
			require.Equal(t, tc.err, err)
			require.Equal(t, tc.calls, calls)
		})
	}
}

// TestParseSplit feeds every case split at every byte, and one byte at a
// time: the calls and the error must not depend on the split.
func TestParseSplit(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			for i := 0; i <= len(in); i++ {
				calls, err := parseChunks(Limits{}, in[:i], in[i:])
				require.Equal(t, tc.err, err, "split at %d", i)
				require.Equal(t, tc.calls, calls, "split at %d", i)
			}
			var bytesOneByOne [][]byte
			for i := range in {
				bytesOneByOne = append(bytesOneByOne, in[i:i+1])
			}
			calls, err := parseChunks(Limits{}, bytesOneByOne...)
			require.Equal(t, tc.err, err, "byte by byte")
			require.Equal(t, tc.calls, calls, "byte by byte")
		})
	}
}

func TestParseLimits(t *testing.T) {
	calls, err := parseChunks(Limits{MaxPayload: 4}, []byte("PUB a 4\r\nabcd\r\nPUB a 5\r\n"))
	require.Equal(t, "Maximum Payload Violation", err)
	require.Equal(t, []string{"PUB a||-1|abcd"}, calls)
	_, err = parseChunks(Limits{MaxControlLine: 10}, []byte("SUB abcdefg 12\r\n"))
	require.Empty(t, err)
	_, err = parseChunks(Limits{MaxControlLine: 10}, []byte("SUB abcdefgh 12\r\n"))
	require.Equal(t, "maximum control line exceeded", err)
}

func TestHandlerErrorStops(t *testing.T) {
	stop := errors.New("stop")
	p := NewParser(stopper{stop}, Limits{})
	require.ErrorIs(t, p.Parse([]byte("PING\r\nPING\r\n")), stop)
}

type stopper struct{ err error }

func (s stopper) Connect([]byte) error                  { return s.err }
func (s stopper) Pub([]byte, []byte, int, []byte) error { return s.err }
func (s stopper) Sub([]byte, []byte, []byte) error      { return s.err }
func (s stopper) Unsub([]byte, int64) error             { return s.err }
func (s stopper) Ping() error                           { return s.err }
func (s stopper) Pong() error                           { return s.err }

type discard struct{}

func (discard) Connect([]byte) error                  { return nil }
func (discard) Pub([]byte, []byte, int, []byte) error { return nil }
func (discard) Sub([]byte, []byte, []byte) error      { return nil }
func (discard) Unsub([]byte, int64) error             { return nil }
func (discard) Ping() error                           { return nil }
func (discard) Pong() error                           { return nil }

func TestParseAllocatesNothing(t *testing.T) {
	p := NewParser(discard{}, Limits{})
	in := []byte("PUB orders.eu.created _INBOX.abc.1 11\r\nhello world\r\nHPUB a 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n")
	split := []byte("PUB a.b 10\r\n01234")
	rest := []byte("56789\r\n")
	require.NoError(t, p.Parse(split)) // warm the split buffers
	require.NoError(t, p.Parse(rest))
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.Parse(in); err != nil {
			t.Fatal(err)
		}
		if err := p.Parse(split); err != nil {
			t.Fatal(err)
		}
		if err := p.Parse(rest); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func TestErrorIs(t *testing.T) {
	_, err := NewParser(discard{}, Limits{}), NewParser(discard{}, Limits{}).Parse([]byte("BAD\r\n"))
	require.ErrorIs(t, err, ErrUnknownOp)
	require.NotErrorIs(t, err, ErrMaxPayload)
	require.Contains(t, err.Error(), "BAD")
	require.Equal(t, `Permissions Violation for Publish to "a.b"`, PermissionsPublish([]byte("a.b")).Text)
	require.Equal(t, `Permissions Violation for Subscription to "a.>" using queue "q"`, PermissionsSubscribe([]byte("a.>"), []byte("q")).Text)
}

func TestAppend(t *testing.T) {
	require.Equal(t, "MSG foo 1 5\r\nhello\r\n", string(AppendMsg(nil, []byte("foo"), []byte("1"), nil, -1, []byte("hello"))))
	require.Equal(t, "MSG foo 1 bar 0\r\n\r\n", string(AppendMsg(nil, []byte("foo"), []byte("1"), []byte("bar"), -1, nil)))
	require.Equal(t, "HMSG foo 9 r 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
		string(AppendMsg(nil, []byte("foo"), []byte("9"), []byte("r"), len(NoRespondersHeader), []byte(NoRespondersHeader))))
	require.Equal(t, "-ERR 'Stale Connection'\r\n", string(AppendErr(nil, ErrStaleConnection.Text)))
	msg := []byte("hello")
	require.GreaterOrEqual(t, MsgSize([]byte("foo"), []byte("1"), []byte("bar"), 3, msg), len(AppendMsg(nil, []byte("foo"), []byte("1"), []byte("bar"), 3, msg)))
}
