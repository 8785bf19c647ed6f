//! Starts NATS servers for the async-nats crate's integration tests.
//!
//! The published async-nats crate ships its `tests/`, which call a
//! `nats-server` helper crate that nats.rs keeps unpublished in its
//! repository. This crate has the same public API (`run_server`,
//! `run_basic_server`, `run_server_with_port`, `run_cluster`,
//! `set_lame_duck_mode`, `Server`, `Cluster`, ...), written for Skiff's
//! `make compat` (docs/compat.md), so that one build of the tests runs
//! against either server: whichever `nats-server` comes first in PATH, the
//! reference binary or compat/bin/nats-server, which runs `skiff serve`.
//!
//! A server is started as
//!
//! ```text
//! nats-server --store_dir DIR -p PORT -l LOG -P PIDFILE [-c CONFIG]
//! ```
//!
//! with every file under the temporary directory and named after a unique
//! ID. Its client address is read from its log, in nats-server's words
//! (`Listening for client connections on ADDR`) or Skiff's
//! (`msg=listening addr=ADDR`). Its standard output and error go to a file
//! too, so a server that refuses its configuration makes the test panic with
//! the server's own reason rather than hang. Dropping a `Server` kills it
//! and removes its files and store directory.

use std::collections::hash_map::RandomState;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use std::{env, thread};

/// How long a server may take to log its client address. nats-server with
/// JetStream takes well under a second here; the bound only turns a server
/// that never listens into a clear panic.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the server may take to send INFO once connected.
const INFO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server, killed (and its files removed) when dropped.
pub struct Server {
    inner: Inner,
}

/// What one process of a server is: restart replaces it with another that
/// keeps the ID, so the same store directory and port.
struct Inner {
    cfg: String,
    id: String,
    port: Option<String>,
    /// Flags after the common ones: a cluster node's routes and name.
    extra: Vec<String>,
    /// Behind a mutex because `client_url` (which takes `&self`) checks
    /// whether the process has exited, which needs `&mut Child`.
    child: Mutex<Child>,
    files: Files,
}

/// The files a server writes, all named after its ID.
struct Files {
    log: PathBuf,
    pid: PathBuf,
    output: PathBuf,
    store: PathBuf,
}

impl Files {
    fn new(id: &str) -> Files {
        let dir = env::temp_dir();
        Files {
            log: dir.join(format!("nats-server-{id}.log")),
            pid: dir.join(format!("nats-server-{id}.pid")),
            output: dir.join(format!("nats-server-{id}.out")),
            store: dir.join(format!("store-dir-{id}")),
        }
    }

    /// Removes what one process wrote, keeping the store directory, which a
    /// restarted server reads back.
    fn remove_process_files(&self) {
        for f in [&self.log, &self.pid, &self.output] {
            fs::remove_file(f).ok();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // No panics here: Drop also runs while a failed test unwinds.
        self.inner.stop();
        self.inner.files.remove_process_files();
        fs::remove_dir_all(&self.inner.files.store).ok();
    }
}

impl Inner {
    fn stop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|e| e.into_inner());
        child.kill().ok();
        child.wait().ok();
    }

    /// What the server printed and logged, for a panic message.
    fn describe(&self) -> String {
        let output = fs::read_to_string(&self.files.output).unwrap_or_default();
        let log = fs::read_to_string(&self.files.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        let mut s = format!("config {:?}", self.cfg);
        if !output.trim().is_empty() {
            s += &format!("; output: {}", output.trim());
        }
        if !tail.is_empty() {
            s += &format!("; log tail: {tail}");
        }
        s
    }
}

impl Server {
    /// Kills the server and starts it again on the same port, with the same
    /// configuration and store directory.
    ///
    /// # Panics
    ///
    /// If the server was started on a random port.
    pub fn restart(&mut self) {
        let port = self
            .inner
            .port
            .clone()
            .expect("can't restart a server started on a random port");
        self.inner.stop();
        // The old log still names the old process's address: without it,
        // client_url waits for the new process to listen.
        self.inner.files.remove_process_files();
        let id = self.inner.id.clone();
        let cfg = self.inner.cfg.clone();
        let extra = self.inner.extra.clone();
        self.inner = spawn(&cfg, Some(&port), id, extra);
    }

    /// The URL clients connect with: `nats://localhost:PORT`, or `tls://`
    /// when the server requires TLS.
    pub fn client_url(&self) -> String {
        let info = self.info();
        let scheme = if info["tls_required"].as_bool().unwrap_or(false) {
            "tls"
        } else {
            "nats"
        };
        format!("{scheme}://localhost:{}", info_port(&info))
    }

    /// The client port, from the server's INFO.
    pub fn client_port(&self) -> u16 {
        info_port(&self.info())
    }

    /// The client URL with a user and password in it.
    pub fn client_url_with(&self, user: &str, pass: &str) -> String {
        let mut url = url::Url::parse(&self.client_url()).expect("client URL parses");
        url.set_username(user).ok();
        url.set_password(Some(pass)).ok();
        url.to_string()
    }

    /// The client URL with a token (as the user part) in it.
    pub fn client_url_with_token(&self, token: &str) -> String {
        let mut url = url::Url::parse(&self.client_url()).expect("client URL parses");
        url.set_username(token).ok();
        url.to_string()
    }

    /// The server's process ID, from its PID file.
    pub fn client_pid(&self) -> usize {
        let text = fs::read_to_string(&self.inner.files.pid)
            .unwrap_or_else(|e| panic!("reading {:?}: {e}", self.inner.files.pid));
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("PID file holds {text:?}: {e}"))
    }

    /// The first line the server sends, INFO, as JSON.
    fn info(&self) -> serde_json::Value {
        let addr = self.client_addr();
        let stream =
            TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
        stream.set_read_timeout(Some(INFO_TIMEOUT)).ok();
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("reading INFO from {addr}: {e}"));
        let json = line
            .strip_prefix("INFO")
            .unwrap_or_else(|| panic!("expected INFO from {addr}, got {line:?}"));
        serde_json::from_str(json.trim())
            .unwrap_or_else(|e| panic!("INFO from {addr} is not JSON ({e}): {line:?}"))
    }

    /// Waits for the server to log its client address.
    ///
    /// # Panics
    ///
    /// If the server exits first (with what it said, such as a refused
    /// configuration key) or does not listen within START_TIMEOUT.
    fn client_addr(&self) -> String {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(log) = fs::read_to_string(&self.inner.files.log) {
                if let Some(addr) = parse_client_addr(&log) {
                    return addr;
                }
            }
            let exited = {
                let mut child = self.inner.child.lock().unwrap_or_else(|e| e.into_inner());
                child.try_wait().ok().flatten()
            };
            if let Some(status) = exited {
                panic!(
                    "nats-server exited ({status}) before listening: {}",
                    self.inner.describe()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "nats-server logged no client address within {START_TIMEOUT:?}: {}",
                    self.inner.describe()
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

fn info_port(info: &serde_json::Value) -> u16 {
    let port = info["port"]
        .as_u64()
        .unwrap_or_else(|| panic!("INFO has no port: {info}"));
    u16::try_from(port).unwrap_or_else(|_| panic!("INFO port {port} out of range"))
}

/// The client address a server's log announces, with a wildcard host
/// turned into localhost. nats-server logs
/// `[INF] Listening for client connections on 0.0.0.0:4222`; Skiff logs
/// `level=INFO msg=listening addr=127.0.0.1:4222 ...`.
fn parse_client_addr(log: &str) -> Option<String> {
    for line in log.lines() {
        let addr = if let Some((_, rest)) = line.split_once("Listening for client connections on ") {
            rest.split_whitespace().next()
        } else if line.contains(" msg=listening ") {
            line.split_once(" addr=")
                .and_then(|(_, rest)| rest.split_whitespace().next())
        } else {
            None
        };
        if let Some(addr) = addr {
            return Some(addr.replace("0.0.0.0", "localhost"));
        }
    }
    None
}

/// Puts the server into lame duck mode with `nats-server --signal ldm=PID`.
pub fn set_lame_duck_mode(s: &Server) {
    let status = Command::new("nats-server")
        .arg("--signal")
        .arg(format!("ldm={}", s.client_pid()))
        .status()
        .unwrap_or_else(|e| panic!("running nats-server --signal: {e}"));
    assert!(status.success(), "nats-server --signal ldm: {status}");
}

/// Starts a server with a configuration file (`""` for none) on a random
/// port.
pub fn run_server(cfg: &str) -> Server {
    run_server_with_port(cfg, None)
}

/// Starts a server with no configuration file on a random port.
pub fn run_basic_server() -> Server {
    run_server("")
}

/// Starts a server with a configuration file (`""` for none) on the given
/// port, or a random one for `None`.
pub fn run_server_with_port(cfg: &str, port: Option<&str>) -> Server {
    Server {
        inner: spawn(cfg, port, unique_id(), Vec::new()),
    }
}

/// Whether a TCP port is free on 127.0.0.1.
pub fn is_port_available(port: usize) -> bool {
    match u16::try_from(port) {
        Ok(port) => TcpListener::bind(("127.0.0.1", port)).is_ok(),
        Err(_) => false,
    }
}

/// The configuration files of a cluster's three nodes.
pub struct Config<'a>([&'a str; 3]);

/// Either one configuration file for every node of a cluster or one each.
pub trait IntoConfig<'a> {
    fn into_config(self) -> Config<'a>;
}

impl<'a> IntoConfig<'a> for &'a str {
    fn into_config(self) -> Config<'a> {
        Config([self, self, self])
    }
}

impl<'a> IntoConfig<'a> for [&'a str; 3] {
    fn into_config(self) -> Config<'a> {
        Config(self)
    }
}

/// Three servers routed to each other as one cluster.
pub struct Cluster {
    pub servers: Vec<Server>,
}

impl Cluster {
    /// The first node's client URL.
    pub fn client_url(&self) -> String {
        self.servers[0].client_url()
    }
}

/// Starts a three-node cluster named `cluster`, nodes `node1` to `node3`,
/// each with client port P and cluster port P+1, routed to the other two.
pub fn run_cluster<'a, C: IntoConfig<'a>>(cfg: C) -> Cluster {
    let cfg = cfg.into_config();
    let mut ports: Vec<usize> = Vec::new();
    let first = random_in(3000, 50_000);
    for i in 0..3 {
        let mut port = first + 100 * i;
        while !is_port_available(port)
            || !is_port_available(port + 1)
            || ports.iter().any(|p| p.abs_diff(port) < 2)
        {
            port = random_in(2000, 50_000);
        }
        ports.push(port);
    }
    let servers = (0..3)
        .map(|i| {
            let routes: Vec<String> = (0..3)
                .filter(|&j| j != i)
                .map(|j| format!("nats://127.0.0.1:{}", ports[j] + 1))
                .collect();
            let extra = vec![
                "--routes".to_string(),
                routes.join(","),
                "--cluster".to_string(),
                format!("nats://127.0.0.1:{}", ports[i] + 1),
                "--cluster_name".to_string(),
                "cluster".to_string(),
                "-n".to_string(),
                format!("node{}", i + 1),
            ];
            Server {
                inner: spawn(cfg.0[i], Some(&ports[i].to_string()), unique_id(), extra),
            }
        })
        .collect();
    // Routes and a JetStream meta leader take a moment to form.
    thread::sleep(Duration::from_secs(2));
    Cluster { servers }
}

fn spawn(cfg: &str, port: Option<&str>, id: String, extra: Vec<String>) -> Inner {
    let files = Files::new(&id);
    let output = File::create(&files.output)
        .unwrap_or_else(|e| panic!("creating {:?}: {e}", files.output));
    let stderr = output
        .try_clone()
        .unwrap_or_else(|e| panic!("duplicating {:?}: {e}", files.output));
    let mut cmd = Command::new("nats-server");
    cmd.arg("--store_dir")
        .arg(&files.store)
        .arg("-p")
        .arg(port.unwrap_or("-1"))
        .arg("-l")
        .arg(&files.log)
        .arg("-P")
        .arg(&files.pid)
        .args(&extra);
    if !cfg.is_empty() {
        cmd.arg("-c").arg(cfg);
    }
    cmd.stdin(Stdio::null()).stdout(output).stderr(stderr);
    let child = cmd.spawn().unwrap_or_else(|e| {
        panic!("cannot run nats-server from PATH ({e}); `make compat` puts one there")
    });
    Inner {
        cfg: cfg.to_string(),
        id,
        port: port.map(ToString::to_string),
        extra,
        child: Mutex::new(child),
        files,
    }
}

/// An ID unique among the servers of every test process on the machine:
/// the process ID tells processes apart, the counter servers within one.
fn unique_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A pseudo-random number in [lo, hi), from the standard library's
/// randomly keyed hasher (no rand dependency for three port numbers).
fn random_in(lo: usize, hi: usize) -> usize {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(NEXT_RANDOM.fetch_add(1, Ordering::Relaxed));
    lo + (h.finish() as usize) % (hi - lo)
}

static NEXT_RANDOM: AtomicU64 = AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_addr_from_logs() {
        let cases = [
            (
                "nats-server",
                "[1] 2026/01/01 00:00:00.000000 [INF] Starting nats-server\n\
                 [1] 2026/01/01 00:00:00.000000 [INF] Listening for client connections on 0.0.0.0:45147\n\
                 [1] 2026/01/01 00:00:00.000000 [INF] Server is ready\n",
                Some("localhost:45147"),
            ),
            (
                "skiff",
                "time=2026-01-01T00:00:00Z level=INFO msg=\"websocket listening\" addr=127.0.0.1:8444 tls=false\n\
                 time=2026-01-01T00:00:00Z level=INFO msg=listening addr=127.0.0.1:32939 server_id=N version=2.11.0-skiff\n",
                Some("127.0.0.1:32939"),
            ),
            ("not yet", "[1] [INF] Starting nats-server\n", None),
            ("empty", "", None),
        ];
        for (name, log, want) in cases {
            assert_eq!(parse_client_addr(log).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn unique_ids_differ() {
        assert_ne!(unique_id(), unique_id());
    }
}
