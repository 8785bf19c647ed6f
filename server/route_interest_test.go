package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeliveryReply: a JetStream delivery's presented subject travels in
// its ack reply across a route and comes out as it went in; other replies
// are left alone.
func TestDeliveryReply(t *testing.T) {
	ack := "$JS.ACK.ORDERS.C.1.5.5.1795570000000000000.0"
	for _, tc := range []struct {
		name, reply, as string
		wire, gotAs     string
		gotReply        string
	}{
		{"a delivery", ack, "orders.new", ack + "@orders.new", "orders.new", ack},
		{"a subject with its own @", ack, "user.bob@example.com", ack + "@user.bob@example.com", "user.bob@example.com", ack},
		{"not an ack reply", "_INBOX.x", "orders.new", "_INBOX.x", "", "_INBOX.x"},
		{"no subject", ack, "", ack, "", ack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f forwards
			wire := f.jsDeliveryReply([]byte(tc.reply), []byte(tc.as))
			require.Equal(t, tc.wire, string(wire))
			as, reply := splitDeliveryReply(wire)
			require.Equal(t, tc.gotAs, string(as))
			require.Equal(t, tc.gotReply, string(reply))
		})
	}
}
