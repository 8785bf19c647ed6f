package server

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nats-io/jwt/v2"

	"github.com/skiffmq/skiff/subject"
)

// A scoped signing key signs users that carry no permissions of their
// own: they get the scope's template, whose subjects may hold
// {{operations}} filled in from the user's and the account's claims
// (nats-server's processUserPermissionsTemplate):
//
//	{{name()}}             the user JWT's name
//	{{subject()}}          the user's public key
//	{{account-name()}}     the account JWT's name
//	{{account-subject()}}  the account's public key
//	{{tag(k)}}             every value v of a user tag "k:v"
//	{{account-tag(k)}}     likewise for the account's tags
//
// A subject with tag operations expands to every combination of values.

var templateOp = regexp.MustCompile(`{{2}([^}]+)}{2}`)

// maxTemplateExpansions bounds the subjects one template list expands to,
// as nats-server's.
const maxTemplateExpansions = 4096

// errTemplate wraps every template problem.
var errTemplate = errors.New("permission template")

// expandTemplate returns the user permissions and limits of template for
// the user uc of the account ac. An allow list that expands to nothing
// becomes a deny of everything, so that a template never grants more
// than it says.
func expandTemplate(template jwt.UserPermissionLimits, uc *jwt.UserClaims, ac *jwt.AccountClaims) (jwt.UserPermissionLimits, error) {
	lim := template
	p := &lim.Permissions
	var err error
	subAllow, pubAllow := len(p.Sub.Allow) > 0, len(p.Pub.Allow) > 0
	if p.Sub.Allow, err = expandList(template.Sub.Allow, false, uc, ac); err != nil {
		return lim, err
	}
	if p.Sub.Deny, err = expandList(template.Sub.Deny, true, uc, ac); err != nil {
		return lim, err
	}
	if p.Pub.Allow, err = expandList(template.Pub.Allow, false, uc, ac); err != nil {
		return lim, err
	}
	if p.Pub.Deny, err = expandList(template.Pub.Deny, true, uc, ac); err != nil {
		return lim, err
	}
	if subAllow && len(p.Sub.Allow) == 0 {
		p.Sub.Deny = append(clone(p.Sub.Deny), ">")
	}
	if pubAllow && len(p.Pub.Allow) == 0 {
		p.Pub.Deny = append(clone(p.Pub.Deny), ">")
	}
	return lim, nil
}

// expandList expands the subjects of one list. A subject that comes out
// invalid (a missing tag, say) is dropped from an allow list; in a deny
// list (strict) it is an error, since dropping a deny would grant more.
func expandList(list jwt.StringList, strict bool, uc *jwt.UserClaims, ac *jwt.AccountClaims) (jwt.StringList, error) {
	templated := false
	for _, s := range list {
		if templateOp.MatchString(s) {
			templated = true
			break
		}
	}
	if !templated {
		return clone(list), nil
	}
	var out jwt.StringList
	for _, s := range list {
		ops := templateOp.FindAllString(s, -1)
		values := make([][]string, len(ops))
		combos := 1
		for i, op := range ops {
			v, err := templateValues(strings.TrimSpace(op[2:len(op)-2]), strict, uc, ac)
			if err != nil {
				return nil, fmt.Errorf("%w: %q: %v", errTemplate, s, err)
			}
			values[i] = v
			if combos > maxTemplateExpansions/len(v) {
				return nil, fmt.Errorf("%w: expansion exceeds limit: %d", errTemplate, maxTemplateExpansions)
			}
			combos *= len(v)
		}
		if len(out) > maxTemplateExpansions-combos {
			return nil, fmt.Errorf("%w: expansion exceeds limit: %d", errTemplate, maxTemplateExpansions)
		}
		idx := make([]int, len(ops))
		for range combos {
			subj := s
			for i, op := range ops {
				subj = strings.ReplaceAll(subj, op, values[i][idx[i]])
			}
			switch {
			case subject.ValidatePattern(subj) == nil:
				out = append(out, subj)
			case strict:
				return nil, fmt.Errorf("%w: generated invalid subject %q", errTemplate, subj)
			}
			// The next combination, the last operation varying fastest.
			for i := len(idx) - 1; i >= 0; i-- {
				if idx[i]++; idx[i] < len(values[i]) {
					break
				}
				idx[i] = 0
			}
		}
	}
	return out, nil
}

// templateValues returns the values of one template operation (never
// empty).
func templateValues(op string, strict bool, uc *jwt.UserClaims, ac *jwt.AccountClaims) ([]string, error) {
	switch {
	case strings.EqualFold(op, "name()"):
		return []string{uc.Name}, nil
	case strings.EqualFold(op, "subject()"):
		return []string{uc.Subject}, nil
	case strings.EqualFold(op, "account-name()"):
		return []string{ac.Name}, nil
	case strings.EqualFold(op, "account-subject()"):
		return []string{uc.IssuerAccount}, nil // a scoped key's user always names its account
	}
	var key string
	var tags jwt.TagList
	switch lower := strings.ToLower(op); {
	case strings.HasPrefix(lower, "tag(") && strings.HasSuffix(op, ")"):
		key, tags = op[len("tag("):len(op)-1], uc.Tags
	case strings.HasPrefix(lower, "account-tag(") && strings.HasSuffix(op, ")"):
		key, tags = op[len("account-tag("):len(op)-1], ac.Tags
	default:
		return nil, fmt.Errorf("template operation %q is not defined", op)
	}
	prefix := strings.ToLower(key) + ":"
	var values []string
	for _, t := range tags {
		if v, ok := strings.CutPrefix(t, prefix); ok {
			values = append(values, v)
		}
	}
	switch {
	case len(values) > 0:
		return values, nil
	case strict:
		return nil, fmt.Errorf("tag %q is not defined", key)
	}
	return []string{" "}, nil // an invalid subject, dropped
}
