package jetstream_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// The server must never be a confused deputy: what it publishes for a
// client (a consumer's delivery, a pull request's replies) must not do what
// that client's permissions forbid. Each test has mallory, denied the
// victim's stream and the API that deletes streams, try through the server.

const (
	adminUser, adminPass     = "admin", "a"
	malloryUser, malloryPass = "mallory", "m"
)

// malloryPerms may use the JetStream API on its own stream, but not delete
// streams nor publish to the victim's subjects.
var malloryPerms = &server.Permissions{
	Publish: server.SubjectPermission{
		Allow: []string{"own.>", "$JS.API.>", "$JS.ACK.>", "_INBOX.>", "mallory.>"},
		Deny:  []string{"$JS.API.STREAM.DELETE.>", "victim.>"},
	},
}

// forEachAccountKind runs a deputy test with its users in the global
// account (a server without accounts), and in a configured account with
// JetStream: the rules hold in either.
func forEachAccountKind(t *testing.T, test func(t *testing.T, acc string)) {
	for _, acc := range []string{server.GlobalAccountName, "TENANT"} {
		t.Run("account="+acc, func(t *testing.T) { test(t, acc) })
	}
}

// startAuthBroker starts a broker whose users are admin (no limits) and
// mallory (malloryPerms, or perms when given), in the account acc: the
// global account, or a configured one with JetStream.
func startAuthBroker(t *testing.T, acc, dir string, perms *server.Permissions) *broker {
	t.Helper()
	if perms == nil {
		perms = malloryPerms
	}
	users := []server.User{
		{Name: adminUser, Password: adminPass},
		{Name: malloryUser, Password: malloryPass, Permissions: perms},
	}
	return startBrokerConfigured(t, jetstream.Options{StoreDir: dir}, func(o *server.Options) {
		o.HTTPPort = server.RandomPort
		if acc == server.GlobalAccountName {
			o.Users = users
		} else {
			o.Accounts = []server.AccountConfig{{Name: acc, Users: users, JetStream: &server.JetStreamLimits{}}}
		}
	})
}

func connectAs(t *testing.T, b *broker, user, pass string) (*nats.Conn, njs.JetStream) {
	t.Helper()
	nc, err := nats.Connect(b.srv.ClientURL(), nats.UserInfo(user, pass), nats.Timeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	require.NoError(t, err)
	return nc, js
}

// deputySetup makes the victim's stream (with one message and a consumer
// holding it unacknowledged) as admin, and mallory's own stream with one
// message and a pull consumer, as mallory.
func deputySetup(t *testing.T, b *broker) (admin, mallory njs.JetStream, malloryNC *nats.Conn) {
	t.Helper()
	_, admin = connectAs(t, b, adminUser, adminPass)
	_, err := admin.CreateStream(ctx(t), njs.StreamConfig{Name: "VICTIM", Subjects: []string{"victim.>"}})
	require.NoError(t, err)
	_, err = admin.Publish(ctx(t), "victim.data", []byte("precious"))
	require.NoError(t, err)
	_, err = admin.CreateOrUpdateConsumer(ctx(t), "VICTIM", njs.ConsumerConfig{Durable: "vc", AckPolicy: njs.AckExplicitPolicy, AckWait: time.Hour})
	require.NoError(t, err)

	malloryNC, mallory = connectAs(t, b, malloryUser, malloryPass)
	_, err = mallory.CreateStream(ctx(t), njs.StreamConfig{Name: "OWN", Subjects: []string{"own.>"}})
	require.NoError(t, err)
	_, err = mallory.Publish(ctx(t), "own.x", []byte("payload of mallory's choosing"))
	require.NoError(t, err)
	_, err = mallory.CreateOrUpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{Durable: "pc", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	return admin, mallory, malloryNC
}

// pullTo asks mallory's pull consumer for one message, with reply as the
// request's reply subject: the server delivers the message there. Mallory
// subscribes to reply first, as a pull consumer serves only requests
// whose reply subject has a subscriber.
func pullTo(t *testing.T, nc *nats.Conn, reply string) {
	t.Helper()
	_, err := nc.SubscribeSync(reply)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.OWN.pc", reply, []byte(`{"batch":1,"expires":2000000000}`)))
	require.NoError(t, nc.Flush())
}

// waitDelivered waits until mallory's pull consumer has delivered its
// message: whatever the server did with it is done.
func waitDelivered(t *testing.T, mallory njs.JetStream) {
	t.Helper()
	c, err := mallory.Consumer(ctx(t), "OWN", "pc")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := c.Info(ctx(t))
		return err == nil && info.Delivered.Stream == 1
	}, 5*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the delivery's own routing, if any
}

func TestDeputyPushDeliverSubjectNeedsPublishPermission(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, _ := deputySetup(t, b)

		for _, deliver := range []string{"$JS.API.STREAM.DELETE.VICTIM", "victim.injected"} {
			_, err := mallory.CreateOrUpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{
				Durable: "push", DeliverSubject: deliver, AckPolicy: njs.AckExplicitPolicy,
			})
			require.Error(t, err, deliver)
			require.Equal(t, njs.ErrorCode(10112), apiCode(err), deliver)
		}
		// A deliver subject mallory may publish on is fine, and delivers.
		nc, _ := connectAs(t, b, malloryUser, malloryPass)
		sub, err := nc.SubscribeSync("mallory.deliver")
		require.NoError(t, err)
		_, err = mallory.CreateOrUpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{
			Durable: "push", DeliverSubject: "mallory.deliver", AckPolicy: njs.AckExplicitPolicy,
		})
		require.NoError(t, err)
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "own.x", m.Subject)

		// An update cannot move the deliver subject where mallory may not
		// publish either.
		_, err = mallory.UpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{
			Durable: "push", DeliverSubject: "victim.injected", AckPolicy: njs.AckExplicitPolicy,
		})
		require.Equal(t, njs.ErrorCode(10112), apiCode(err))

		_, err = admin.Stream(ctx(t), "VICTIM")
		require.NoError(t, err)
	})
}

func TestDeputyPullReplyCannotReachAPI(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, nc := deputySetup(t, b)

		// Mallory may not delete the stream itself.
		_, err := nc.Request("$JS.API.STREAM.DELETE.VICTIM", nil, time.Second)
		require.Error(t, err)

		// A pull request's reply subject is not checked against publish
		// permissions (replies never are), so mallory names the API there:
		// the server's delivery must not be taken as an API request.
		pullTo(t, nc, "$JS.API.STREAM.DELETE.VICTIM")
		waitDelivered(t, mallory)

		_, err = admin.Stream(ctx(t), "VICTIM")
		require.NoError(t, err, "the victim's stream was deleted through the server")
	})
}

func TestDeputyPullReplyCannotAck(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, nc := deputySetup(t, b)

		// The victim's consumer holds message 1, unacknowledged.
		vc, err := admin.Consumer(ctx(t), "VICTIM", "vc")
		require.NoError(t, err)
		victimMsg := fetchOne(t, vc)
		meta, err := victimMsg.Metadata()
		require.NoError(t, err)
		require.Equal(t, uint64(1), meta.Sequence.Stream)

		// Mallory names the victim's ack subject as a reply: the server's
		// delivery to it must not acknowledge the victim's message.
		pullTo(t, nc, victimMsg.Reply())
		waitDelivered(t, mallory)

		info, err := vc.Info(ctx(t))
		require.NoError(t, err)
		require.Equal(t, uint64(0), info.AckFloor.Stream, "the victim's message was acknowledged through the server")
		require.Equal(t, 1, info.NumAckPending)
	})
}

func TestDeputyPullReplyCannotWriteToAnotherStream(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, mallory, nc := deputySetup(t, b)

		// Mallory may not publish to the victim's subjects...
		require.NoError(t, nc.Publish("victim.injected", []byte("x")))
		require.NoError(t, nc.Flush())
		// ...so has the server deliver mallory's own message there.
		pullTo(t, nc, "victim.injected")
		waitDelivered(t, mallory)

		require.Equal(t, uint64(1), victimMsgs(t, admin), "a message was stored in the victim's stream through the server")
	})
}

// victimMsgs returns how many messages the victim's stream holds.
func victimMsgs(t *testing.T, admin njs.JetStream) uint64 {
	t.Helper()
	s, err := admin.Stream(ctx(t), "VICTIM")
	require.NoError(t, err, "the victim's stream is gone")
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	return info.State.Msgs
}

// A push consumer into another stream is fine for a user who may publish
// there: the server's delivery is stored, as the user's own publish would
// be.
func TestDeputyDeliveryStoredWhenPermitted(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		b := startAuthBroker(t, acc, t.TempDir(), nil)
		admin, _, _ := deputySetup(t, b)
		_, err := admin.CreateStream(ctx(t), njs.StreamConfig{Name: "COPY", Subjects: []string{"copy.>"}})
		require.NoError(t, err)
		nc, _ := connectAs(t, b, adminUser, adminPass)
		_, err = nc.SubscribeSync("copy.in") // a push consumer needs a subscriber
		require.NoError(t, err)
		_, err = admin.CreateOrUpdateConsumer(ctx(t), "VICTIM", njs.ConsumerConfig{
			Durable: "tocopy", DeliverSubject: "copy.in", AckPolicy: njs.AckNonePolicy,
		})
		require.NoError(t, err)
		s, err := admin.Stream(ctx(t), "COPY")
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := s.Info(ctx(t))
			return err == nil && info.State.Msgs == 1
		}, 5*time.Second, 10*time.Millisecond)
	})
}

// The owner of a push consumer is kept with it: after a restart under
// permissions that no longer allow its deliver subject, it delivers
// nothing.
func TestDeputyOwnerPersists(t *testing.T) {
	forEachAccountKind(t, func(t *testing.T, acc string) {
		dir := t.TempDir()
		b := startAuthBroker(t, acc, dir, nil)
		_, mallory, _ := deputySetup(t, b)
		_, err := mallory.CreateOrUpdateConsumer(ctx(t), "OWN", njs.ConsumerConfig{
			Durable: "push", DeliverSubject: "mallory.deliver", AckPolicy: njs.AckExplicitPolicy,
		})
		require.NoError(t, err)
		b.stop()

		stricter := &server.Permissions{Publish: server.SubjectPermission{
			Allow: malloryPerms.Publish.Allow,
			Deny:  append([]string{"mallory.deliver"}, malloryPerms.Publish.Deny...),
		}}
		b = startAuthBroker(t, acc, dir, stricter)
		nc, _ := connectAs(t, b, adminUser, adminPass)
		sub, err := nc.SubscribeSync("mallory.deliver")
		require.NoError(t, err)
		_, err = sub.NextMsg(500 * time.Millisecond)
		require.ErrorIs(t, err, nats.ErrTimeout, "delivered where its owner may no longer publish")

		// Under the old permissions it delivers again.
		b.stop()
		b = startAuthBroker(t, acc, dir, nil)
		nc, _ = connectAs(t, b, adminUser, adminPass)
		sub, err = nc.SubscribeSync("mallory.deliver")
		require.NoError(t, err)
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "own.x", m.Subject)
	})
}
