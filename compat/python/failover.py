"""nats.py (the official Python client) against a three-server Skiff
cluster: it discovers the cluster from one URL, loses that server to
kill -9, reconnects to another and keeps receiving. `make compat-py` runs
it; it prints what it measured and exits non-zero on a failure.

Usage: python3 failover.py PATH/TO/skiff
"""
import asyncio
import signal
import socket
import subprocess
import sys
import time

import nats


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def start(skiff, i, client_port, route_port, route_ports):
    routes = ",".join(f"nats-route://127.0.0.1:{r}" for r in route_ports if r != route_port)
    return subprocess.Popen(
        [skiff, "serve", "-a", "127.0.0.1", "-p", str(client_port), "-m", "0", "-js=false",
         "--server_name", f"n{i}", "--cluster_name", "py",
         "--cluster", f"nats://127.0.0.1:{route_port}", "--routes", routes],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def main(skiff):
    ports = free_ports(6)
    clients, routes = ports[:3], ports[3:]
    procs = [start(skiff, i, clients[i], routes[i], routes) for i in range(3)]
    try:
        await asyncio.sleep(1.5)
        reconnected = asyncio.Event()

        async def on_reconnect():
            reconnected.set()

        async def on_error(e):
            pass  # the kill below is expected

        nc = await nats.connect(f"nats://127.0.0.1:{clients[0]}", reconnected_cb=on_reconnect,
                                error_cb=on_error, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        for _ in range(50):
            if len(nc.discovered_servers) >= 2:
                break
            await asyncio.sleep(0.1)
        found = sorted(s.port for s in nc.discovered_servers)
        print("discovered from one URL:", found)
        assert found == sorted(clients[1:]), "the other two servers are discovered"

        got = []

        async def on_msg(m):
            got.append(m.data)

        await nc.subscribe("py.>", cb=on_msg)
        await nc.flush()
        pub = await nats.connect(f"nats://127.0.0.1:{clients[2]}")
        await asyncio.sleep(0.3)  # the interest reaches the publisher's server
        await pub.publish("py.before", b"1")
        await pub.flush()
        await asyncio.sleep(0.3)
        assert got == [b"1"], f"received across servers before the kill: {got}"

        killed = time.monotonic()
        procs[0].send_signal(signal.SIGKILL)
        await asyncio.wait_for(reconnected.wait(), 10)
        print(f"reconnected to port {nc.connected_url.port} {(time.monotonic() - killed) * 1000:.0f} ms after kill -9")
        deadline = time.monotonic() + 10
        while b"2" not in got and time.monotonic() < deadline:
            await pub.publish("py.after", b"2")
            await pub.flush()
            await asyncio.sleep(0.05)
        assert b"2" in got, "received again after the failover"
        print(f"receiving again {(time.monotonic() - killed) * 1000:.0f} ms after kill -9")
        await pub.close()
        await nc.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
