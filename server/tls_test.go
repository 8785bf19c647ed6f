package server_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// selfSigned returns a server TLS config for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "skiff test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}, pool
}

func TestTLSRequired(t *testing.T) {
	cfg, pool := selfSigned(t)
	s := RunServer(t, server.Options{TLS: cfg, TLSRequired: true})
	nc := Connect(t, s, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	sub, err := nc.SubscribeSync("secure")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("secure", []byte("over TLS")))
	requireNext(t, sub, "over TLS")
	require.NotNil(t, nc.TLSConnectionState)

	r := DialRaw(t, s)
	require.Equal(t, true, r.Info["tls_required"])
	r.Send("CONNECT {}\r\n")
	r.Expect("-ERR 'Secure Connection - TLS Required'")
	r.ExpectClosed()

	_, err = nats.Connect(s.ClientURL(), nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}), nats.MaxReconnects(0))
	require.Error(t, err, "an untrusted certificate must fail")
}

func TestTLSAvailable(t *testing.T) {
	cfg, pool := selfSigned(t)
	s := RunServer(t, server.Options{TLS: cfg})
	secure := Connect(t, s, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	plain := DialRaw(t, s)
	require.Equal(t, true, plain.Info["tls_available"])
	plain.Send("CONNECT {\"verbose\":false}\r\nSUB mixed 1\r\nPING\r\n")
	plain.Expect("PONG")
	require.NoError(t, secure.Publish("mixed", []byte("hi")))
	require.NoError(t, secure.Flush())
	plain.Expect("MSG mixed 1 2", "hi")
}

// TestTLSHandshakeFirst: with handshake_first the client starts TLS before
// any INFO (nats.go's TLSHandshakeFirst), and INFO comes over TLS; a client
// waiting for INFO in the clear gets nothing and is closed by the TLS
// timeout. With a fallback delay, both kinds of client connect.
func TestTLSHandshakeFirst(t *testing.T) {
	cfg, pool := selfSigned(t)
	clientTLS := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	roundTrip := func(t *testing.T, nc *nats.Conn) {
		sub, err := nc.SubscribeSync("first")
		require.NoError(t, err)
		require.NoError(t, nc.Publish("first", []byte("hello")))
		requireNext(t, sub, "hello")
		require.NotNil(t, nc.TLSConnectionState)
	}

	s := RunServer(t, server.Options{TLS: cfg, TLSRequired: true, TLSHandshakeFirst: true, TLSTimeout: 500 * time.Millisecond})
	roundTrip(t, Connect(t, s, nats.Secure(clientTLS), nats.TLSHandshakeFirst()))

	// A raw TLS client reads INFO only after its handshake.
	tc, err := tls.Dial("tcp", s.Addr().String(), clientTLS)
	require.NoError(t, err)
	defer func() { _ = tc.Close() }()
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(tc).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"tls_required":true`)

	// A client that waits for INFO in the clear sees none.
	raw, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	defer func() { _ = raw.Close() }()
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := raw.Read(make([]byte, 64))
	require.Zero(t, n, "no INFO in the clear")
	require.Error(t, err, "closed after the TLS timeout")

	fb := RunServer(t, server.Options{TLS: cfg, TLSRequired: true, TLSHandshakeFirst: true,
		TLSHandshakeFirstFallback: 50 * time.Millisecond})
	roundTrip(t, Connect(t, fb, nats.Secure(clientTLS), nats.TLSHandshakeFirst()))
	roundTrip(t, Connect(t, fb, nats.Secure(clientTLS)))
}

// infoOf dials addr and returns the INFO line's JSON.
func infoOf(t *testing.T, addr string) map[string]any {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "INFO "), "got %q", line)
	var info map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(line[5:])), &info))
	return info
}

// TestTLSInfoDifferential: INFO's tls_required, tls_verify and
// tls_available say what nats-server's say, for the same TLS settings:
// clients decide from them whether to start TLS and send a certificate.
func TestTLSInfoDifferential(t *testing.T) {
	for _, tc := range []struct {
		name             string
		tls, verify, any bool // any: plain clients allowed too (allow_non_tls)
	}{
		{"no tls", false, false, false},
		{"tls required", true, false, false},
		{"tls required, client certificates verified", true, true, false},
		{"tls or plain", true, false, true},
		{"tls or plain, verified", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, pool := selfSigned(t)
			if tc.verify {
				cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
			o := server.Options{}
			no := &natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
			if tc.tls {
				o.TLS, o.TLSRequired = cfg, !tc.any
				no.TLSConfig, no.TLSVerify, no.AllowNonTLS = cfg.Clone(), tc.verify, tc.any
			}
			s := RunServer(t, o)
			ns, err := natsserver.NewServer(no)
			require.NoError(t, err)
			ns.Start()
			t.Cleanup(ns.Shutdown)
			require.True(t, ns.ReadyForConnections(5*time.Second))

			got, want := infoOf(t, s.Addr().String()), infoOf(t, ns.Addr().String())
			for _, k := range []string{"tls_required", "tls_verify", "tls_available"} {
				require.Equal(t, want[k], got[k], "INFO %s", k)
			}
		})
	}
}
