# Skiff. `make run` and `make test` are all a newcomer needs; see README.md.

GO       ?= go
BIN      := bin/skiff
BENCHBIN := bin/skiff-bench
FUZZTIME ?= 30s
COUNT    ?= 5

.PHONY: all build run test vet race redis tools lint fuzz bench bench-match bench-core bench-cluster bench-peers bench-latency bench-streams compat compat-py compat-js chaos clean

all: build

## build: compile bin/skiff and the benchmark harness bin/skiff-bench (its own module, bench/)
build:
	$(GO) build -o $(BIN) ./cmd/skiff
	cd bench && $(GO) build -o ../$(BENCHBIN) ./cmd/skiff-bench

## run: build and start the broker on embedded defaults (127.0.0.1:4222, monitoring on 8222)
run: build
	./$(BIN) serve

## test: the nats tools, Redis (if missing), go vet, then every test under the race detector
test: tools redis vet race

# Two modules: the broker (.) and the benchmark harness (bench/).
vet:
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

# The tests drive Skiff with tools/bin/nats and nsc, so race builds the tools first,
# and bench/'s Redis target tests start redis-server, so it installs Redis.
race: tools redis
	$(GO) test -race -timeout 20m ./...
	cd bench && $(GO) test -race -timeout 20m ./...

## chaos: the fault-injection suites of replicated streams, longer than make test's (ROUNDS=30 per sync
## policy, SYNC=interval,always,never: a cluster each): in process (stops, restarts, power losses on
## chaosfs, porcupine), then three `skiff serve` processes built with -tags chaosfs (kill -9, SIGSTOP,
## restarts, partitions, power losses)
ROUNDS ?= 30
SYNC ?= interval,always,never
chaos:
	$(GO) test -race -timeout 90m ./jetstream -run 'TestChaosReplicated' -count=1 -v -chaos.rounds=$(ROUNDS) -chaos.sync=$(SYNC)
	$(GO) test -timeout 90m ./cmd/skiff -run 'TestChaosProcesses' -count=1 -v -chaos.rounds=$(ROUNDS) -chaos.sync=$(SYNC)

## redis: install redis-server from Debian's packages, only if it is missing
redis:
	@scripts/peers.sh install redis

## tools: build the pinned nats CLI and nats-server (tools/nats) and nsc (tools/nsc) into tools/bin
tools: tools/bin/nats tools/bin/nats-server tools/bin/nsc

# go build leaves an up-to-date binary untouched, so touch it for make.
tools/bin/nats: tools/nats/go.mod tools/nats/go.sum
	cd tools/nats && $(GO) build -o ../bin/nats github.com/nats-io/natscli/nats
	@touch $@

tools/bin/nats-server: tools/nats/go.mod tools/nats/go.sum
	cd tools/nats && $(GO) build -o ../bin/nats-server github.com/nats-io/nats-server/v2
	@touch $@

## tools/bin/nsc: the pinned nsc (tools/nsc), which testdata/jwt/gen.sh and server/TestNSCPush run
tools/bin/nsc: tools/nsc/go.mod tools/nsc/go.sum
	cd tools/nsc && $(GO) build -o ../bin/nsc github.com/nats-io/nsc/v2
	@touch $@

## lint: gofmt, go vet and golangci-lint (built from tools/lint, pinned)
lint: vet
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	cd tools/lint && $(GO) build -o ../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	tools/bin/golangci-lint run ./...
	cd bench && ../tools/bin/golangci-lint run ./...

## fuzz: run every fuzz target for FUZZTIME each (crashers land in testdata/fuzz)
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## bench: the topic-matching benchmarks, rendered into docs/benchmarks/matching.md
bench: bench-match

bench-match: build
	./$(BIN) bench match -count $(COUNT)

## bench-core: the broker against nats-server with nats bench (docs/benchmarks/core.md)
bench-core: build tools
	./$(BIN) bench core -runs $(COUNT)

## bench-cluster: three Skiff servers joined by routes against a three-node nats-server cluster
## (fan-out, queue-group request/reply, subscription churn) into docs/benchmarks/cluster.md
bench-cluster: build tools
	./$(BIN) bench cluster -runs $(COUNT)

## bench-peers: RabbitMQ and Kafka too (installed if missing): the AMQP and Kafka targets'
## tests against them, then 2 s-per-run smoke runs of `skiff bench compare` (Skiff, nats-server,
## Redis, RabbitMQ) and `skiff bench streams` (Skiff, nats-server JetStream, Kafka) into
## $(PEERS_OUT) (not docs/: smoke figures are not results)
PEERS_OUT ?= /tmp/skiff-bench-peers
bench-peers: build tools redis
	@scripts/peers.sh install rabbitmq
	@set -e; trap 'scripts/peers.sh stop rabbitmq' EXIT; \
	url=$$(scripts/peers.sh start rabbitmq); \
	echo "RabbitMQ at $$url"; \
	cd bench && SKIFF_AMQP_URL=$$url $(GO) test -race -count=1 -run '^TestTargetAMQP$$' -v .
	@scripts/peers.sh install kafka
	@set -e; trap 'scripts/peers.sh stop kafka' EXIT; \
	url=$$(scripts/peers.sh start kafka); \
	echo "Kafka at $$url"; \
	cd bench && SKIFF_KAFKA_URL=$$url $(GO) test -race -count=1 -run '^TestTargetKafka$$' -v .
	./$(BIN) bench compare --peers skiff,nats-server,redis,rabbitmq --duration 2s --warmup 500ms \
		--out $(PEERS_OUT) --name smoke
	./$(BIN) bench streams --modes file --sizes 1KB --duration 2s --ack-duration 1s --warmup 500ms \
		--tp-sizes 1KB --msgs 20000 --tp-runs 1 --out $(PEERS_OUT) --name streams-smoke

## bench-latency: the published latency suite against Skiff, nats-server, Redis and
## RabbitMQ, 2 runs each, into docs/benchmarks/<date>-published.md (about 25 minutes)
bench-latency: build tools redis
	./$(BIN) bench compare --suite published --peers skiff,nats-server,redis,rabbitmq --runs 2

## bench-streams: streams against nats-server JetStream and Kafka, every storage mode,
## into docs/benchmarks/streams.md (about 35 minutes)
bench-streams: build tools
	./$(BIN) bench streams --duration 30s --ack-duration 10s --tp-sizes 16B,1KB,5KB,1MB --tp-runs 2

## compat: the async-nats (Rust) client's own integration tests against nats-server and
## Skiff, into docs/compat.md (needs cargo; builds under compat/build, git-ignored; the
## first run takes about 15 minutes). COMPAT_FLAGS: e.g. -run jetstream_tests; the default
## adds upstream CI's slow_tests feature to the crate's default ones
COMPAT_FLAGS ?= -features slow_tests
compat: build tools
	$(GO) run ./compat $(COMPAT_FLAGS)

## compat-py: the official Python client (nats-py, pinned, from PyPI into a virtualenv under
## compat/build) discovers a three-server Skiff cluster from one URL and fails over on kill -9;
## then publishes to an R3 stream through a kill -9 of its leader and finds every acknowledged message
NATS_PY ?= nats-py==2.16.0
compat-py: build
	@test -x compat/build/py/bin/python || python3 -m venv compat/build/py
	compat/build/py/bin/pip install --quiet '$(NATS_PY)'
	compat/build/py/bin/python compat/python/failover.py bin/skiff
	compat/build/py/bin/python compat/python/jetstream_failover.py bin/skiff

## compat-js: the official JavaScript client (nats.js: @nats-io/transport-node and @nats-io/jetstream,
## pinned, from npm into compat/build/js) publishes to an R3 stream through a kill -9 of its leader
## and finds every acknowledged message
NATS_JS ?= @nats-io/transport-node@3.4.0 @nats-io/jetstream@3.4.0
compat-js: build
	@mkdir -p compat/build/js
	@test -f compat/build/js/package.json || (cd compat/build/js && npm init -y >/dev/null)
	cd compat/build/js && npm install --silent --no-audit --no-fund $(NATS_JS)
	cp compat/js/jetstream_failover.mjs compat/build/js/
	node compat/build/js/jetstream_failover.mjs bin/skiff

clean:
	rm -rf bin tools/bin tools/kafka compat/build
