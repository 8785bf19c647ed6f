#!/usr/bin/env bash
# Installs, starts and stops the servers Skiff is benchmarked against, all
# on 127.0.0.1. Nothing is installed by hand: this script does it.
#
#   scripts/peers.sh install NAME   install NAME if it is missing (and only then)
#   scripts/peers.sh start NAME     start NAME on a free port, unless this script
#                                   already runs it; print its URL last
#   scripts/peers.sh stop NAME      stop what start started and remove its state
#   scripts/peers.sh version NAME   print NAME's version
#
# NAME is skiff (bin/skiff), nats-server (tools/bin/nats-server, built from
# tools/nats), redis (Debian's redis-server), rabbitmq (Debian's
# rabbitmq-server) or kafka (Apache Kafka's jars from Maven Central, pinned
# in scripts/kafka/pom.xml, in tools/kafka/lib). Every command is
# idempotent. State (pid files, URLs, logs, RabbitMQ's and Kafka's data)
# lives in $PEERS_DIR, default /tmp/skiff-peers. Skiff and nats-server
# run with streams (JetStream) on, stored there too; PEERS_SYNC=always,
# a duration, or never sets their sync policy (see js_conf).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${PEERS_DIR:-/tmp/skiff-peers}
mkdir -p "$dir"

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo -E"; fi

die() {
	echo "peers.sh: $*" >&2
	exit 1
}

free_port() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
		return
	fi
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free port found"
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() { # host port seconds
	local deadline=$((SECONDS + $3))
	while ((SECONDS < deadline)); do
		if port_open "$1" "$2"; then return 0; fi
		sleep 0.1
	done
	return 1
}

# alive PIDFILE: the process the pid file names is running.
alive() {
	[ -s "$1" ] || return 1
	local pid
	pid=$(cat "$1")
	[ -n "$pid" ] && { kill -0 "$pid" 2>/dev/null || [ -d "/proc/$pid" ]; }
}

apt_install() { # package binary
	if command -v "$2" >/dev/null 2>&1; then return 0; fi
	echo "peers.sh: installing $1 from Debian's packages" >&2
	export DEBIAN_FRONTEND=noninteractive
	# The package would start its own service, with its default
	# configuration (RabbitMQ's listens on every interface); start does
	# that instead, on loopback. policy-rc.d exit 101 forbids it.
	local policy=/usr/sbin/policy-rc.d own_policy=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod 755 "$policy"
		own_policy=1
	fi
	local log="$dir/apt-$1.log" rc=0
	{ $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "$1"; } >"$log" 2>&1 || rc=$?
	if [ -n "$own_policy" ]; then $sudo rm -f "$policy"; fi
	if [ "$rc" != 0 ]; then
		tail -20 "$log" >&2
		die "apt-get install $1 failed (log: $log)"
	fi
	command -v "$2" >/dev/null 2>&1 || die "$1 did not install $2"
	# Under systemd the unit is enabled for the next boot: keep it off.
	if [ -d /run/systemd/system ]; then $sudo systemctl disable "$3" >/dev/null 2>&1 || true; fi
}

cmd_install() {
	case $1 in
	skiff) make -s build >&2 ;;
	nats-server) make -s tools/bin/nats-server >&2 ;;
	redis) apt_install redis-server redis-server redis-server ;;
	rabbitmq) apt_install rabbitmq-server rabbitmq-server rabbitmq-server ;;
	kafka) install_kafka ;;
	*) die "unknown peer $1" ;;
	esac
}

# Kafka is a JVM program with no Debian package: its jars and their
# dependencies come from Maven Central, resolved by Maven from
# scripts/kafka/pom.xml, which pins the version.
kpom=$root/scripts/kafka/pom.xml
klib=$root/tools/kafka/lib
kdir=$dir/kafka
kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$kpom"; }

install_kafka() {
	local v
	v=$(kafka_version)
	[ -n "$v" ] || die "no kafka.version in $kpom"
	if [ -f "$klib/kafka_2.13-$v.jar" ]; then return 0; fi
	command -v java >/dev/null 2>&1 || die "kafka needs java (OpenJDK 17 or later)"
	command -v mvn >/dev/null 2>&1 || die "kafka is installed with mvn (Maven), which is missing"
	echo "peers.sh: installing Kafka $v from Maven Central into tools/kafka/lib" >&2
	# Into a fresh directory, moved into place once complete: an
	# interrupted install is not taken for a finished one, and the jars of
	# another version do not linger.
	local tmp="$klib.tmp" log="$dir/mvn-kafka.log"
	rm -rf "$tmp"
	if ! mvn -q -B -Dstyle.color=never -f "$kpom" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$log" 2>&1; then
		tail -20 "$log" >&2
		rm -rf "$tmp"
		die "mvn could not fetch Kafka $v (log: $log)"
	fi
	[ -f "$tmp/kafka_2.13-$v.jar" ] || die "mvn did not fetch kafka_2.13-$v.jar (log: $log)"
	rm -rf "$klib"
	mv "$tmp" "$klib"
}

# start_bg NAME PORT COMMAND...: run COMMAND in the background, its pid in
# NAME.pid, and wait for it to listen on PORT.
start_bg() {
	local name=$1 port=$2
	shift 2
	"$@" </dev/null >"$dir/$name.log" 2>&1 &
	echo $! >"$dir/$name.pid"
	local deadline=$((SECONDS + 20))
	while ! port_open 127.0.0.1 "$port"; do
		if ! alive "$dir/$name.pid" || ((SECONDS >= deadline)); then
			stop_pid "$name"
			die "$name did not start: $(tail -5 "$dir/$name.log")"
		fi
		sleep 0.1
	done
}

stop_pid() { # name
	local f="$dir/$1.pid"
	if alive "$f"; then
		local pid
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f" "$dir/$1.url"
}

# RabbitMQ runs as the rabbitmq user (Debian's wrapper su's to it), so its
# data directory belongs to that user. Everything is kept on loopback: the
# node name, the AMQP listener, epmd and Erlang distribution, for the
# server and for rabbitmqctl.
rdir=$dir/rabbitmq
rabbit_env() {
	export RABBITMQ_NODENAME=rabbit@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
		ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_DIST_PORT=25672 \
		RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
		RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
		RABBITMQ_MNESIA_BASE="$rdir/mnesia" RABBITMQ_LOG_BASE="$dir/rabbitmq-log" \
		RABBITMQ_PID_FILE="$rdir/rabbitmq.pid" ERL_CRASH_DUMP="$rdir/erl_crash.dump"
}

rabbit_logs() {
	tail -n 5 "$dir/rabbitmq.log" "$dir"/rabbitmq-log/*.log 2>/dev/null || true
	if [ -f "$rdir/erl_crash.dump" ]; then grep -a -m1 '^Slogan' "$rdir/erl_crash.dump" || true; fi
}

start_rabbitmq() { # port
	local port=$1
	rabbit_env
	export RABBITMQ_NODE_PORT=$port
	stop_rabbitmq # what a failed start may have left
	# epmd outlives the node; stop kills it only if this start launched it.
	if ! epmd -names >/dev/null 2>&1; then touch "$dir/rabbitmq.epmd"; fi
	chmod o+x "$dir" 2>/dev/null || true
	$sudo install -d -o rabbitmq -g rabbitmq -m 755 "$rdir" "$dir/rabbitmq-log"
	$sudo rm -f "$dir"/rabbitmq-log/*
	if ! $sudo rabbitmq-server -detached >"$dir/rabbitmq.log" 2>&1; then
		rabbit_logs >&2
		stop_rabbitmq
		die "rabbitmq-server -detached failed"
	fi
	local deadline=$((SECONDS + 60))
	while ! port_open 127.0.0.1 "$port"; do
		if [ -f "$rdir/erl_crash.dump" ] || { [ -s "$rdir/rabbitmq.pid" ] && ! alive "$rdir/rabbitmq.pid"; } ||
			((SECONDS >= deadline)); then
			rabbit_logs >&2
			stop_rabbitmq
			die "rabbitmq did not start (logs above)"
		fi
		sleep 0.2
	done
}

stop_rabbitmq() {
	rabbit_env
	if alive "$rdir/rabbitmq.pid"; then
		local pid
		pid=$(cat "$rdir/rabbitmq.pid")
		# stop waits for the node's process to exit.
		timeout 60 $sudo rabbitmqctl stop "$rdir/rabbitmq.pid" >/dev/null 2>&1 || true
		$sudo kill -9 "$pid" 2>/dev/null || true
	fi
	if [ -f "$dir/rabbitmq.epmd" ]; then
		epmd -kill >/dev/null 2>&1 || true
		for _ in $(seq 50); do
			port_open 127.0.0.1 4369 || break
			sleep 0.1
		done
		rm -f "$dir/rabbitmq.epmd"
	fi
	$sudo rm -rf "$rdir"
	rm -f "$dir/rabbitmq.url"
}

# start_kafka PORT: a single-node KRaft cluster, one process as broker and
# controller, its client listener on PORT and its controller listener on
# another free port, both on 127.0.0.1. Each start formats a fresh log
# directory.
start_kafka() {
	local port=$1 cport
	cport=$(free_port)
	while [ "$cport" = "$port" ]; do cport=$(free_port); done
	stop_pid kafka # what a failed start may have left
	rm -rf "$kdir"
	mkdir -p "$kdir"
	# Replication factors of 1 for the internal topics, as one broker
	# cannot do more; no delay before a consumer group's first rebalance.
	cat >"$kdir/server.properties" <<-EOF
		process.roles=broker,controller
		node.id=1
		controller.quorum.bootstrap.servers=127.0.0.1:$cport
		listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
		advertised.listeners=PLAINTEXT://127.0.0.1:$port
		controller.listener.names=CONTROLLER
		inter.broker.listener.name=PLAINTEXT
		listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
		log.dirs=$kdir/data
		num.partitions=1
		auto.create.topics.enable=false
		offsets.topic.replication.factor=1
		transaction.state.log.replication.factor=1
		transaction.state.log.min.isr=1
		share.coordinator.state.topic.replication.factor=1
		share.coordinator.state.topic.min.isr=1
		group.initial.rebalance.delay.ms=0
	EOF
	# Kafka's own distribution logs at INFO to stdout too (kafka.log here).
	cat >"$kdir/log4j2.properties" <<-'EOF'
		appender.out.type=Console
		appender.out.name=out
		appender.out.layout.type=PatternLayout
		appender.out.layout.pattern=[%d] %p %m (%c)%n
		rootLogger.level=INFO
		rootLogger.appenderRef.out.ref=out
	EOF
	local cp="$klib/*" log4j="-Dlog4j2.configurationFile=$kdir/log4j2.properties" id
	# A Kafka 4 controller formatted --standalone is a one-voter dynamic
	# quorum, the replacement for controller.quorum.voters.
	if ! id=$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>"$kdir/format.log") ||
		! java -cp "$cp" kafka.tools.StorageTool format -t "$id" -c "$kdir/server.properties" \
			--standalone >>"$kdir/format.log" 2>&1; then
		tail -5 "$kdir/format.log" >&2
		die "kafka: formatting $kdir/data failed"
	fi
	# The heap and the JVM flags of Kafka's kafka-server-start.sh and
	# kafka-run-class.sh, which this replaces.
	start_bg kafka "$port" java -Xms1g -Xmx1g -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
		"$log4j" -cp "$cp" kafka.Kafka "$kdir/server.properties"
	# The listener accepts connections before the broker serves them.
	local deadline=$((SECONDS + 60))
	while ! grep -q 'Kafka Server started' "$dir/kafka.log"; do
		if ! alive "$dir/kafka.pid" || ((SECONDS >= deadline)); then
			tail -5 "$dir/kafka.log" >&2
			stop_kafka
			die "kafka did not start (log above)"
		fi
		sleep 0.1
	done
}

stop_kafka() {
	stop_pid kafka
	rm -rf "$kdir"
}

running() { # name
	case $1 in
	rabbitmq) alive "$rdir/rabbitmq.pid" && [ -s "$dir/rabbitmq.url" ] ;;
	*) alive "$dir/$1.pid" && [ -s "$dir/$1.url" ] ;;
	esac
}

# js_conf NAME STORE_DIR writes NAME's configuration: streams (JetStream)
# on, stored in STORE_DIR, with the sync policy $PEERS_SYNC when set:
# `always` (fsync before every acknowledgement), a duration, or `never`
# (Skiff only). Unset, each server keeps its default (Skiff: every 100 ms;
# nats-server: every 2 minutes).
js_conf() {
	local sync=""
	if [ -n "${PEERS_SYNC:-}" ]; then
		[ "$PEERS_SYNC" != never ] || [ "$1" = skiff ] || die "$1 has no sync policy never"
		sync="sync_interval: $PEERS_SYNC"
	fi
	printf 'jetstream {\n  store_dir: "%s"\n  %s\n}\n' "$2" "$sync" >"$dir/$1.conf"
}

cmd_start() {
	if running "$1"; then
		cat "$dir/$1.url"
		return
	fi
	cmd_install "$1"
	local port url
	port=$(free_port)
	case $1 in
	skiff)
		rm -rf "$dir/skiff-data"
		js_conf skiff "$dir/skiff-data"
		start_bg skiff "$port" "$root/bin/skiff" serve -a 127.0.0.1 -p "$port" -m 0 -c "$dir/skiff.conf"
		url="nats://127.0.0.1:$port"
		;;
	nats-server)
		rm -rf "$dir/nats-data"
		js_conf nats-server "$dir/nats-data"
		start_bg nats-server "$port" "$root/tools/bin/nats-server" -a 127.0.0.1 -p "$port" -c "$dir/nats-server.conf"
		url="nats://127.0.0.1:$port"
		;;
	redis)
		start_bg redis "$port" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no
		url="redis://127.0.0.1:$port"
		;;
	rabbitmq)
		start_rabbitmq "$port"
		url="amqp://guest:guest@127.0.0.1:$port/"
		;;
	kafka)
		start_kafka "$port"
		url="kafka://127.0.0.1:$port"
		;;
	*) die "unknown peer $1" ;;
	esac
	echo "$url" >"$dir/$1.url"
	echo "$url"
}

cmd_stop() {
	case $1 in
	skiff | nats-server)
		stop_pid "$1"
		rm -rf "$dir/$1.conf" "$dir/${1%-server}-data"
		;;
	redis) stop_pid "$1" ;;
	rabbitmq) stop_rabbitmq ;;
	kafka) stop_kafka ;;
	*) die "unknown peer $1" ;;
	esac
}

cmd_version() {
	case $1 in
	skiff) "$root/bin/skiff" version ;;
	nats-server) "$root/tools/bin/nats-server" --version ;;
	redis) redis-server --version | head -1 ;;
	rabbitmq) dpkg-query -W -f='rabbitmq-server ${Version}\n' rabbitmq-server 2>/dev/null || echo unknown ;;
	kafka) echo "kafka $(kafka_version)" ;;
	*) die "unknown peer $1" ;;
	esac
}

[ $# -eq 2 ] || die "usage: scripts/peers.sh install|start|stop|version NAME"
case $1 in
install | start | stop | version) "cmd_$1" "$2" ;;
*) die "unknown command $1" ;;
esac
