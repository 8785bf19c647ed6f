// Package jwttest mints the material of operator mode for tests: an
// operator, accounts it signs, users they sign, and the users' .creds,
// with nats-io/jwt and nats-io/nkeys (no crypto of its own). Every
// helper fails the test on error.
//
//	op := jwttest.NewOperator(t)
//	acc := op.Account("A", jwttest.AccountLimits(10, -1, -1))
//	u := acc.User("u", jwttest.Expires(time.Now().Add(time.Minute)))
//	conf := op.Conf(acc)          // operator, resolver: MEMORY, resolver_preload
//	nc, _ := nats.Connect(url, nats.UserCredentials(u.CredsFile(t)))
//
// Exports and imports (with activation tokens: Activation) and JetStream
// limits are account options too.
//
// Changing an account (Update, Revoke, AddSigningKey) re-signs its JWT:
// build the server's configuration after the changes. Values are not safe
// for concurrent use; they belong to the test goroutine.
package jwttest

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Operator is an operator: its key, and its self-signed JWT.
type Operator struct {
	t      testing.TB
	Key    nkeys.KeyPair
	Pub    string
	Claims *jwt.OperatorClaims
	JWT    string
	signer nkeys.KeyPair // signs accounts: Key, or a signing key (WithOperatorSigningKey)
}

// OperatorOption changes an operator's claims before they are signed.
type OperatorOption func(*jwt.OperatorClaims)

// Strict sets strict signing key usage: accounts must be signed by an
// operator signing key, and their users by account signing keys.
func Strict() OperatorOption {
	return func(c *jwt.OperatorClaims) { c.StrictSigningKeyUsage = true }
}

// SystemAccount names the operator's system account.
func SystemAccount(pub string) OperatorOption {
	return func(c *jwt.OperatorClaims) { c.SystemAccount = pub }
}

// OperatorExpires sets the operator JWT's expiry.
func OperatorExpires(at time.Time) OperatorOption {
	return func(c *jwt.OperatorClaims) { c.Expires = at.Unix() }
}

// NewOperator mints an operator.
func NewOperator(t testing.TB, opts ...OperatorOption) *Operator {
	t.Helper()
	kp := must(t)(nkeys.CreateOperator())
	o := &Operator{t: t, Key: kp, Pub: publicKey(t, kp), signer: kp}
	o.Claims = jwt.NewOperatorClaims(o.Pub)
	o.Claims.Name = "test-operator"
	for _, opt := range opts {
		opt(o.Claims)
	}
	o.sign()
	return o
}

func (o *Operator) sign() {
	o.t.Helper()
	o.JWT = encode(o.t, "the operator", o.Claims, o.Key)
}

// encode signs claims with kp, or fails t.
func encode(t testing.TB, what string, claims interface {
	Encode(nkeys.KeyPair) (string, error)
}, kp nkeys.KeyPair) string {
	t.Helper()
	j, err := claims.Encode(kp)
	if err != nil {
		t.Fatalf("jwttest: encoding %s: %v", what, err)
	}
	return j
}

// WithOperatorSigningKey adds an operator signing key, which signs the
// accounts minted from now on, and returns it.
func (o *Operator) WithOperatorSigningKey() nkeys.KeyPair {
	o.t.Helper()
	kp := must(o.t)(nkeys.CreateOperator())
	o.Claims.SigningKeys.Add(publicKey(o.t, kp))
	o.sign()
	o.signer = kp
	return kp
}

// Update changes the operator's claims and re-signs its JWT.
func (o *Operator) Update(f OperatorOption) {
	o.t.Helper()
	f(o.Claims)
	o.sign()
}

// DeleteRequest returns the body of a $SYS.REQ.CLAIMS.DELETE request for
// the accounts, as `nsc delete account` makes it: a JWT the operator
// signs for itself, listing them.
func (o *Operator) DeleteRequest(accounts ...string) string {
	o.t.Helper()
	gc := jwt.NewGenericClaims(o.Pub)
	gc.Data["accounts"] = accounts
	return encode(o.t, "a delete request", gc, o.Key)
}

// Preload returns the accounts' JWTs by public key, for resolver_preload.
func (o *Operator) Preload(accounts ...*Account) map[string]string {
	m := make(map[string]string, len(accounts))
	for _, a := range accounts {
		m[a.Pub] = a.JWT
	}
	return m
}

// Conf returns a configuration file's operator-mode lines: the operator,
// resolver: MEMORY and the accounts preloaded.
func (o *Operator) Conf(accounts ...*Account) string {
	var b strings.Builder
	fmt.Fprintf(&b, "operator: %q\nresolver: MEMORY\nresolver_preload: {\n", o.JWT)
	pre := o.Preload(accounts...)
	keys := make([]string, 0, len(pre))
	for k := range pre {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %q\n", k, pre[k])
	}
	b.WriteString("}\n")
	return b.String()
}

// Account is an account: its key and JWT.
type Account struct {
	t      testing.TB
	op     *Operator
	Key    nkeys.KeyPair
	Pub    string
	Claims *jwt.AccountClaims
	JWT    string
	signer nkeys.KeyPair
}

// AccountOption changes an account's claims before they are signed.
type AccountOption func(*Account)

// AccountExpires sets the account JWT's expiry.
func AccountExpires(at time.Time) AccountOption {
	return func(a *Account) { a.Claims.Expires = at.Unix() }
}

// AccountNotBefore sets the time the account JWT becomes valid.
func AccountNotBefore(at time.Time) AccountOption {
	return func(a *Account) { a.Claims.NotBefore = at.Unix() }
}

// AccountLimits sets the account's connections, subscriptions per
// connection and payload (-1 for none, 0 for nothing at all).
func AccountLimits(conn, subs, payload int64) AccountOption {
	return func(a *Account) {
		a.Claims.Limits.Conn, a.Claims.Limits.Subs, a.Claims.Limits.Payload = conn, subs, payload
	}
}

// DisallowBearer refuses the account's bearer tokens.
func DisallowBearer() AccountOption {
	return func(a *Account) { a.Claims.Limits.DisallowBearer = true }
}

// DefaultPermissions sets the permissions of the account's users that
// have none of their own.
func DefaultPermissions(pubAllow, subAllow []string) AccountOption {
	return func(a *Account) {
		a.Claims.DefaultPermissions.Pub.Allow = pubAllow
		a.Claims.DefaultPermissions.Sub.Allow = subAllow
	}
}

// AccountSignedBy signs the account with kp instead of its operator's
// signer (a foreign operator, an untrusted key).
func AccountSignedBy(kp nkeys.KeyPair) AccountOption {
	return func(a *Account) { a.signer = kp }
}

// AccountClaims applies f to the account's claims (anything the other
// options do not say).
func AccountClaims(f func(*jwt.AccountClaims)) AccountOption {
	return func(a *Account) { f(a.Claims) }
}

// Exports adds exports to the account's claims.
func Exports(e ...*jwt.Export) AccountOption {
	return func(a *Account) { a.Claims.Exports.Add(e...) }
}

// Imports adds imports to the account's claims.
func Imports(i ...*jwt.Import) AccountOption {
	return func(a *Account) { a.Claims.Imports.Add(i...) }
}

// JetStream gives the account JetStream with limits l (mem_storage or
// disk_storage not 0 enables it).
func JetStream(l jwt.JetStreamLimits) AccountOption {
	return func(a *Account) { a.Claims.Limits.JetStreamLimits = l }
}

// Account mints an account signed by the operator.
func (o *Operator) Account(name string, opts ...AccountOption) *Account {
	o.t.Helper()
	kp := must(o.t)(nkeys.CreateAccount())
	a := &Account{t: o.t, op: o, Key: kp, Pub: publicKey(o.t, kp), signer: o.signer}
	a.Claims = jwt.NewAccountClaims(a.Pub)
	a.Claims.Name = name
	for _, opt := range opts {
		opt(a)
	}
	a.sign()
	return a
}

func (a *Account) sign() {
	a.t.Helper()
	a.JWT = encode(a.t, "account "+a.Claims.Name, a.Claims, a.signer)
}

// Update applies opts to the account and re-signs its JWT.
func (a *Account) Update(opts ...AccountOption) {
	a.t.Helper()
	for _, opt := range opts {
		opt(a)
	}
	a.sign()
}

// AddSigningKey adds an account signing key and returns it.
func (a *Account) AddSigningKey() nkeys.KeyPair {
	a.t.Helper()
	kp := must(a.t)(nkeys.CreateAccount())
	a.Claims.SigningKeys.Add(publicKey(a.t, kp))
	a.sign()
	return kp
}

// AddScopedSigningKey adds a scoped account signing key whose users get
// template (jwt.NewUserScope's defaults, changed by f) and returns it.
func (a *Account) AddScopedSigningKey(f func(*jwt.UserScope)) nkeys.KeyPair {
	a.t.Helper()
	kp := must(a.t)(nkeys.CreateAccount())
	scope := jwt.NewUserScope()
	scope.Key = publicKey(a.t, kp)
	scope.Role = "test"
	if f != nil {
		f(scope)
	}
	a.Claims.SigningKeys.AddScopedSigner(scope)
	a.sign()
	return kp
}

// Revoke revokes the JWTs of the user pub (or every user, jwt.All)
// issued at or before at, and re-signs the account.
func (a *Account) Revoke(pub string, at time.Time) {
	a.t.Helper()
	a.Claims.RevokeAt(pub, at)
	a.sign()
}

// ActivationOption changes an activation token's claims, or its signer,
// before signing.
type ActivationOption func(*activationBuild)

type activationBuild struct {
	acc    *Account
	claims *jwt.ActivationClaims
	signer nkeys.KeyPair
}

// ActivationExpires sets the activation token's expiry.
func ActivationExpires(at time.Time) ActivationOption {
	return func(b *activationBuild) { b.claims.Expires = at.Unix() }
}

// ActivationSignedWith signs the token with kp: one of the exporting
// account's signing keys (the token then names the account as
// issuer_account), or a foreign key.
func ActivationSignedWith(kp nkeys.KeyPair) ActivationOption {
	return func(b *activationBuild) {
		b.signer = kp
		if pub, err := kp.PublicKey(); err == nil && pub != b.acc.Pub {
			b.claims.IssuerAccount = b.acc.Pub
		}
	}
}

// ActivationClaims applies f to the token's claims.
func ActivationClaims(f func(*jwt.ActivationClaims)) ActivationOption {
	return func(b *activationBuild) { f(b.claims) }
}

// Activation mints an activation token of the account's, letting account
// importer import subject (an export of the kind given), signed by the
// account's key unless ActivationSignedWith says otherwise.
func (a *Account) Activation(importer, subject string, kind jwt.ExportType, opts ...ActivationOption) string {
	a.t.Helper()
	b := &activationBuild{acc: a, claims: jwt.NewActivationClaims(importer), signer: a.Key}
	b.claims.ImportSubject = jwt.Subject(subject)
	b.claims.ImportType = kind
	for _, opt := range opts {
		opt(b)
	}
	return encode(a.t, "an activation of account "+a.Claims.Name, b.claims, b.signer)
}

// RevokeActivation revokes, in the account's export of subject, the
// activation tokens of account importer (or every account, jwt.All)
// issued at or before at, and re-signs the account.
func (a *Account) RevokeActivation(subject, importer string, at time.Time) {
	a.t.Helper()
	for _, e := range a.Claims.Exports {
		if string(e.Subject) == subject {
			e.RevokeAt(importer, at)
			a.sign()
			return
		}
	}
	a.t.Fatalf("jwttest: account %s has no export %q", a.Claims.Name, subject)
}

// User is a user: its key, seed and JWT.
type User struct {
	t      testing.TB
	Key    nkeys.KeyPair
	Pub    string
	Seed   []byte
	Claims *jwt.UserClaims
	JWT    string
}

// UserOption changes a user's claims, or its signer, before signing.
type UserOption func(*userBuild)

type userBuild struct {
	acc    *Account
	claims *jwt.UserClaims
	signer nkeys.KeyPair
}

// Expires sets the user JWT's expiry.
func Expires(at time.Time) UserOption {
	return func(b *userBuild) { b.claims.Expires = at.Unix() }
}

// NotBefore sets the time the user JWT becomes valid.
func NotBefore(at time.Time) UserOption {
	return func(b *userBuild) { b.claims.NotBefore = at.Unix() }
}

// Bearer makes the JWT a bearer token: the server does not ask for the
// nonce's signature.
func Bearer() UserOption {
	return func(b *userBuild) { b.claims.BearerToken = true }
}

// Permissions sets the user's publish and subscribe allow lists (nil:
// no list).
func Permissions(pubAllow, subAllow []string) UserOption {
	return func(b *userBuild) {
		b.claims.Pub.Allow = pubAllow
		b.claims.Sub.Allow = subAllow
	}
}

// Deny sets the user's publish and subscribe deny lists.
func Deny(pubDeny, subDeny []string) UserOption {
	return func(b *userBuild) {
		b.claims.Pub.Deny = pubDeny
		b.claims.Sub.Deny = subDeny
	}
}

// UserLimits sets the user's subscriptions and payload (-1 for none).
func UserLimits(subs, payload int64) UserOption {
	return func(b *userBuild) {
		// Payload alone would name the claims' Payload method.
		b.claims.Subs, b.claims.Limits.Payload = subs, payload
	}
}

// Src limits the addresses the user may connect from.
func Src(cidrs ...string) UserOption {
	return func(b *userBuild) { b.claims.Src = cidrs }
}

// Times limits the user to connect times ("15:04:05" each, in locale, ""
// for the server's).
func Times(locale string, ranges ...jwt.TimeRange) UserOption {
	return func(b *userBuild) { b.claims.Times, b.claims.Locale = ranges, locale }
}

// ConnectionTypes limits the kinds of connection the user may make
// (jwt.ConnectionTypeStandard, ...).
func ConnectionTypes(types ...string) UserOption {
	return func(b *userBuild) { b.claims.AllowedConnectionTypes = types }
}

// Tags sets the user JWT's tags ("key:value"), which scope templates read.
func Tags(tags ...string) UserOption {
	return func(b *userBuild) { b.claims.Tags = tags }
}

// SignedWith signs the user with kp: an account signing key (the JWT then
// names its account as issuer_account), or a foreign key.
func SignedWith(kp nkeys.KeyPair) UserOption {
	return func(b *userBuild) {
		b.signer = kp
		if pub, err := kp.PublicKey(); err == nil && pub != b.acc.Pub {
			b.claims.IssuerAccount = b.acc.Pub
		}
	}
}

// Scoped clears the user's own permissions and limits, as a scoped
// signing key requires (combine with SignedWith).
func Scoped() UserOption {
	return func(b *userBuild) { b.claims.SetScoped(true) }
}

// UserClaims applies f to the user's claims.
func UserClaims(f func(*jwt.UserClaims)) UserOption {
	return func(b *userBuild) { f(b.claims) }
}

// User mints a user of the account, signed by the account's key unless
// SignedWith says otherwise.
func (a *Account) User(name string, opts ...UserOption) *User {
	a.t.Helper()
	kp := must(a.t)(nkeys.CreateUser())
	u := &User{t: a.t, Key: kp, Pub: publicKey(a.t, kp)}
	seed, err := kp.Seed()
	if err != nil {
		a.t.Fatalf("jwttest: user seed: %v", err)
	}
	u.Seed = seed
	b := &userBuild{acc: a, claims: jwt.NewUserClaims(u.Pub), signer: a.Key}
	b.claims.Name = name
	for _, opt := range opts {
		opt(b)
	}
	u.Claims = b.claims
	u.JWT = encode(a.t, "user "+name, b.claims, b.signer)
	return u
}

// Creds returns the user's .creds file contents.
func (u *User) Creds() []byte {
	u.t.Helper()
	b, err := jwt.FormatUserConfig(u.JWT, u.Seed)
	if err != nil {
		u.t.Fatalf("jwttest: formatting creds: %v", err)
	}
	return b
}

// CredsFile writes the user's .creds into a temporary directory of t and
// returns its path.
func (u *User) CredsFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), u.Claims.Name+".creds")
	if err := os.WriteFile(p, u.Creds(), 0o600); err != nil {
		t.Fatalf("jwttest: writing creds: %v", err)
	}
	return p
}

// SignNonce signs a server's nonce with the user's key, in the URL-safe
// base64 a CONNECT's sig carries.
func (u *User) SignNonce(nonce string) string {
	u.t.Helper()
	sig, err := u.Key.Sign([]byte(nonce))
	if err != nil {
		u.t.Fatalf("jwttest: signing the nonce: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(sig)
}

// Connect returns the CONNECT arguments (JSON) of the user for a server's
// nonce: its JWT and the nonce's signature.
func (u *User) Connect(nonce string) string {
	return fmt.Sprintf(`{"verbose":false,"pedantic":false,"protocol":1,"jwt":%q,"sig":%q}`, u.JWT, u.SignNonce(nonce))
}

func publicKey(t testing.TB, kp nkeys.KeyPair) string {
	t.Helper()
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatalf("jwttest: public key: %v", err)
	}
	return pub
}

// must returns a function that unwraps a key pair or fails t.
func must(t testing.TB) func(nkeys.KeyPair, error) nkeys.KeyPair {
	return func(kp nkeys.KeyPair, err error) nkeys.KeyPair {
		t.Helper()
		if err != nil {
			t.Fatalf("jwttest: creating a key: %v", err)
		}
		return kp
	}
}
