//! Test support: a local S3-compatible server ([moto]) for integration tests
//! of [`ObjectStorage`] against the real S3 protocol.
//!
//! Not meant for production use. [`MotoServer::start`] finds `moto_server`
//! (or `python3 -m moto.server`), installing `moto[server]` into a private
//! virtualenv under `$HOME/.cache/lidx/moto-venv` the first time if neither
//! exists, and runs it on a free port of 127.0.0.1 until dropped.
//!
//! [moto]: https://github.com/getmoto/moto

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::{ObjectStorage, S3Options};

/// How long a freshly started server gets to accept connections.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Attempts with a new port when the server dies at startup, which happens
/// when another process grabbed the free port first.
const START_ATTEMPTS: usize = 3;

/// A running moto S3 server, killed when dropped. For tests only.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl MotoServer {
    /// Starts a server on a free port of 127.0.0.1, installing moto first if
    /// needed (this takes a minute once), and waits until it accepts
    /// connections.
    ///
    /// The error is a one-line reason, meant for a test to print as
    /// `SKIPPED: <reason>` when no server can be had on this machine.
    pub fn start() -> Result<MotoServer, String> {
        let command = launcher()?;
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(command) {
                Ok(server) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    fn start_once(command: &[OsString]) -> Result<MotoServer, String> {
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!("lidx-moto-{}-{port}.log", std::process::id()));
        let log_file =
            File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let log_file2 = log_file
            .try_clone()
            .map_err(|e| format!("cannot duplicate {}: {e}", log.display()))?;
        // Output goes to a file, not a pipe: moto logs every request, and an
        // undrained pipe would eventually block the server.
        let child = Command::new(&command[0])
            .args(&command[1..])
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_file2)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", command[0].to_string_lossy()))?;
        let mut server = MotoServer { child, port, log };
        server.wait_until_ready()?;
        Ok(server)
    }

    fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "moto server exited at startup ({status}): {}",
                    last_log_line(&self.log)
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "moto server did not accept connections on {addr} within {}s: {}",
                    STARTUP_TIMEOUT.as_secs(),
                    last_log_line(&self.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The server's endpoint URL, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates bucket `name` (moto accepts unauthenticated requests).
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        let valid = (3..=63).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid {
            return Err(format!("invalid bucket name {name:?}"));
        }
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("cannot connect to moto at {addr}: {e}"))?;
        let io = |e: std::io::Error| format!("creating bucket {name} on {addr}: {e}");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(io)?;
        let request = format!(
            "PUT /{name} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).map_err(io)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).map_err(io)?;
        let response = String::from_utf8_lossy(&response);
        let status_line = response.lines().next().unwrap_or("");
        let status = status_line.split_whitespace().nth(1).unwrap_or("");
        if status == "200" {
            Ok(())
        } else {
            Err(format!(
                "creating bucket {name} on {addr}: server answered {status_line:?}"
            ))
        }
    }

    /// An [`ObjectStorage`] on `s3://bucket/prefix` of this server (`prefix`
    /// may be empty), with dummy credentials in region `us-east-1`.
    pub fn storage(&self, bucket: &str, prefix: &str) -> crate::Result<ObjectStorage> {
        let url = if prefix.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        let options = S3Options {
            endpoint: Some(self.endpoint()),
            region: "us-east-1".into(),
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
            allow_http: true,
        };
        ObjectStorage::s3_with(&url, &options)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // Errors mean the child is already gone, which is what we want.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The command line (without host and port) that runs moto, found or
/// installed once per process; concurrent callers wait for the first.
fn launcher() -> Result<&'static [OsString], String> {
    static LAUNCHER: OnceLock<Result<Vec<OsString>, String>> = OnceLock::new();
    LAUNCHER
        .get_or_init(find_or_install)
        .as_ref()
        .map(Vec::as_slice)
        .map_err(Clone::clone)
}

fn find_or_install() -> Result<Vec<OsString>, String> {
    let home = std::env::var_os("HOME").ok_or("HOME is not set; cannot locate a moto install")?;
    let cache = Path::new(&home).join(".cache/lidx");
    let venv = cache.join("moto-venv");
    let venv_server = venv.join("bin/moto_server");
    if venv_server.is_file() {
        return Ok(vec![venv_server.into()]);
    }
    if succeeds(Command::new("moto_server").arg("--help")) {
        return Ok(vec!["moto_server".into()]);
    }
    if succeeds(Command::new("python3").args(["-c", "import moto.server, flask, flask_cors"])) {
        return Ok(vec!["python3".into(), "-m".into(), "moto.server".into()]);
    }
    install(&cache, &venv)?;
    if venv_server.is_file() {
        Ok(vec![venv_server.into()])
    } else {
        Err(format!(
            "installed moto[server] into {} but {} is missing",
            venv.display(),
            venv_server.display()
        ))
    }
}

/// Installs `moto[server]` into the virtualenv `venv`, holding a file lock
/// so that test binaries running at the same time install it only once.
fn install(cache: &Path, venv: &Path) -> Result<(), String> {
    std::fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create {}: {e}", cache.display()))?;
    let lock_path = cache.join("moto-venv.lock");
    let lock = File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if venv.join("bin/moto_server").is_file() {
        // Another process finished the install while we waited.
        return Ok(());
    }
    run(Command::new("python3").arg("-m").arg("venv").arg(venv))?;
    run(Command::new(venv.join("bin/pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "moto[server]",
    ]))
    // The lock is released when `lock` is dropped.
}

fn succeeds(command: &mut Command) -> bool {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Runs `command`, turning failure into a one-line reason.
fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    Err(format!("{shown} failed ({}): {last}", output.status))
}

/// A port that was free a moment ago; the server binds it right after.
fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| format!("cannot bind 127.0.0.1:0: {e}"))?;
    listener
        .local_addr()
        .map(|addr| addr.port())
        .map_err(|e| format!("cannot read the bound port: {e}"))
}

fn last_log_line(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .to_string()
}
