#!/bin/sh
# gen.sh regenerates this directory with the pinned nsc (tools/nsc; `make
# tools/bin/nsc` builds it): an operator with a signing key and a system
# account, account A with a signing key and its users alice (signed by A)
# and carol (signed by A's signing key), account B and its user bob,
# nothing expiring. The keys live in a temporary nsc home deleted
# afterwards: only the JWTs, the users' .creds and the MEMORY-resolver
# configuration are kept. TestCommittedJWTSet (server/jwt_committed_test.go)
# checks what it wrote.
set -eu
cd "$(dirname "$0")"
NSC=${NSC:-$(cd ../.. && pwd)/tools/bin/nsc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nsc() { "$NSC" --all-dirs "$work" "$@"; }

nsc add operator --name skiff-test --sys --generate-signing-key
nsc add account --name A
nsc edit account --name A --sk generate
nsc add user --account A --name alice
# carol is signed by A's signing key rather than by A itself.
ask=$(nsc describe account --name A --field nats.signing_keys | tr -d '[]" \n')
nsc add user --account A --name carol --private-key "$ask"
nsc add account --name B
nsc add user --account B --name bob

nsc describe operator --raw --output-file operator.jwt
for a in SYS A B; do
	nsc describe account --name "$a" --raw --output-file "$a.jwt"
done
nsc generate creds --account A --name alice --output-file alice.creds
nsc generate creds --account A --name carol --output-file carol.creds
nsc generate creds --account B --name bob --output-file bob.creds
nsc generate config --mem-resolver --config-file resolver.conf --force
