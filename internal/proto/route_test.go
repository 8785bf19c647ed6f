package proto

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// routeRecorder is a RouteHandler that writes every call as a line.
type routeRecorder struct{ calls []string }

func (r *routeRecorder) add(format string, args ...any) error {
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
	return nil
}
func (r *routeRecorder) Connect(arg []byte) error { return r.add("CONNECT %s", arg) }
func (r *routeRecorder) Info(arg []byte) error    { return r.add("INFO %s", arg) }
func (r *routeRecorder) RouteSub(a, s, q []byte, w int) error {
	return r.add("RS+ %s|%s|%s|%d", a, s, q, w)
}
func (r *routeRecorder) RouteUnsub(a, s, q []byte) error { return r.add("RS- %s|%s|%s", a, s, q) }
func (r *routeRecorder) RouteMsg(m *RouteMsg) error {
	verb := "MSG"
	switch {
	case m.Internal && m.Permitted:
		verb = "IMSG+p"
	case m.Internal:
		verb = "IMSG-p"
	case m.Permitted:
		verb = "MSG with Permitted" // never: Permitted only comes with Internal
	}
	return r.add("%s %s|%s|%s|%s|%d|%s", verb, m.Account, m.Subject, m.Reply, bytes.Join(m.Queues, []byte(",")), m.Hdr, m.Msg)
}
func (r *routeRecorder) Ping() error        { return r.add("PING") }
func (r *routeRecorder) Pong() error        { return r.add("PONG") }
func (r *routeRecorder) Err(t []byte) error { return r.add("ERR %s", t) }

func parseRouteChunks(l Limits, chunks ...[]byte) ([]string, string) {
	r := &routeRecorder{}
	p := NewRouteParser(r, l)
	for _, c := range chunks {
		if err := p.Parse(c); err != nil {
			return r.calls, errText(err)
		}
	}
	return r.calls, ""
}

func parseRouteReads(l Limits, in []byte, n int) ([]string, string) {
	r := &routeRecorder{}
	p := NewRouteParser(r, l)
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

var routeCases = []struct {
	name  string
	in    string
	calls []string
	err   string
}{
	{name: "interest", in: "RS+ $G foo.*\r\nRS+ $G foo.> q 3\r\nRS- $G foo.*\r\nRS- $G foo.> q\r\n",
		calls: []string{"RS+ $G|foo.*||0", "RS+ $G|foo.>|q|3", "RS- $G|foo.*|", "RS- $G|foo.>|q"}},
	{name: "rmsg", in: "RMSG $G foo 5\r\nhello\r\n", calls: []string{"MSG $G|foo|||-1|hello"}},
	{name: "rmsg reply", in: "RMSG $G foo _INBOX.x 2\r\nhi\r\n", calls: []string{"MSG $G|foo|_INBOX.x||-1|hi"}},
	{name: "rmsg queues", in: "RMSG $G foo | q1 q2 2\r\nhi\r\n", calls: []string{"MSG $G|foo||q1,q2|-1|hi"}},
	{name: "rmsg reply and queues", in: "RMSG $G foo + r q1 0\r\n\r\n", calls: []string{"MSG $G|foo|r|q1|-1|"}},
	{name: "hmsg", in: "HMSG $G foo r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", calls: []string{"MSG $G|foo|r||12|NATS/1.0\r\n\r\nhi"}},
	{name: "hmsg queues", in: "HMSG $G foo | q 12 12\r\nNATS/1.0\r\n\r\n\r\n", calls: []string{"MSG $G|foo||q|12|NATS/1.0\r\n\r\n"}},
	{name: "imsg permitted", in: "IMSG $G foo +p 5\r\nhello\r\n", calls: []string{"IMSG+p $G|foo|||-1|hello"}},
	{name: "imsg denied reply", in: "IMSG $G foo -p _INBOX.x 2\r\nhi\r\n", calls: []string{"IMSG-p $G|foo|_INBOX.x||-1|hi"}},
	{name: "imsg reply and queues", in: "IMSG $G foo +p + r q1 q2 0\r\n\r\n", calls: []string{"IMSG+p $G|foo|r|q1,q2|-1|"}},
	{name: "ihmsg queues", in: "IHMSG $G foo -p | q 12 14\r\nNATS/1.0\r\n\r\nhi\r\n", calls: []string{"IMSG-p $G|foo||q|12|NATS/1.0\r\n\r\nhi"}},
	{name: "imsg then rmsg", in: "IMSG $G a +p 1\r\nx\r\nRMSG $G b 1\r\ny\r\n", calls: []string{"IMSG+p $G|a|||-1|x", "MSG $G|b|||-1|y"}},
	{name: "handshake", in: "CONNECT {\"a\":1}\r\nINFO {}\r\nPING\r\nPONG\r\n-ERR 'x'\r\n",
		calls: []string{`CONNECT {"a":1}`, "INFO {}", "PING", "PONG", "ERR 'x'"}},
	{name: "client ops are garbage", in: "PUB foo 1\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "sub is garbage", in: "SUB foo 1\r\n", err: "Unknown Protocol Operation"},
	{name: "garbage", in: "\x00\x01hello\r\n", err: "Unknown Protocol Operation"},
	{name: "rs+ one arg", in: "RS+ $G\r\n", err: "Unknown Protocol Operation"},
	{name: "rs+ queue without weight", in: "RS+ $G foo q\r\n", err: "Unknown Protocol Operation"},
	{name: "rs+ zero weight", in: "RS+ $G foo q 0\r\n", err: "Unknown Protocol Operation"},
	{name: "rs- too many", in: "RS- $G foo q x\r\n", err: "Unknown Protocol Operation"},
	{name: "rmsg no size", in: "RMSG $G foo\r\n", err: "Unknown Protocol Operation"},
	{name: "rmsg bare plus", in: "RMSG $G foo + 1\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "rmsg two replies", in: "RMSG $G foo a b 1\r\nx\r\n", err: "Unknown Protocol Operation"},
	{name: "rmsg short payload", in: "RMSG $G foo 3\r\nhello\r\n", err: "Unknown Protocol Operation"},
	{name: "hmsg header too large", in: "HMSG $G foo 5 4\r\n", err: "Unknown Protocol Operation"},
	{name: "imsg no permission field", in: "IMSG $G foo 5\r\nhello\r\n", err: "Unknown Protocol Operation"},
	{name: "imsg bad permission field", in: "IMSG $G foo +x 5\r\nhello\r\n", err: "Unknown Protocol Operation"},
	{name: "imsg reply in its place", in: "IMSG $G foo r 5\r\nhello\r\n", err: "Unknown Protocol Operation"},
	{name: "ihmsg no size", in: "IHMSG $G foo +p 5\r\n", err: "Unknown Protocol Operation"},
	{name: "rmsg max payload", in: "RMSG $G foo 1048577\r\n", err: "Maximum Payload Violation"},
}

func TestParseRoute(t *testing.T) {
	for _, tc := range routeCases {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := parseRouteChunks(Limits{}, []byte(tc.in))
			require.Equal(t, tc.err, err)
			require.Equal(t, tc.calls, calls)
			in := []byte(tc.in)
			for i := 0; i <= len(in); i++ {
				calls, err := parseRouteChunks(Limits{}, in[:i], in[i:])
				require.Equal(t, tc.err, err, "split at %d", i)
				require.Equal(t, tc.calls, calls, "split at %d", i)
			}
			for _, n := range []int{1, 3, 7} {
				calls, err := parseRouteReads(Limits{}, in, n)
				require.Equal(t, tc.err, err, "reads of %d", n)
				require.Equal(t, tc.calls, calls, "reads of %d", n)
			}
		})
	}
}

// TestRouteEncodeParse: what the encoders write, the parser reads back.
func TestRouteEncodeParse(t *testing.T) {
	var b []byte
	b = AppendRouteSub(b, "$G", "a.*", "", 0)
	b = AppendRouteSub(b, "$G", "a.>", "q", 2)
	b = AppendRouteUnsub(b, "$G", "a.*", "")
	b = AppendRouteUnsub(b, "$G", "a.>", "q")
	for _, m := range []struct {
		kind   RouteMsgKind
		reply  string
		queues []string
		hdr    int
	}{
		{ClientMsg, "", nil, -1}, {ClientMsg, "r", nil, -1}, {ClientMsg, "", []string{"q1", "q2"}, -1}, {ClientMsg, "r", []string{"q"}, 12},
		{ServerMsgPermitted, "", nil, -1}, {ServerMsgDenied, "r", nil, 12}, {ServerMsgPermitted, "r", []string{"q"}, -1}, {ServerMsgDenied, "", []string{"q"}, 12},
	} {
		payload := "NATS/1.0\r\n\r\nhi"
		b = AppendRouteMsgLine(b, m.kind, "$G", []byte("s"), []byte(m.reply), m.queues, m.hdr, len(payload))
		b = append(b, payload+"\r\n"...)
	}
	calls, err := parseRouteChunks(Limits{}, b)
	require.Empty(t, err)
	require.Equal(t, []string{
		"RS+ $G|a.*||0", "RS+ $G|a.>|q|2", "RS- $G|a.*|", "RS- $G|a.>|q",
		"MSG $G|s|||-1|NATS/1.0\r\n\r\nhi", "MSG $G|s|r||-1|NATS/1.0\r\n\r\nhi",
		"MSG $G|s||q1,q2|-1|NATS/1.0\r\n\r\nhi", "MSG $G|s|r|q|12|NATS/1.0\r\n\r\nhi",
		"IMSG+p $G|s|||-1|NATS/1.0\r\n\r\nhi", "IMSG-p $G|s|r||12|NATS/1.0\r\n\r\nhi",
		"IMSG+p $G|s|r|q|-1|NATS/1.0\r\n\r\nhi", "IMSG-p $G|s||q|12|NATS/1.0\r\n\r\nhi",
	}, calls)
}

// FuzzParseRoute is FuzzParse for the route protocol.
func FuzzParseRoute(f *testing.F) {
	for _, tc := range routeCases {
		f.Add([]byte(tc.in), uint16(3), uint16(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b uint16) {
		limits := Limits{MaxControlLine: 64, MaxPayload: 128}
		i, j := int(a)%(len(in)+1), int(b)%(len(in)+1)
		if i > j {
			i, j = j, i
		}
		wholeCalls, wholeErr := parseRouteChunks(limits, in)
		splitCalls, splitErr := parseRouteChunks(limits, in[:i], in[i:j], in[j:])
		if wholeErr != splitErr || fmt.Sprint(wholeCalls) != fmt.Sprint(splitCalls) {
			t.Fatalf("whole: %q, %q; split at %d,%d: %q, %q", wholeCalls, wholeErr, i, j, splitCalls, splitErr)
		}
		readCalls, readErr := parseRouteReads(limits, in, int(a)%17+1)
		if wholeErr != readErr || fmt.Sprint(wholeCalls) != fmt.Sprint(readCalls) {
			t.Fatalf("whole: %q, %q; reads of %d: %q, %q", wholeCalls, wholeErr, int(a)%17+1, readCalls, readErr)
		}
		var pe *Error
		if wholeErr != "" && !errors.As(NewRouteParser(&routeRecorder{}, limits).Parse(in), &pe) {
			t.Fatalf("error %q is not a *proto.Error", wholeErr)
		}
	})
}
