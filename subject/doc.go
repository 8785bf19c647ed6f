// Package subject validates, splits and matches Skiff subjects and
// subscription patterns.
//
// A subject is a non-empty string of dot-separated, non-empty tokens:
//
//	orders.eu.created
//	└─┬──┘ └┬┘ └──┬──┘
//	 token token token
//
// Tokens are case-sensitive, valid UTF-8, and contain no whitespace (ASCII
// or Unicode) and no NUL byte.
//
// A pattern is a subject whose tokens may also be whole-token wildcards:
//
//	token  matches                               example
//	"*"    exactly one token                     orders.*.created
//	">"    one or more tokens; last token only   orders.>
//	"#"    zero or more tokens, anywhere         *.stock.# matches usd.stock
//	       (AMQP topic exchange)                 and eur.stock.db, not stock.nasdaq
//
// Runs of adjacent "#" tokens match what one "#" matches; see [Canonical].
// A wildcard character inside a longer token is literal: "foo*" is the
// token f-o-o-star. Matching is defined by [Match].
//
// Lookups treat every subject token literally, as NATS does: a subject may
// contain a token "*", which a pattern wildcard matches like any other token
// but no literal pattern token can. [ValidateLiteral] is the stricter check
// for subjects that must be literal, such as a publish subject in pedantic
// mode or a stream subject.
//
// The validating splitters ([SplitSubject], [SplitPattern]) append tokens
// into a caller-supplied slice and allocate nothing when it has room, so a
// matcher can keep a fixed array on its stack:
//
//	var buf [32]string
//	toks, err := subject.SplitSubject(buf[:0], "orders.eu.created")
//
// A [Transform] maps the subjects one pattern matches to subjects of
// another, as imports and exports between accounts do:
//
//	tr, _ := subject.NewTransform("orders.*.>", "shop.$1.>")
//	tr.Map("orders.eu.new") // "shop.eu.new", true
//
// All functions are safe for concurrent use, and so is a Transform.
package subject
