# Skiff. `make run` and `make test` are all a newcomer needs; see README.md.

GO       ?= go
BIN      := bin/skiff
FUZZTIME ?= 30s
COUNT    ?= 5

.PHONY: all build run test vet race redis tools lint fuzz bench bench-match bench-core bench-peers clean

all: build

## build: compile bin/skiff
build:
	$(GO) build -o $(BIN) ./cmd/skiff

## run: build and start the broker on embedded defaults (127.0.0.1:4222, monitoring on 8222)
run: build
	./$(BIN) serve

## test: the nats tools, Redis (if missing), go vet, then every test under the race detector
test: tools redis vet race

vet:
	$(GO) vet ./...

# The tests drive Skiff with tools/bin/nats, so race builds the tools first,
# and bench/'s Redis target tests start redis-server, so it installs Redis.
race: tools redis
	$(GO) test -race -timeout 20m ./...

## redis: install redis-server from Debian's packages, only if it is missing
redis:
	@scripts/peers.sh install redis

## tools: build the pinned nats CLI and nats-server into tools/bin (from tools/nats)
tools: tools/bin/nats tools/bin/nats-server

# go build leaves an up-to-date binary untouched, so touch it for make.
tools/bin/nats: tools/nats/go.mod tools/nats/go.sum
	cd tools/nats && $(GO) build -o ../bin/nats github.com/nats-io/natscli/nats
	@touch $@

tools/bin/nats-server: tools/nats/go.mod tools/nats/go.sum
	cd tools/nats && $(GO) build -o ../bin/nats-server github.com/nats-io/nats-server/v2
	@touch $@

## lint: gofmt, go vet and golangci-lint (built from tools/lint, pinned)
lint: vet
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	cd tools/lint && $(GO) build -o ../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	tools/bin/golangci-lint run ./...

## fuzz: run every fuzz target for FUZZTIME each (crashers land in testdata/fuzz)
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

## bench: the topic-matching benchmarks, rendered into docs/benchmarks/matching.md
bench: bench-match

bench-match:
	$(GO) run ./cmd/skiff bench match -count $(COUNT)

## bench-core: the broker against nats-server with nats bench (docs/benchmarks/core.md)
bench-core: build tools
	./$(BIN) bench core -runs $(COUNT)

## bench-peers: RabbitMQ and Kafka too (installed if missing): the AMQP and Kafka targets'
## tests against them, then a 2 s-per-run smoke `skiff bench compare` of Skiff, nats-server,
## Redis and RabbitMQ into $(PEERS_OUT) (not docs/: smoke figures are not results)
PEERS_OUT ?= /tmp/skiff-bench-peers
bench-peers: build tools redis
	@scripts/peers.sh install rabbitmq
	@set -e; trap 'scripts/peers.sh stop rabbitmq' EXIT; \
	url=$$(scripts/peers.sh start rabbitmq); \
	echo "RabbitMQ at $$url"; \
	SKIFF_AMQP_URL=$$url $(GO) test -race -count=1 -run '^TestTargetAMQP$$' -v ./bench/
	@scripts/peers.sh install kafka
	@set -e; trap 'scripts/peers.sh stop kafka' EXIT; \
	url=$$(scripts/peers.sh start kafka); \
	echo "Kafka at $$url"; \
	SKIFF_KAFKA_URL=$$url $(GO) test -race -count=1 -run '^TestTargetKafka$$' -v ./bench/
	./$(BIN) bench compare --peers skiff,nats-server,redis,rabbitmq --duration 2s --warmup 500ms \
		--out $(PEERS_OUT) --name smoke

clean:
	rm -rf bin tools/bin tools/kafka
