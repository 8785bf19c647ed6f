package server_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// newUserKey returns a user nkey pair and its public key.
func newUserKey(t *testing.T) (nkeys.KeyPair, string) { return newKeyOf(t, nkeys.CreateUser) }

// newKeyOf returns an nkey pair create makes and its public key.
func newKeyOf(t *testing.T, create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := create()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	return kp, pub
}

// nkeyOption signs the server's nonce with kp, as a .nk file would.
func nkeyOption(kp nkeys.KeyPair, pub string) nats.Option {
	return nats.Nkey(pub, func(nonce []byte) ([]byte, error) { return kp.Sign(nonce) })
}

func TestNkeyAuth(t *testing.T) {
	alice, alicePub := newUserKey(t)
	bob, bobPub := newUserKey(t)
	mallory, malloryPub := newUserKey(t)
	s := RunServer(t, server.Options{
		Nkeys: []server.NkeyUser{
			{PublicKey: alicePub},
			{PublicKey: bobPub, Permissions: &server.Permissions{Publish: server.SubjectPermission{Allow: []string{"bob.>"}}}},
		},
		Users: []server.User{{Name: "carol", Password: "pw"}},
	})

	// INFO carries a fresh nonce per connection, and says auth is required.
	r1, r2 := DialRaw(t, s), DialRaw(t, s)
	require.Equal(t, true, r1.Info["auth_required"])
	n1, _ := r1.Info["nonce"].(string)
	n2, _ := r2.Info["nonce"].(string)
	require.Len(t, n1, 15)
	require.NotEqual(t, n1, n2)

	a := Connect(t, s, nkeyOption(alice, alicePub))
	sub, err := a.SubscribeSync("x.>")
	require.NoError(t, err)
	require.NoError(t, a.Flush())

	// Bob's permissions apply to his key.
	errs := make(chan error, 4)
	b := Connect(t, s, nkeyOption(bob, bobPub), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	require.NoError(t, b.Publish("x.1", []byte("denied")))
	require.NoError(t, b.Publish("bob.1", []byte("ok")))
	require.NoError(t, b.Flush())
	select {
	case err := <-errs:
		require.ErrorContains(t, err, `Permissions Violation for Publish to "x.1"`)
	case <-time.After(5 * time.Second):
		t.Fatal("no permission error for bob")
	}
	require.NoError(t, a.Publish("x.2", []byte("from alice")))
	requireNext(t, sub, "from alice")

	// A password user lives beside the nkeys.
	Connect(t, s, nats.UserInfo("carol", "pw")).Close()

	// Refused: an unknown key, a key signing for another, no signature, a
	// signature of something else, a bad public key.
	_, err = nats.Connect(s.ClientURL(), nats.MaxReconnects(0), nkeyOption(mallory, malloryPub))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(s.ClientURL(), nats.MaxReconnects(0), nkeyOption(mallory, alicePub))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	for name, connect := range map[string]string{
		"no signature":     `CONNECT {"nkey":"` + alicePub + `","verbose":false}`,
		"wrong payload":    `CONNECT {"nkey":"` + alicePub + `","sig":"` + sign(t, alice, []byte("not the nonce")) + `","verbose":false}`,
		"not a public key": `CONNECT {"nkey":"SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4","sig":"eA","verbose":false}`,
		"not base64":       `CONNECT {"nkey":"` + alicePub + `","sig":"!!!","verbose":false}`,
	} {
		t.Run(name, func(t *testing.T) {
			r := DialRaw(t, s)
			r.Send(connect + "\r\nPING\r\n")
			require.Equal(t, "-ERR 'Authorization Violation'", r.ReadLine())
		})
	}

	// The signature, in URL-safe or standard base64, of this connection's
	// nonce is what passes.
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.StdEncoding} {
		r := DialRaw(t, s)
		nonce := r.Info["nonce"].(string)
		sig, err := alice.Sign([]byte(nonce))
		require.NoError(t, err)
		r.Send(`CONNECT {"nkey":"` + alicePub + `","sig":"` + enc.EncodeToString(sig) + `","verbose":false}` + "\r\nPING\r\n")
		require.Equal(t, "PONG", r.ReadLine())
	}
}

func sign(t *testing.T, kp nkeys.KeyPair, b []byte) string {
	sig, err := kp.Sign(b)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(sig)
}

func TestNkeyOptionsValidated(t *testing.T) {
	_, pub := newUserKey(t)
	for name, o := range map[string]server.Options{
		"not a user key": {Nkeys: []server.NkeyUser{{PublicKey: "NABC"}}},
		"twice":          {Nkeys: []server.NkeyUser{{PublicKey: pub}, {PublicKey: pub}}},
		"with a token":   {Token: "t", Nkeys: []server.NkeyUser{{PublicKey: pub}}},
	} {
		_, err := server.New(o)
		require.ErrorIs(t, err, server.ErrInvalidOptions, name)
	}
	// No nonce without nkey users, as the reference server.
	s := RunServer(t, server.Options{Users: []server.User{{Name: "u", Password: "p"}}})
	_, has := DialRaw(t, s).Info["nonce"]
	require.False(t, has)
}
