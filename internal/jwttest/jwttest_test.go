package jwttest_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
)

// TestChain: what jwttest mints decodes and chains as a server checks it.
func TestChain(t *testing.T) {
	op := jwttest.NewOperator(t, jwttest.Strict())
	osk := op.WithOperatorSigningKey()
	acc := op.Account("A", jwttest.AccountLimits(3, 4, 5), jwttest.DisallowBearer())
	ask := acc.AddSigningKey()

	opc, err := jwt.DecodeOperatorClaims(op.JWT)
	require.NoError(t, err)
	require.True(t, opc.IsSelfSigned())
	require.True(t, opc.StrictSigningKeyUsage)
	oskPub, _ := osk.PublicKey()
	require.Contains(t, opc.SigningKeys, oskPub)

	ac, err := jwt.DecodeAccountClaims(acc.JWT)
	require.NoError(t, err)
	require.Equal(t, oskPub, ac.Issuer, "accounts are signed by the operator's signing key once it has one")
	require.True(t, opc.DidSign(ac))
	require.Equal(t, int64(3), ac.Limits.Conn)
	require.True(t, ac.Limits.DisallowBearer)

	u := acc.User("u", jwttest.SignedWith(ask), jwttest.Expires(time.Now().Add(time.Hour)), jwttest.Bearer(),
		jwttest.Permissions([]string{"p"}, []string{"s"}), jwttest.UserLimits(7, 8))
	uc, err := jwt.DecodeUserClaims(u.JWT)
	require.NoError(t, err)
	require.Equal(t, acc.Pub, uc.IssuerAccount)
	require.True(t, ac.DidSign(uc))
	require.True(t, uc.BearerToken)
	require.Equal(t, int64(7), uc.Subs)

	creds, err := os.ReadFile(u.CredsFile(t))
	require.NoError(t, err)
	kp, err := jwt.ParseDecoratedUserNKey(creds)
	require.NoError(t, err)
	pub, _ := kp.PublicKey()
	require.Equal(t, u.Pub, pub)
	sig := u.SignNonce("nonce")
	require.NotEmpty(t, sig)
	require.Contains(t, u.Connect("nonce"), u.JWT)

	acc.Revoke(u.Pub, time.Now())
	ac, err = jwt.DecodeAccountClaims(acc.JWT)
	require.NoError(t, err)
	require.True(t, ac.IsClaimRevoked(uc), "Revoke re-signs the account")

	conf := op.Conf(acc)
	require.True(t, strings.HasPrefix(conf, "operator: "))
	require.Contains(t, conf, acc.Pub+": \""+acc.JWT+"\"")
}

// TestScopedAndForeign: scoped users carry no permissions; a foreign
// signer leaves the JWT naming the account it claims.
func TestScopedAndForeign(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	scoped := acc.AddScopedSigningKey(func(s *jwt.UserScope) { s.Template.Pub.Allow = jwt.StringList{"x"} })
	u := acc.User("s", jwttest.Scoped(), jwttest.SignedWith(scoped))
	uc, err := jwt.DecodeUserClaims(u.JWT)
	require.NoError(t, err)
	require.True(t, uc.HasEmptyPermissions())
	ac, err := jwt.DecodeAccountClaims(acc.JWT)
	require.NoError(t, err)
	scope, ok := ac.SigningKeys.GetScope(uc.Issuer)
	require.True(t, ok)
	require.NoError(t, scope.ValidateScopedSigner(uc))

	stranger, err := nkeys.CreateAccount()
	require.NoError(t, err)
	f := acc.User("f", jwttest.SignedWith(stranger))
	fc, err := jwt.DecodeUserClaims(f.JWT)
	require.NoError(t, err)
	require.False(t, ac.DidSign(fc))
}
