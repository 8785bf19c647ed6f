package jetstream_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// Every other path by which the server publishes for a client, each tried
// the way an attacker would: push deliveries and their heartbeats, the
// replies of +NXT acknowledgements, PubAcks and API answers. None may act
// as a request to the API, an acknowledgement, a flow control answer, or a
// publish the client could not make itself.

var refusedInternalRE = regexp.MustCompile(`(?m)^skiff_jetstream_refused_internal_total (\d+)$`)

// refusedInternal scrapes the count of server-published messages refused
// for acting past their client's permissions.
func refusedInternal(t *testing.T, b *broker) int {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", b.srv.MonitorAddr()))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := refusedInternalRE.FindSubmatch(body)
	require.NotNil(t, m, "no refused_internal_total series")
	n, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	return n
}

// A push consumer's deliveries, heartbeats and flow control requests are
// the server's, even for a user who may publish anywhere: delivered into
// the API they are refused, never executed.
func TestDeputyPushDeliveryNeverAnAPIRequest(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, _, _ := deputySetup(t, b)
		nc, _ := connectAs(t, b, adminUser, adminPass)
		_, err := admin.CreateStream(ctx(t), njs.StreamConfig{Name: "SRC", Subjects: []string{"src.>"}})
		require.NoError(t, err)

		const deliver = "$JS.API.STREAM.DELETE.VICTIM"
		sub, err := nc.SubscribeSync(deliver) // so the consumer is active
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		_, err = admin.CreateOrUpdateConsumer(ctx(t), "SRC", njs.ConsumerConfig{
			Durable: "push", DeliverSubject: deliver, AckPolicy: njs.AckExplicitPolicy,
			IdleHeartbeat: 100 * time.Millisecond, FlowControl: true,
		})
		require.NoError(t, err)
		_, err = admin.Publish(ctx(t), "src.1", []byte("delete it"))
		require.NoError(t, err)

		var sawData, sawHeartbeat bool
		deadline := time.Now().Add(5 * time.Second)
		for (!sawData || !sawHeartbeat) && time.Now().Before(deadline) {
			m, err := sub.NextMsg(time.Second)
			if err != nil {
				continue
			}
			if len(m.Data) > 0 {
				sawData = true
			} else {
				sawHeartbeat = true
			}
		}
		require.True(t, sawData && sawHeartbeat, "the subscriber saw the delivery and a heartbeat")

		_, err = admin.Stream(ctx(t), "VICTIM")
		require.NoError(t, err, "a push delivery was executed as an API request")
		require.Positive(t, refusedInternal(t, b))
	})
}

// A push consumer whose deliver subject is another consumer's ack subject
// (mallory may publish on $JS.ACK.>) must not acknowledge for it.
func TestDeputyPushDeliveryCannotAck(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, nc := deputySetup(t, b)

		vc, err := admin.Consumer(ctx(t), "VICTIM", "vc")
		require.NoError(t, err)
		ackSubject := fetchOne(t, vc).Reply()

		sub, err := nc.SubscribeSync(ackSubject)
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		_, err = mallory.CreateOrUpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{
			Durable: "acker", DeliverSubject: ackSubject, AckPolicy: njs.AckNonePolicy,
		})
		require.NoError(t, err, "mallory may publish on $JS.ACK.>")
		_, err = sub.NextMsg(5 * time.Second)
		require.NoError(t, err, "the delivery reached the ack subject")
		time.Sleep(50 * time.Millisecond) // whatever the server did with it is done

		info, err := vc.Info(ctx(t))
		require.NoError(t, err)
		require.Equal(t, uint64(0), info.AckFloor.Stream, "the victim's message was acknowledged by a push delivery")
		require.Equal(t, 1, info.NumAckPending)
		require.Positive(t, refusedInternal(t, b))
	})
}

// An acknowledgement with +NXT asks for the next message, delivered to the
// ack's reply subject, which nobody checks: naming the API there must not
// make the delivery an API request.
func TestDeputyAckNextReplyCannotReachAPI(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, nc := deputySetup(t, b)
		_, err := mallory.Publish(ctx(t), "own.y", []byte("second"))
		require.NoError(t, err)

		c, err := mallory.Consumer(ctx(t), "OWN", "pc")
		require.NoError(t, err)
		first := fetchOne(t, c)
		_, err = nc.SubscribeSync("$JS.API.STREAM.DELETE.VICTIM") // pulls go only where someone listens
		require.NoError(t, err)
		require.NoError(t, nc.PublishMsg(&nats.Msg{
			Subject: first.Reply(), Reply: "$JS.API.STREAM.DELETE.VICTIM", Data: []byte("+NXT"),
		}))
		require.NoError(t, nc.Flush())
		require.Eventually(t, func() bool {
			info, err := c.Info(ctx(t))
			return err == nil && info.Delivered.Stream == 2
		}, 5*time.Second, 10*time.Millisecond, "+NXT delivered the next message")
		time.Sleep(50 * time.Millisecond)

		_, err = admin.Stream(ctx(t), "VICTIM")
		require.NoError(t, err, "a +NXT delivery was executed as an API request")
		require.Positive(t, refusedInternal(t, b))
	})
}

// PubAcks and API answers go to the requester's reply subject: they must
// not be stored by a stream the requester may not publish to.
func TestDeputyRepliesCannotWriteToAnotherStream(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, _, nc := deputySetup(t, b)
		// Mallory listens there too, so that the pull request below has
		// someone to answer (pulls go only where someone listens).
		_, err := nc.SubscribeSync("victim.>")
		require.NoError(t, err)

		// A publish to mallory's own stream whose PubAck goes to victim.pubacks.
		require.NoError(t, nc.PublishMsg(&nats.Msg{Subject: "own.z", Reply: "victim.pubacks", Data: []byte("x")}))
		require.NoError(t, nc.Flush())
		own, err := admin.Stream(ctx(t), "OWN")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := own.Info(ctx(t))
			return err == nil && info.State.Msgs == 2
		}, 5*time.Second, 10*time.Millisecond, "mallory's publish was stored")
		// An API request whose answer goes to victim.answers.
		require.NoError(t, nc.PublishRequest("$JS.API.INFO", "victim.answers", nil))
		// A pull request whose messages and 404 go to victim.status.
		require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.OWN.pc", "victim.status", []byte(`{"batch":5,"no_wait":true}`)))
		require.NoError(t, nc.Flush())

		// The PubAck, the API answer, and the pull's two messages and its 404.
		require.Eventually(t, func() bool { return refusedInternal(t, b) == 5 }, 5*time.Second, 10*time.Millisecond,
			"the replies were refused by the victim's stream")

		require.Equal(t, uint64(1), victimMsgs(t, admin), "a reply was stored in the victim's stream")
	})
}

// TestNewClusteredServer: JetStream on a clustered server joins the meta
// group with the raft layer's defaults, which needs a server_name.
func TestNewClusteredServer(t *testing.T) {
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RandomPort, 0
	opts.Cluster.Port = server.RandomPort
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir()})
	require.ErrorIs(t, err, jscluster.ErrNoServerName)

	opts.ServerName = "n1"
	s, err = server.New(opts)
	require.NoError(t, err)
	js, err := jetstream.New(s, jetstream.Options{StoreDir: t.TempDir()})
	require.NoError(t, err)
	require.NotNil(t, jetstream.RaftOf(js))
	require.NoError(t, js.Close())
}
