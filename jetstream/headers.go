package jetstream

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// headers is a parsed NATS header block: "NATS/1.0[ status[ text]]\r\n",
// then "Name: Value\r\n" lines, then "\r\n". Names are compared exactly,
// as the reference server does.
type headers []headerField

type headerField struct{ name, value string }

func parseHeaders(raw []byte) headers {
	var h headers
	lines := bytes.Split(raw, []byte("\r\n"))
	for _, line := range lines[1:] { // the first line is NATS/1.0 and a status
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		h = append(h, headerField{string(bytes.TrimSpace(k)), string(bytes.TrimSpace(v))})
	}
	return h
}

func (h headers) get(name string) (string, bool) {
	for _, f := range h {
		if f.name == name {
			return f.value, true
		}
	}
	return "", false
}

// headerBuilder writes a header block.
type headerBuilder struct{ b []byte }

// status starts a block with a status line ("NATS/1.0 404 No Messages");
// code 0 starts a plain one.
func (hb *headerBuilder) status(code int, text string) *headerBuilder {
	hb.b = append(hb.b[:0], "NATS/1.0"...)
	if code > 0 {
		hb.b = append(hb.b, ' ')
		hb.b = strconv.AppendInt(hb.b, int64(code), 10)
		if text != "" {
			hb.b = append(hb.b, ' ')
			hb.b = append(hb.b, text...)
		}
	}
	hb.b = append(hb.b, "\r\n"...)
	return hb
}

func (hb *headerBuilder) add(name, value string) *headerBuilder {
	hb.b = append(hb.b, name...)
	hb.b = append(hb.b, ": "...)
	hb.b = append(hb.b, value...)
	hb.b = append(hb.b, "\r\n"...)
	return hb
}

func (hb *headerBuilder) addUint(name string, v uint64) *headerBuilder {
	return hb.add(name, strconv.FormatUint(v, 10))
}

// bytes ends the block and returns it.
func (hb *headerBuilder) bytes() []byte { return append(hb.b, "\r\n"...) }

// jsonMarshal is json.Marshal without HTML escaping: subjects are full of
// '>' and the reference server's clients read them either way, but people
// read them too.
func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
