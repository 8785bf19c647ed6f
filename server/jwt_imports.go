package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/jwt/v2"
)

// The exports and imports of account JWTs become those of configured
// accounts (options_imports.go), checked by the same rules, bridged the
// same way (imports.go). What a JWT adds:
//
//   - An export may require an activation token (token_req): an import
//     then needs one, signed by the exporting account (or, naming it as
//     issuer_account, by one of its signing keys), for the importing
//     account, of the import's kind and covering its subject, not expired,
//     and not revoked by the export. The import lasts until the token
//     expires.
//   - An export or import that cannot be made is logged and left out; the
//     account is kept, as nats-server keeps it (nats-server logs it at
//     debug level, Skiff at warn). An account JWT whose imports do not
//     validate at all (a token that does not decode, or that names another
//     importer or exporter) is refused whole, by both, before this.
//
// Exports and imports are resolved when New registers the resolver's
// accounts, and again whenever an account is registered later or its JWT
// changes (jwt_update.go).

// jwtExport is what an account JWT's export adds to an Export.
type jwtExport struct {
	exporter string               // the exporting account's public key
	signers  map[string]jwt.Scope // its keys that may sign activations with issuer_account
	tokenReq bool
	revoked  jwt.RevocationList // activations revoked, by importing account ("*": all) and time
}

// Why an import's activation token is refused.
var (
	errActivationMissing = errors.New("the export requires an activation token and the import has none")
	errActivationInvalid = errors.New("activation token not valid")
	errActivationIssuer  = errors.New("activation token not signed by the exporting account")
	errActivationScope   = errors.New("activation token not for this import")
	errActivationExpired = errors.New("activation token has expired")
	errActivationRevoked = errors.New("activation token revoked by the export")
)

// activation checks the activation token an account imp presents to
// import subj (a service if service) from x's export, as nats-server's
// checkActivation, and returns the token's expiry (unix seconds, 0: none).
func (x *jwtExport) activation(imp, subj string, service bool, token string, now time.Time) (int64, error) {
	if token == "" {
		return 0, errActivationMissing
	}
	act, err := jwt.DecodeActivationClaims(token)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errActivationInvalid, err)
	}
	kind := jwt.Stream
	if service {
		kind = jwt.Service
	}
	switch {
	case act.IssuerAccount == "" && act.Issuer != x.exporter:
		return 0, fmt.Errorf("%w: signed by %s", errActivationIssuer, act.Issuer)
	case act.IssuerAccount != "" && act.IssuerAccount != x.exporter:
		return 0, fmt.Errorf("%w: issued for account %s", errActivationIssuer, act.IssuerAccount)
	case act.IssuerAccount != "" && !hasKey(x.signers, act.Issuer):
		return 0, fmt.Errorf("%w: %s is not one of its signing keys", errActivationIssuer, act.Issuer)
	case act.Subject != imp:
		return 0, fmt.Errorf("%w: issued to account %s", errActivationScope, act.Subject)
	case act.ImportType != kind:
		return 0, fmt.Errorf("%w: for a %s import", errActivationScope, act.ImportType)
	case !jwt.Subject(subj).IsContainedIn(act.ImportSubject):
		return 0, fmt.Errorf("%w: for subject %q", errActivationScope, act.ImportSubject)
	case act.Expires != 0 && act.Expires <= now.Unix():
		return 0, fmt.Errorf("%w: at %s", errActivationExpired, time.Unix(act.Expires, 0).UTC().Format(time.RFC3339))
	}
	if err := validationError(act); err != nil {
		return 0, fmt.Errorf("%w: %v", errActivationInvalid, err)
	}
	if isRevoked(x.revoked, act.Subject, act.IssuedAt) {
		return 0, errActivationRevoked
	}
	return act.Expires, nil
}

func hasKey(m map[string]jwt.Scope, k string) bool {
	_, ok := m[k]
	return ok
}

// exportFromJWT is the Export of an account JWT's export je of account a.
func exportFromJWT(a *Account, je *jwt.Export) Export {
	e := Export{Subject: string(je.Subject), Service: je.IsService(), TokenPosition: int(je.AccountTokenPosition)}
	if e.Service {
		switch je.ResponseType {
		case jwt.ResponseTypeStream:
			e.Response = Streamed
		case jwt.ResponseTypeChunked:
			e.Response = Chunked
		}
		e.Threshold = je.ResponseThreshold
	}
	e.jwt = &jwtExport{exporter: a.name, signers: a.jwt.state().signers, tokenReq: je.TokenReq, revoked: je.Revocations}
	return e
}

// importFromJWT is the Import of an account JWT's import ji, read as
// nats-server reads it. For a stream, subject is the exporter's, and the
// deprecated to a prefix; for a service, subject is the importer's and to
// the exporter's; local_subject, which replaces to, is the importer's in
// both.
func importFromJWT(ji *jwt.Import) Import {
	im := Import{Account: ji.Account, Service: ji.IsService(), Share: ji.Share, token: ji.Token}
	subj, local, to := string(ji.Subject), string(ji.LocalSubject), ji.GetTo()
	switch {
	case local != "":
		im.Subject, im.To = subj, local
	case im.Service && to != "":
		im.Subject, im.To = to, subj
	case im.Service:
		im.Subject = subj
	default:
		im.Subject, im.Prefix = subj, to
	}
	return im
}

// jwtImportIndex resolves the exports and imports of the operator-mode
// accounts registered, in their JWTs' order (accounts by public key;
// stream imports before service imports, as for configured accounts). An
// account refused for what its JWT asks (unsupportedClaims), or deleted,
// exports and imports nothing. What cannot be made is logged if it is
// account changed's, or changed is "".
func (s *Server) jwtImportIndex(changed string) *importIndex {
	logs := func(acc, from string) bool { return changed == "" || acc == changed || from == changed }
	ix := newImportIndex()
	defined := map[string]bool{}
	var accs []*Account
	for _, a := range s.accounts.all() {
		if a.jwt == nil || a.jwt.state().refused != "" || a.jwt.deleted.Load() {
			continue
		}
		accs = append(accs, a)
		defined[a.name] = true
		ix.order = append(ix.order, a.name)
	}
	for _, a := range accs {
		s.jwtExports(ix, a, defined, logs(a.name, ""))
	}
	for _, service := range []bool{false, true} {
		for _, a := range accs {
			st := a.jwt.state()
			for _, ji := range st.claims.Imports {
				if ji.IsService() != service {
					continue
				}
				im := importFromJWT(ji)
				add := ix.addStream
				if service {
					add = ix.addService
				}
				if err := add(a.name, im, defined); err != nil && logs(a.name, im.Account) {
					s.log.Warn("account JWT import not made", "account", a.name, "name", st.claims.Name,
						"from", im.Account, "subject", im.Subject, "err", err)
				}
			}
		}
	}
	return ix
}

// jwtExports adds the exports of account a's JWT to ix, each checked as a
// configured one.
func (s *Server) jwtExports(ix *importIndex, a *Account, defined map[string]bool, logs bool) {
	st := a.jwt.state()
	for _, je := range st.claims.Exports {
		e := exportFromJWT(a, je)
		err := validateExport(a.name, &e, defined)
		for _, prev := range ix.exports[a.name] {
			if err == nil && prev.Subject == e.Subject && prev.Service == e.Service {
				err = fmt.Errorf("%s export %q defined twice", kindName(e.Service), e.Subject)
			}
		}
		if err != nil {
			if !logs {
				continue
			}
			s.log.Warn("account JWT export not made", "account", a.name, "name", st.claims.Name, "err", err)
			continue
		}
		ix.exports[a.name] = append(ix.exports[a.name], &e)
	}
}
