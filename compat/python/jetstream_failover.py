"""nats.py (the official Python client) against a replicated stream on a
three-server Skiff cluster: it makes an R3 stream, publishes with
acknowledgements (each message with its own Nats-Msg-Id, retried until
acknowledged), kill -9s the stream's leader in the middle, and then checks
that every acknowledged message is in the stream, once, at the sequence
its PubAck named, with its payload. `make compat-py` runs it; it prints
what it measured and exits non-zero on a failure.

Usage: python3 jetstream_failover.py PATH/TO/skiff (or PATH/TO/nats-server,
to check the check against the reference)
"""
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import nats
import nats.errors
import nats.js.errors

from failover import free_ports

MESSAGES = 600  # acknowledged publishes, the kill after the first third


def start(binary, i, client_port, route_port, route_ports, store):
    routes = ",".join(f"nats-route://127.0.0.1:{r}" for r in route_ports if r != route_port)
    serve = [] if os.path.basename(binary) == "nats-server" else ["serve"]
    return subprocess.Popen(
        [binary, *serve, "-a", "127.0.0.1", "-p", str(client_port), "-m", "0", "-js", "-sd", store,
         "--server_name", f"n{i}", "--cluster_name", "pyjs",
         "--cluster", f"nats://127.0.0.1:{route_port}", "--routes", routes],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def publish_until_acked(js, i, deadline):
    """Publishes message i until it is acknowledged; returns its PubAck."""
    msg_id = f"py-{i}"
    while True:
        try:
            return await js.publish("pyjs.m", msg_id.encode(), timeout=0.5, headers={"Nats-Msg-Id": msg_id})
        except (nats.errors.TimeoutError, nats.js.errors.NoStreamResponseError, nats.js.errors.APIError,
                nats.errors.ConnectionReconnectingError, nats.errors.ConnectionClosedError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)


async def main(skiff):
    ports = free_ports(6)
    clients, routes = ports[:3], ports[3:]
    dirs = [tempfile.mkdtemp(prefix=f"pyjs-n{i}-") for i in range(3)]
    procs = [start(skiff, i, clients[i], routes[i], routes, dirs[i]) for i in range(3)]
    try:
        urls = [f"nats://127.0.0.1:{p}" for p in clients]

        async def on_error(e):
            pass  # the kill below is expected

        nc = await nats.connect(urls, error_cb=on_error, max_reconnect_attempts=-1, reconnect_time_wait=0.05)
        js = nc.jetstream(timeout=2)
        deadline = time.monotonic() + 30
        while True:
            try:
                await js.add_stream(name="PY", subjects=["pyjs.>"], num_replicas=3)
                break
            except (nats.errors.TimeoutError, nats.js.errors.APIError, nats.js.errors.NoStreamResponseError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)  # the meta group is still electing its leader
        info = await js.stream_info("PY")
        leader = info.cluster.leader
        replicas = sorted(r.name for r in info.cluster.replicas)
        print(f"R3 stream made: leader {leader}, replicas {replicas}")
        assert info.config.num_replicas == 3 and len(replicas) == 2, "three replicas, two besides the leader"

        acked = {}  # sequence -> payload
        deadline = time.monotonic() + 120
        killed = None
        first_after = None
        for i in range(MESSAGES):
            if i == MESSAGES // 3:
                killed = time.monotonic()
                procs[int(leader[1:])].send_signal(signal.SIGKILL)
            ack = await publish_until_acked(js, i, deadline)
            if killed is not None and first_after is None:
                first_after = time.monotonic() - killed
            assert ack.stream == "PY"
            if ack.seq in acked and acked[ack.seq] != f"py-{i}".encode():
                raise AssertionError(f"sequence {ack.seq} acknowledged for two messages")
            acked[ack.seq] = f"py-{i}".encode()
        print(f"{len(acked)} publishes acknowledged; the first after the leader's kill -9 "
              f"{first_after * 1000:.0f} ms after it")

        info = await js.stream_info("PY")
        print(f"new leader {info.cluster.leader}")
        assert info.cluster.leader != leader, "a surviving replica leads"
        lost = [s for s in acked if s > info.state.last_seq]
        assert info.state.messages == len(acked), (
            f"the stream holds {info.state.messages} messages, {len(acked)} were acknowledged")
        for seq, payload in sorted(acked.items()):
            try:
                m = await js.get_msg("PY", seq)
            except nats.js.errors.NotFoundError:
                lost.append(seq)
                continue
            if m.data != payload:
                lost.append(seq)
        print(f"lost {len(lost)}, duplicated {info.state.messages - len(acked)}")
        assert not lost, f"acknowledged and not stored as acknowledged: {lost[:10]}"
        await nc.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
