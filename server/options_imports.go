package server

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/subject"
)

// Export is a subject an account lets other accounts import
// (nats-server's exports): a stream, whose messages published in the
// account reach the importers' subscribers, or a service, whose requests
// the importers send and whose responders answer them.
type Export struct {
	// Subject is a subject or pattern of the exporting account. The
	// "#" wildcard, which NATS subjects do not have, is refused.
	Subject string
	// Service makes it a service export; otherwise it is a stream.
	Service bool
	// Response is how a service answers a request: one message
	// (Singleton, the default), or several (Streamed, Chunked), each of
	// which keeps the way back open for another Threshold.
	Response ResponseType
	// Threshold bounds how long the way back for a response stays open
	// after the request (or, for Streamed and Chunked, after the last
	// response). Zero: DefaultResponseThreshold.
	Threshold time.Duration
	// Accounts may import it; empty: every account (a public export).
	Accounts []string
	// TokenPosition, if set, restricts the export by subject instead:
	// the token at that position (from 1), which must be "*" in Subject,
	// must be the importing account's name in the subject it imports.
	TokenPosition int

	// jwt is set for an export of an account JWT (operator mode): what
	// the JWT adds to the rules above (jwt_imports.go).
	jwt *jwtExport
}

// ResponseType is how a service export answers a request.
type ResponseType uint8

// The response types, nats-server's.
const (
	// Singleton: one response; the way back closes with it.
	Singleton ResponseType = iota
	// Streamed: any number of responses until the threshold passes
	// without one.
	Streamed
	// Chunked: like Streamed; an empty message also ends it.
	Chunked
)

func (rt ResponseType) String() string {
	switch rt {
	case Streamed:
		return "Streamed"
	case Chunked:
		return "Chunked"
	}
	return "Singleton"
}

// DefaultResponseThreshold is Export.Threshold's default, nats-server's.
const DefaultResponseThreshold = 2 * time.Minute

// Import brings another account's exported subjects into this one.
type Import struct {
	// Account is the exporting account.
	Account string
	// Subject is the exported subject (or a part of it) in the
	// exporting account.
	Subject string
	// Service makes it a service import; otherwise it is a stream.
	Service bool
	// To is, for a stream, the subject the messages get in this account
	// (a mapping of Subject: "*" takes Subject's wildcards in order, $N
	// or {{wildcard(N)}} the Nth); for a service, the subject this
	// account's clients send requests to (Subject's wildcards in the same
	// way). Empty: Subject.
	To string
	// Prefix, for a stream instead of To, is put before Subject.
	Prefix string
	// Share, for a service, gives the responders the requester's details
	// in the Nats-Request-Info header (nats-server's format); without it
	// the header names the requester's account only.
	Share bool

	// token is the activation token of an import of an account JWT
	// (operator mode), which an export that requires one checks.
	token string
}

// importIndex is what validateImports learns, for New to build bridges
// from: per account, its exports and, for each import, its mapping.
type importIndex struct {
	order   []string // the accounts, in the order bridges are made
	exports map[string][]*Export
	streams map[string][]*streamImport // by importing account
	svcs    map[string][]*serviceImport
}

func newImportIndex() *importIndex {
	return &importIndex{exports: map[string][]*Export{}, streams: map[string][]*streamImport{}, svcs: map[string][]*serviceImport{}}
}

type streamImport struct {
	acc, from, to string // from: in the exporter; to: the pattern in the importer
	tr            *subject.Transform
	until         int64 // unix seconds the import lasts until (its activation's expiry), 0: for ever
}

type serviceImport struct {
	acc, from, to string // from: the local pattern; to: in the exporter
	tr            *subject.Transform
	export        *Export
	share         bool
	until         int64
}

// validateImports checks every account's exports and imports the way
// nats-server's parseAccounts does in its second pass, with its messages
// and the accounts' names: an import names a defined account and a
// subject one of its exports covers and lets the importer use; imports
// form no cycle; a service import subject is not taken twice from one
// account.
func (o *Options) validateImports() (*importIndex, error) {
	ix := newImportIndex()
	defined := map[string]bool{}
	for _, a := range o.Accounts {
		defined[a.Name] = true
		ix.order = append(ix.order, a.Name)
	}
	for _, a := range o.Accounts {
		for i := range a.Exports {
			e := &a.Exports[i]
			if err := validateExport(a.Name, e, defined); err != nil {
				return nil, err
			}
			for _, prev := range ix.exports[a.Name] {
				if prev.Subject == e.Subject && prev.Service == e.Service {
					return nil, fmt.Errorf("account %q: %s export %q defined twice", a.Name, kindName(e.Service), e.Subject)
				}
			}
			ix.exports[a.Name] = append(ix.exports[a.Name], e)
		}
	}
	// Streams first, then services, as nats-server adds them.
	for _, a := range o.Accounts {
		for _, im := range a.Imports {
			if !im.Service {
				if err := ix.addStream(a.Name, im, defined); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, a := range o.Accounts {
		for _, im := range a.Imports {
			if im.Service {
				if err := ix.addService(a.Name, im, defined); err != nil {
					return nil, err
				}
			}
		}
	}
	return ix, nil
}

func kindName(service bool) string {
	if service {
		return "service"
	}
	return "stream"
}

// natsPattern checks a subject of an export or import: a valid pattern
// without "#", which is a wildcard to Skiff's index and a literal token
// to NATS.
func natsPattern(s string) error {
	if err := subject.ValidatePattern(s); err != nil {
		return err
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == subject.AnyToken {
			return fmt.Errorf("%q: the '#' wildcard is not a NATS wildcard", s)
		}
	}
	return nil
}

func validateExport(acc string, e *Export, defined map[string]bool) error {
	kind := kindName(e.Service)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("account %q: Error adding %s export %q: %s", acc, kind, e.Subject, fmt.Sprintf(format, args...))
	}
	if err := natsPattern(e.Subject); err != nil {
		return bad("%v", err)
	}
	for _, name := range e.Accounts {
		if !defined[name] {
			return fmt.Errorf("account %q: %q account not defined for %s export", acc, name, kind)
		}
	}
	if e.TokenPosition < 0 {
		return bad("account_token_position %d", e.TokenPosition)
	}
	if p := e.TokenPosition; p > 0 {
		toks := strings.Split(e.Subject, ".")
		if len(toks) < p || toks[p-1] != subject.OneToken {
			return bad("invalid subject: account_token_position %d is not a '*' token", p)
		}
	}
	if !e.Service && (e.Response != Singleton || e.Threshold != 0) {
		return bad("Detected response directive on non-service")
	}
	if e.Response > Chunked {
		return bad("Unknown response type: %d", e.Response)
	}
	if e.Threshold < 0 {
		return bad("negative response threshold %v", e.Threshold)
	}
	return nil
}

// errNotApproved is an export's refusal of an importer it does not list.
var errNotApproved = errors.New("not approved")

// approves reports whether export e lets account imp import subj, which e
// covers, with the activation token (operator mode; "" for none), as
// nats-server's checkAuth: nil and until when (unix seconds, 0 for ever:
// an activation token may expire), or why not.
func (e *Export) approves(imp, subj, token string) (int64, error) {
	if e.TokenPosition > 0 {
		toks := strings.Split(subj, ".")
		if e.TokenPosition <= len(toks) && toks[e.TokenPosition-1] == imp {
			return 0, nil
		}
		return 0, errNotApproved
	}
	if e.jwt != nil && e.jwt.tokenReq {
		return e.jwt.activation(imp, subj, e.Service, token, time.Now())
	}
	if len(e.Accounts) == 0 || slices.Contains(e.Accounts, imp) {
		return 0, nil
	}
	return 0, errNotApproved
}

// export returns the export of account exp of the given kind that covers
// subj and approves imp (with the activation token), and until when it
// does; or nil and why the last export covering subj refused (nil if none
// covers it).
func (ix *importIndex) export(exp, imp, subj string, service bool, token string) (*Export, int64, error) {
	var why error
	for _, e := range ix.exports[exp] {
		if e.Service != service || !subject.Covers(e.Subject, subj) {
			continue
		}
		until, err := e.approves(imp, subj, token)
		if err == nil {
			return e, until, nil
		}
		why = err
	}
	return nil, 0, why
}

// notAuthorized is an import's refusal: nats-server's text, and the
// activation token's problem if there is one.
func notAuthorized(kind string, why error) error {
	if why == nil || errors.Is(why, errNotApproved) {
		return fmt.Errorf("%s import not authorized", kind)
	}
	return fmt.Errorf("%s import not authorized: %w", kind, why)
}

func (ix *importIndex) addStream(acc string, im Import, defined map[string]bool) error {
	bad := func(err error) error {
		return fmt.Errorf("account %q: Error adding stream import %q from account %q: %w", acc, im.Subject, im.Account, err)
	}
	if !defined[im.Account] {
		return fmt.Errorf("account %q: %q account not defined for stream import", acc, im.Account)
	}
	if err := natsPattern(im.Subject); err != nil {
		return bad(err)
	}
	if im.Share {
		return bad(errors.New("share is for service imports"))
	}
	to := im.To
	switch {
	case im.Prefix != "" && im.To != "":
		return bad(errors.New("Stream import can not have a 'prefix' and a 'to' property")) //nolint:staticcheck // nats-server's text
	case im.Prefix != "":
		if p := strings.TrimSuffix(im.Prefix, "."); subject.ValidateSubject(p) != nil || !subject.IsLiteral(p) {
			return bad(errors.New("stream import prefix can not contain wildcard tokens"))
		}
		to = strings.TrimSuffix(im.Prefix, ".") + "." + im.Subject
	case to == "":
		to = im.Subject
	}
	e, until, why := ix.export(im.Account, acc, im.Subject, false, im.token)
	if e == nil {
		return bad(notAuthorized("stream", why))
	}
	si := &streamImport{acc: im.Account, from: im.Subject, to: to, until: until}
	if to != im.Subject {
		tr, err := importTransform(im.Subject, to)
		if err != nil {
			return fmt.Errorf("account %q: failed to create mapping transform for stream import subject from %q to %q: %w",
				acc, im.Subject, to, err)
		}
		si.tr, si.to = tr, tr.Pattern()
	}
	if ix.streamCycle(acc, im.Account, si.to) || ix.streamCycle(acc, im.Account, si.from) {
		return bad(errors.New("import forms a cycle"))
	}
	for _, prev := range ix.streams[acc] {
		if prev.acc == im.Account && prev.from == im.Subject {
			return bad(errors.New("stream import already exists"))
		}
	}
	ix.streams[acc] = append(ix.streams[acc], si)
	return nil
}

func (ix *importIndex) addService(acc string, im Import, defined map[string]bool) error {
	local := cmp.Or(im.To, im.Subject)
	bad := func(err error) error {
		return fmt.Errorf("account %q: Error adding service import %q from account %q: %w", acc, im.Subject, im.Account, err)
	}
	if !defined[im.Account] {
		return fmt.Errorf("account %q: %q account not defined for service import", acc, im.Account)
	}
	if im.Prefix != "" {
		return bad(errors.New("prefix is for stream imports"))
	}
	for _, prev := range ix.svcs[acc] {
		if prev.acc == im.Account && prev.from == local {
			return fmt.Errorf("account %q: Duplicate service import subject %q, previously used in import for account %q, subject %q",
				acc, local, prev.acc, prev.to)
		}
	}
	if err := natsPattern(im.Subject); err != nil {
		return bad(err)
	}
	e, until, why := ix.export(im.Account, acc, im.Subject, true, im.token)
	if e == nil {
		return bad(notAuthorized("service", why))
	}
	si := &serviceImport{acc: im.Account, from: local, to: im.Subject, export: e, share: im.Share, until: until}
	if local != im.Subject {
		// The local subject may refer to the exported subject's
		// wildcards ("local.$2.$1"): the mapping from the exported
		// subject to the local one, reversed, is the way requests go.
		tr, err := importTransform(im.Subject, local)
		if err == nil {
			tr, err = tr.Reverse()
		}
		if err != nil {
			return fmt.Errorf("account %q: failed to create mapping transform for service import subject from %q to %q: %w",
				acc, local, im.Subject, err)
		}
		si.tr, si.from = tr, tr.Source()
	} else if err := natsPattern(local); err != nil {
		return bad(err)
	}
	if ix.serviceCycle(acc, im.Account, si.from) {
		return bad(errors.New("import forms a cycle"))
	}
	ix.svcs[acc] = append(ix.svcs[acc], si)
	return nil
}

// importTransform is the transform of an import, which must use every
// wildcard of the source, as nats-server's strict transforms must.
func importTransform(src, dst string) (*subject.Transform, error) {
	tr, err := subject.NewTransform(src, dst)
	if err != nil {
		return nil, err
	}
	if !tr.UsesEveryWildcard() {
		return nil, fmt.Errorf("%w: %q does not use every wildcard of %q", subject.ErrTransform, dst, src)
	}
	return tr, nil
}

// maxCycleSearch bounds the accounts a cycle search visits, as
// nats-server's MaxAccountCycleSearchDepth.
const maxCycleSearch = 1024

// streamCycle reports whether account imp importing to (in imp) from
// account exp closes a cycle of stream imports: nats-server's
// checkStreamImportsForCycles, which follows exp's own stream imports
// that collide with the subject back towards the accounts visited, as
// long as exp exports the subject.
func (ix *importIndex) streamCycle(imp, exp, to string) bool {
	return ix.cycleFrom(exp, to, map[string]bool{imp: true}, func(acc, subj string) []importEdge {
		exported := false
		for _, e := range ix.exports[acc] {
			if !e.Service && subject.Covers(e.Subject, subj) {
				exported = true
				break
			}
		}
		if !exported {
			return nil
		}
		var edges []importEdge
		for _, si := range ix.streams[acc] {
			edges = append(edges, importEdge{acc: si.acc, on: si.to, next: si.to})
		}
		return edges
	})
}

// serviceCycle is nats-server's checkServiceImportsForCycles for account
// imp importing a service from account exp on the local subject from.
func (ix *importIndex) serviceCycle(imp, exp, from string) bool {
	return ix.cycleFrom(exp, from, map[string]bool{imp: true}, func(acc, _ string) []importEdge {
		var edges []importEdge
		for _, si := range ix.svcs[acc] {
			edges = append(edges, importEdge{acc: si.acc, on: si.to, next: si.from})
		}
		return edges
	})
}

// importEdge is an import a cycle search may follow: from account acc,
// when the subject searched intersects on; the search goes on with next
// if the subject covers it.
type importEdge struct{ acc, on, next string }

// cycleFrom searches, depth first, the imports of account acc that
// collide with subj (edges lists them) for an account visited already.
func (ix *importIndex) cycleFrom(acc, subj string, visited map[string]bool, edges func(acc, subj string) []importEdge) bool {
	if len(visited) >= maxCycleSearch {
		return true
	}
	for _, e := range edges(acc, subj) {
		if !subject.Intersects(subj, e.on) {
			continue
		}
		if visited[e.acc] {
			return true
		}
		visited[acc] = true
		next := subj
		if subject.Covers(next, e.next) {
			next = e.next
		}
		if ix.cycleFrom(e.acc, next, visited, edges) {
			return true
		}
	}
	return false
}
