package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
)

// Operator mode (decentralized authentication) trusts operators, whose
// keys sign accounts, whose keys sign users:
//
//	operator JWT (self-signed: O... by O..., or trusted_keys)
//	   └── signs account JWTs (by the operator key or its signing keys)
//	          └── sign user JWTs (by the account key or its signing keys,
//	              scoped ones adding a permission template)
//
// A client presents its user JWT in CONNECT with the server's nonce
// signed by the user's key (jwt_user.go); the account comes from the
// resolver (resolver.go) and becomes an Account named by its public key
// (jwt_account.go).

// trust is what operator mode trusts, built once in New and only read
// afterwards.
type trust struct {
	// keys are the operator keys that may sign accounts: each operator's
	// identity (unless it has strict signing key usage) and signing keys,
	// or Options.TrustedKeys.
	keys map[string]bool
	// strict are the signing keys of operators with strict signing key
	// usage: an account they sign may sign users only with its signing
	// keys, never with its identity (nats-server's strictSigningKeyUsage).
	strict map[string]bool
	// strictOps are the operators with strict signing key usage.
	strictOps map[string]bool
	// pinned, if not nil, are the only accounts whose users may connect.
	pinned   map[string]bool
	resolver accountResolver
	// dir is the full resolver's store (nil for the MEMORY resolver).
	dir *dirStore
	// sysAccount is the system account's public key ("" for none).
	sysAccount string
	// late is set once New has registered the resolver's accounts: an
	// account registered later has its exports and imports resolved with
	// the others', and is told to the OnAccountUpdate hooks.
	late atomic.Bool
}

// errOperator wraps every problem newTrust finds.
var errOperator = errors.New("operator")

// newTrust decodes and checks the operators of o. Each operator JWT must
// be signed by its own key, valid now (not expired, well formed), and ask
// for no newer server than this one.
func newTrust(o *Options) (*trust, error) {
	t := &trust{keys: map[string]bool{}, strict: map[string]bool{}, strictOps: map[string]bool{}}
	var sys []string
	for i, raw := range o.TrustedOperators {
		tok, err := jwt.ParseDecoratedJWT([]byte(raw))
		if err != nil {
			return nil, fmt.Errorf("%w %d: %v", errOperator, i+1, err)
		}
		opc, err := jwt.DecodeOperatorClaims(tok)
		if err != nil {
			return nil, fmt.Errorf("%w %d: error parsing operator JWT: %v", errOperator, i+1, err)
		}
		if !opc.IsSelfSigned() {
			return nil, fmt.Errorf("%w %s: the JWT is signed by %s, not by the operator itself", errOperator, opc.Subject, opc.Issuer)
		}
		if err := validationError(opc); err != nil {
			return nil, fmt.Errorf("%w %s: %v", errOperator, opc.Subject, err)
		}
		if err := assertVersion(opc.AssertServerVersion); err != nil {
			return nil, fmt.Errorf("%w %s: %v", errOperator, opc.Subject, err)
		}
		if !opc.StrictSigningKeyUsage {
			t.keys[opc.Subject] = true
		} else {
			t.strictOps[opc.Subject] = true
		}
		for _, k := range opc.SigningKeys {
			t.keys[k] = true
			if opc.StrictSigningKeyUsage {
				t.strict[k] = true
			}
		}
		if opc.SystemAccount != "" {
			sys = append(sys, opc.SystemAccount)
		}
	}
	for _, k := range o.TrustedKeys {
		t.keys[k] = true
	}
	t.sysAccount = o.SystemAccount
	switch {
	case t.sysAccount == "" && len(o.TrustedOperators) == 1 && len(sys) == 1:
		// As nats-server: a single operator names the system account.
		t.sysAccount = sys[0]
	case t.sysAccount != "" && len(sys) > 0 && !slices.Contains(sys, t.sysAccount):
		return nil, errors.New("system_account in config and operator JWT must be identical")
	}
	if len(o.ResolverPinnedAccounts) > 0 {
		t.pinned = map[string]bool{}
		for _, k := range o.ResolverPinnedAccounts {
			t.pinned[k] = true
		}
		if t.sysAccount != "" {
			t.pinned[t.sysAccount] = true // the operator's own account always connects
		}
	}
	return t, nil
}

// strictOperator reports whether key is the identity of an operator
// with strict signing key usage: it may not sign accounts.
func (t *trust) strictOperator(key string) bool { return t.strictOps[key] }

// validationError returns the blocking problems of a claim (expired, not
// yet valid, malformed), or nil.
func validationError(c jwt.Claims) error {
	vr := jwt.CreateValidationResults()
	c.Validate(vr)
	if !vr.IsBlocking(true) {
		return nil
	}
	var why []string
	for _, is := range vr.Issues {
		if is.Blocking || is.TimeCheck {
			why = append(why, is.Description)
		}
	}
	return errors.New(strings.Join(why, "; "))
}

// assertVersion refuses an operator that asks for a newer server than
// the protocol version Skiff reports (Version), as nats-server refuses one
// newer than itself.
func assertVersion(want string) error {
	major, minor, update, err := jwt.ParseServerVersion(want)
	if err != nil {
		return fmt.Errorf("expects version %s got error instead: %v", want, err)
	}
	have := strings.SplitN(strings.SplitN(Version, "-", 2)[0], ".", 3)
	var h [3]int
	for i := range h {
		if i < len(have) {
			h[i], _ = strconv.Atoi(have[i])
		}
	}
	for i, w := range []int{major, minor, update} {
		switch {
		case w > h[i]:
			return fmt.Errorf("expects server version %s, newer than %s", want, Version)
		case w < h[i]:
			return nil
		}
	}
	return nil
}

// isRevoked reports whether a JWT of subject issued at issuedAt (unix
// seconds) is revoked: the list revokes the subject, or every user ("*"),
// at or after that time.
func isRevoked(revocations jwt.RevocationList, subject string, issuedAt int64) bool {
	if t, ok := revocations[subject]; ok && t >= issuedAt {
		return true
	}
	t, ok := revocations[jwt.All]
	return ok && t >= issuedAt
}

// untilUnix returns how long until the unix time at, at least zero.
func untilUnix(at int64, now time.Time) time.Duration {
	return max(0, time.Unix(at, 0).Sub(now))
}
