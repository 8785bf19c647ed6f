package jetstream

import (
	"log/slog"
	"strconv"

	"github.com/skiffmq/skiff/server"
)

// pubAck answers a publish once WaitDurable returned err for it.
func (st *stream) pubAck(p *server.Publisher, reply string, seq uint64, err error) {
	if err != nil {
		st.syncWarn.Log(st.js.log, slog.LevelWarn, "stream sync failed", "stream", st.name, "err", err)
		p.Publish(reply, "", nil, pubAckError(st.name, errStreamStore(err)))
		return
	}
	p.Publish(reply, "", nil, st.pubAckJSON(seq, false))
}

// ackDuplicate answers a duplicate publish (one stored before as seq)
// after the read, nack at once: neither stored anything, so there is
// nothing to wait for.
func (st *stream) ackDuplicate(m *server.Msg, reply string, seq uint64) {
	if reply == "" || st.cfg.Load().NoAck {
		return
	}
	b := st.pubAckJSON(seq, true)
	m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, b) })
}

func (st *stream) nack(m *server.Msg, reply string, e *APIError) {
	if reply == "" || st.cfg.Load().NoAck {
		return
	}
	b := pubAckError(st.name, e)
	m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, b) })
}

// pubAckPrefix is the start of every PubAck of a stream, up to the
// sequence.
func pubAckPrefix(stream string) []byte {
	b := append([]byte(`{"stream":`), strconv.Quote(stream)...)
	return append(b, `,"seq":`...)
}

// pubAckJSON is the PubAck (the JSON of type PubAck) of seq, built on the
// stream's ackPrefix.
func (st *stream) pubAckJSON(seq uint64, dup bool) []byte {
	b := make([]byte, 0, len(st.ackPrefix)+40)
	b = append(b, st.ackPrefix...)
	b = strconv.AppendUint(b, seq, 10)
	if dup {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

// pubAckError is a refused publish's answer: the error, and the stream
// with sequence 0, as the reference server answers.
func pubAckError(stream string, e *APIError) []byte {
	b, _ := jsonMarshal(struct {
		Error  *APIError `json:"error"`
		Stream string    `json:"stream"`
		Seq    uint64    `json:"seq"`
	}{e, stream, 0})
	return b
}
