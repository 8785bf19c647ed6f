package broker

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"time"

	"github.com/skiffmq/skiff/server"
)

// tlsBlock is a tls block while it is read.
type tlsBlock struct {
	cert, key, ca value // zero when absent
	verify        bool
	allowPlain    bool
	cfg           tls.Config
	timeout       *value
	first         bool
	firstFallback time.Duration
}

// applyTLS reads the tls block. TLS is then required unless allow_non_tls
// (here or at the top level) says otherwise.
func applyTLS(o *server.Options, v value) error {
	b, tc, err := readTLS(v)
	if err != nil {
		return err
	}
	if b.timeout != nil {
		d, err := b.timeout.duration()
		if err != nil {
			return err
		}
		o.TLSTimeout = d
	}
	o.TLS, o.TLSRequired = tc, !b.allowPlain
	o.TLSHandshakeFirst, o.TLSHandshakeFirstFallback = b.first, b.firstFallback
	return nil
}

// readTLS reads a tls block into a tls.Config (client verification as the
// block says).
func readTLS(v value) (*tlsBlock, *tls.Config, error) {
	b := &tlsBlock{cfg: tls.Config{MinVersion: tls.VersionTLS12}}
	if err := tlsKeys.apply(b, v); err != nil {
		return nil, nil, err
	}
	if b.cert.v == nil || b.key.v == nil {
		return nil, nil, v.errorf(ErrInvalidValue, "tls needs cert_file and key_file")
	}
	certFile, _ := b.cert.str()
	keyFile, _ := b.key.str()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, b.cert.errorf(ErrInvalidValue, "%v", err)
	}
	tc := b.cfg.Clone()
	tc.Certificates = []tls.Certificate{pair}
	if b.ca.v != nil {
		caFile, _ := b.ca.str()
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, b.ca.errorf(ErrInvalidValue, "%v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, b.ca.errorf(ErrInvalidValue, "no certificate in %s", caFile)
		}
		tc.ClientCAs = pool
	}
	if b.verify {
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return b, tc, nil
}

// defaultTLSFirstFallback is handshake_first: auto's wait, nats-server's.
const defaultTLSFirstFallback = 50 * time.Millisecond

// handshakeFirst reads handshake_first: true or false, auto (fall back to
// INFO in the clear after 50ms of silence), or that wait as a duration.
func handshakeFirst(b *tlsBlock, v value) error {
	b.firstFallback = 0
	switch x := v.v.(type) {
	case bool:
		b.first = x
		return nil
	case string:
		switch strings.ToLower(x) {
		case "true", "on":
			b.first = true
			return nil
		case "false", "off":
			b.first = false
			return nil
		case "auto", "auto_fallback":
			b.first, b.firstFallback = true, defaultTLSFirstFallback
			return nil
		}
		if d, err := time.ParseDuration(x); err == nil && d > 0 {
			b.first, b.firstFallback = true, d
			return nil
		}
	}
	return v.errorf(ErrInvalidValue, "want true, false, auto or a duration such as \"300ms\"")
}

var tlsKeys = func() keys[*tlsBlock] {
	k := newKeys[*tlsBlock]()
	file := func(dst func(b *tlsBlock) *value) handler[*tlsBlock] {
		return func(b *tlsBlock, v value) error {
			if _, err := v.str(); err != nil {
				return err
			}
			*dst(b) = v
			return nil
		}
	}
	k.on(file(func(b *tlsBlock) *value { return &b.cert }), "cert_file")
	k.on(file(func(b *tlsBlock) *value { return &b.key }), "key_file")
	k.on(file(func(b *tlsBlock) *value { return &b.ca }), "ca_file")
	k.on(func(b *tlsBlock, v value) (err error) { b.verify, err = v.boolean(); return }, "verify")
	k.on(func(b *tlsBlock, v value) (err error) { b.allowPlain, err = v.boolean(); return }, "allow_non_tls")
	k.on(func(b *tlsBlock, v value) error { b.timeout = &v; return nil }, "timeout")
	k.on(func(b *tlsBlock, v value) error {
		s, err := v.str()
		if err != nil {
			return err
		}
		switch s {
		case "1.2":
			b.cfg.MinVersion = tls.VersionTLS12
		case "1.3":
			b.cfg.MinVersion = tls.VersionTLS13
		default:
			return v.errorf(ErrInvalidValue, "min_version %q: want \"1.2\" or \"1.3\"", s)
		}
		return nil
	}, "min_version")
	k.on(func(b *tlsBlock, v value) error {
		names, err := v.strings()
		if err != nil {
			return err
		}
		b.cfg.CipherSuites = nil
		for _, n := range names {
			id, ok := cipherSuite(n)
			if !ok {
				return v.errorf(ErrInvalidValue, "unknown or insecure cipher suite %q", n)
			}
			b.cfg.CipherSuites = append(b.cfg.CipherSuites, id)
		}
		return nil
	}, "cipher_suites")
	k.on(func(b *tlsBlock, v value) error {
		names, err := v.strings()
		if err != nil {
			return err
		}
		b.cfg.CurvePreferences = nil
		for _, n := range names {
			id, ok := curve(n)
			if !ok {
				return v.errorf(ErrInvalidValue, "unknown curve %q", n)
			}
			b.cfg.CurvePreferences = append(b.cfg.CurvePreferences, id)
		}
		return nil
	}, "curve_preferences")
	k.refuse(whyTLS, "insecure", "verify_and_map", "verify_cert_and_check_known_urls",
		"allow_insecure_cipher_suites", "connection_rate_limit", "pinned_certs", "cert_store",
		"cert_match_by", "cert_match", "ca_certs_match", "cert_match_skip_invalid", "ocsp_peer",
		"certs", "certificates")
	k.on(handshakeFirst, "handshake_first", "first", "immediate")
	return k
}()

// cipherSuite finds a secure cipher suite by its standard name.
func cipherSuite(name string) (uint16, bool) {
	for _, cs := range tls.CipherSuites() {
		if strings.EqualFold(cs.Name, name) {
			return cs.ID, true
		}
	}
	return 0, false
}

// curve finds a key exchange by the name nats-server uses for it.
func curve(name string) (tls.CurveID, bool) {
	for _, id := range []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521, tls.X25519MLKEM768} {
		if strings.EqualFold(id.String(), name) {
			return id, true
		}
	}
	return 0, false
}
