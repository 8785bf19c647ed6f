// nats.js (the official JavaScript client, @nats-io/transport-node and
// @nats-io/jetstream) against a replicated stream on a three-server Skiff
// cluster: it makes an R3 stream, publishes with acknowledgements (each
// message with its own Nats-Msg-Id, retried until acknowledged), kill -9s
// the stream's leader in the middle, and then checks that every
// acknowledged message is in the stream, once, at the sequence its PubAck
// named, with its payload. `make compat-js` runs it; it prints what it
// measured and exits non-zero on a failure.
//
// Usage: node jetstream_failover.mjs PATH/TO/skiff (or PATH/TO/nats-server,
// to check the check against the reference)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";

const MESSAGES = 600; // acknowledged publishes, the kill after the first third

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function start(binary, i, clientPort, routePort, routePorts, store) {
  const routes = routePorts.filter((r) => r !== routePort).map((r) => `nats-route://127.0.0.1:${r}`).join(",");
  const serve = basename(binary) === "nats-server" ? [] : ["serve"];
  return spawn(binary, [...serve, "-a", "127.0.0.1", "-p", String(clientPort), "-m", "0", "-js", "-sd", store,
    "--server_name", `n${i}`, "--cluster_name", "jsjs", "--cluster", `nats://127.0.0.1:${routePort}`,
    "--routes", routes], { stdio: "ignore" });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function retry(what, deadline, f) {
  for (;;) {
    try {
      return await f();
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`${what}: ${err.message}`);
      }
      await sleep(20);
    }
  }
}

function assert(ok, msg) {
  if (!ok) {
    throw new Error(msg);
  }
}

async function main(binary) {
  const ports = [];
  for (let i = 0; i < 6; i++) {
    ports.push(await freePort());
  }
  const clients = ports.slice(0, 3), routes = ports.slice(3);
  const dirs = [0, 1, 2].map((i) => mkdtempSync(join(tmpdir(), `jsjs-n${i}-`)));
  const procs = [0, 1, 2].map((i) => start(binary, i, clients[i], routes[i], routes, dirs[i]));
  try {
    const nc = await retry("connect", Date.now() + 10000, () =>
      connect({ servers: clients.map((p) => `127.0.0.1:${p}`), maxReconnectAttempts: -1, reconnectTimeWait: 50 }));
    // It asks for the account's JetStream info: answered once the meta
    // group has a leader.
    const jsm = await retry("JetStream manager", Date.now() + 30000, () => jetstreamManager(nc, { timeout: 2000 }));
    await retry("add the R3 stream", Date.now() + 30000, () =>
      jsm.streams.add({ name: "JS", subjects: ["jsjs.>"], num_replicas: 3 }));
    let info = await jsm.streams.info("JS");
    const leader = info.cluster.leader;
    const replicas = info.cluster.replicas.map((r) => r.name).sort();
    console.log(`R3 stream made: leader ${leader}, replicas ${replicas}`);
    assert(info.config.num_replicas === 3 && replicas.length === 2, "three replicas, two besides the leader");

    const js = jetstream(nc, { timeout: 500 });
    const acked = new Map(); // sequence -> payload
    const deadline = Date.now() + 120000;
    let killed = 0, firstAfter = -1;
    for (let i = 0; i < MESSAGES; i++) {
      if (i === MESSAGES / 3) {
        killed = Date.now();
        procs[Number(leader.slice(1))].kill("SIGKILL");
      }
      const id = `js-${i}`;
      const ack = await retry(`publish ${id}`, deadline, () =>
        js.publish("jsjs.m", new TextEncoder().encode(id), { msgID: id, timeout: 500 }));
      if (killed && firstAfter < 0) {
        firstAfter = Date.now() - killed;
      }
      assert(ack.stream === "JS", `acknowledged by stream ${ack.stream}`);
      assert(!acked.has(ack.seq) || acked.get(ack.seq) === id, `sequence ${ack.seq} acknowledged for two messages`);
      acked.set(ack.seq, id);
    }
    console.log(`${acked.size} publishes acknowledged; the first after the leader's kill -9 ${firstAfter} ms after it`);

    info = await jsm.streams.info("JS");
    console.log(`new leader ${info.cluster.leader}`);
    assert(info.cluster.leader !== leader, "a surviving replica leads");
    const lost = [];
    for (const [seq, id] of [...acked].sort((a, b) => a[0] - b[0])) {
      let m = null;
      try {
        m = await jsm.streams.getMessage("JS", { seq });
      } catch {
        // not found: lost
      }
      if (!m || new TextDecoder().decode(m.data) !== id) {
        lost.push(seq);
      }
    }
    console.log(`lost ${lost.length}, duplicated ${info.state.messages - acked.size}`);
    assert(lost.length === 0, `acknowledged and not stored as acknowledged: ${lost.slice(0, 10)}`);
    assert(info.state.messages === acked.size, `the stream holds ${info.state.messages} messages, ${acked.size} were acknowledged`);
    await nc.close();
  } finally {
    for (const p of procs) {
      p.kill("SIGKILL");
    }
    for (const d of dirs) {
      rmSync(d, { recursive: true, force: true });
    }
  }
}

main(process.argv[2]).then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
