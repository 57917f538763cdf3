//! The READMEs' walk-through, run as a newcomer pastes it (issue "Every command in the docs
//! works as pasted, in the order a newcomer follows them"): every shell block marked
//! `<!-- doc-test: NAME -->` in the top-level README, then in `tenant-cli/README.md`, in the
//! order they appear, each by `bash` (`set -euo pipefail`) in one working directory where
//! `fixtures` is the repository's. `svc-cli` on `PATH` is the binary under test, and `cargo run
//! [--release] -p svc-cli --` reads as `svc-cli`. A block marked `background` (the sandbox,
//! `webhook serve`) runs on while the later ones do, as in a second terminal, and the `export`
//! lines it prints go into the environment of the blocks after it, as a newcomer pastes them.
//!
//! Ports: each port a block names is moved to a free one, the same port to the same free one
//! everywhere (so the sandbox's `--webhook-url` still reaches `webhook serve`), and the
//! sandbox's own defaults (read from its `--help`) are named explicitly first; two servers of
//! the walk-through documented on one port are a clash, reported before anything runs.
//! Afterwards every file the walk-through left is git-ignored, so `git add -A` in a clone where
//! it was followed takes none of them (the sandbox's credentials file among them).

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The marked blocks, in the order a newcomer meets them. A marker removed or renamed fails the
/// test instead of shrinking what it runs.
const EXPECTED: &[&str] = &[
    "webhook-verify",
    "sandbox",
    "reconcile",
    "webhook-serve",
    "inbox",
    "webhook-sign",
    "store",
    "real-calls",
    "faults",
];

/// The READMEs read, in the order a newcomer reads them (paths from the repository's root).
const READMES: &[&str] = &["README.md", "tenant-cli/README.md"];

const MARKER: &str = "<!-- doc-test:";

/// How long a block may run, and how long a background one has to get ready.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(60);

/// One marked shell block.
#[derive(Debug)]
struct Block {
    /// `README.md:42`, where its marker is.
    at: String,
    name: String,
    background: bool,
    text: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The marked `sh` blocks of `text` (the README at `file`).
fn marked_blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim().strip_prefix(MARKER) else {
            continue;
        };
        let at = format!("{file}:{}", index + 1);
        let words: Vec<&str> = rest
            .strip_suffix("-->")
            .unwrap_or_else(|| panic!("{at}: a doc-test marker ends with -->"))
            .split_whitespace()
            .collect();
        let (name, options) = words
            .split_first()
            .unwrap_or_else(|| panic!("{at}: a doc-test marker names its block"));
        assert!(
            options.iter().all(|option| *option == "background"),
            "{at}: unknown doc-test option in {options:?}"
        );
        assert_eq!(
            lines.get(index + 1).map(|l| l.trim()),
            Some("```sh"),
            "{at}: a doc-test marker stands right before a ```sh block"
        );
        let body: Vec<&str> = lines[index + 2..]
            .iter()
            .take_while(|l| l.trim() != "```")
            .copied()
            .collect();
        blocks.push(Block {
            at,
            name: (*name).to_owned(),
            background: !options.is_empty(),
            text: body.join("\n"),
        });
    }
    blocks
}

/// The addresses `svc-cli sandbox` listens on when not told: its `--listen` and
/// `--console-listen` defaults, as its `--help` states them.
fn sandbox_defaults() -> (String, String) {
    let help = Command::new(env!("CARGO_BIN_EXE_svc-cli"))
        .args(["sandbox", "--help"])
        .output()
        .expect("run svc-cli sandbox --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let default_of = |flag: &str| {
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{flag} ")))
            .unwrap_or_else(|| panic!("no {flag} in sandbox --help: {help}"));
        let (_, default) = line
            .split_once("[default: ")
            .unwrap_or_else(|| panic!("no default for {flag}: {line}"));
        default
            .split([']', ','])
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    (default_of("--listen"), default_of("--console-listen"))
}

/// The block as a newcomer's shell runs it, ports as documented: `cargo run … --` is
/// `svc-cli`, and a sandbox started without addresses names its defaults.
fn as_run(text: &str, (listen, console): &(String, String)) -> String {
    let mut text = text
        .replace("cargo run --release -p svc-cli --", "svc-cli")
        .replace("cargo run -p svc-cli --", "svc-cli");
    let starts_server = text.match_indices("svc-cli sandbox").any(|(at, found)| {
        let next = text[at + found.len()..].trim_start_matches(' ');
        next.starts_with('-') || next.starts_with('\\') || next.starts_with('\n')
    });
    if starts_server {
        let mut flags = String::new();
        if !text.contains(" --listen ") {
            flags.push_str(&format!(" --listen {listen}"));
        }
        if !text.contains("--console-listen") && !text.contains("--no-console") {
            flags.push_str(&format!(" --console-listen {console}"));
        }
        text = text.replacen("svc-cli sandbox", &format!("svc-cli sandbox{flags}"), 1);
    }
    text
}

/// `host:port` of every loopback or wildcard address in `text`, with where the port starts.
fn addresses(text: &str) -> Vec<(usize, usize, u16)> {
    let mut found = Vec::new();
    for host in ["127.0.0.1:", "0.0.0.0:", "localhost:"] {
        for (at, _) in text.match_indices(host) {
            let start = at + host.len();
            let digits: String = text[start..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(port) = digits.parse::<u16>() {
                found.push((start, start + digits.len(), port));
            }
        }
    }
    found.sort_unstable();
    found
}

/// The ports the block's servers listen on (`--listen`, `--console-listen`), as documented.
fn listen_ports(text: &str) -> Vec<u16> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|pair| pair[0] == "--listen" || pair[0] == "--console-listen")
        .filter_map(|pair| pair[1].rsplit_once(':'))
        .filter_map(|(_, port)| port.parse().ok())
        .collect()
}

/// Documented ports, each moved to a free one of this machine (the same one every time), out
/// of the range other tests' servers get: the sandbox names `webhook serve`'s port seconds
/// before `webhook serve` binds it.
#[derive(Debug, Default)]
struct Ports(BTreeMap<u16, u16>);

impl Ports {
    fn free(&mut self, documented: u16) -> u16 {
        *self
            .0
            .entry(documented)
            .or_insert_with(svc_test_support::ports::reserved_port)
    }

    fn rewrite(&mut self, text: &str) -> String {
        let mut out = String::new();
        let mut last = 0;
        for (start, end, port) in addresses(text) {
            out.push_str(&text[last..start]);
            out.push_str(&if port == 0 {
                "0".to_owned()
            } else {
                self.free(port).to_string()
            });
            last = end;
        }
        out.push_str(&text[last..]);
        out
    }
}

/// The walk-through's directories: `work`, where the blocks run (and nothing else is written),
/// and `meta`, for the scripts, their output and the `svc-cli` on `PATH`.
struct Walk {
    work: tempfile::TempDir,
    meta: tempfile::TempDir,
    env: Vec<(String, String)>,
    background: Vec<Serving>,
}

/// A background block that is serving: what it is, its `bash` and its stderr file.
struct Serving {
    name: String,
    at: String,
    child: Child,
    err: PathBuf,
}

impl Walk {
    fn new() -> Self {
        let work = tempfile::tempdir().expect("temp dir");
        let meta = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(repo_root().join("fixtures"), work.path().join("fixtures"))
            .expect("link fixtures");
        let bin = meta.path().join("bin");
        std::fs::create_dir(&bin).expect("bin dir");
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_svc-cli"), bin.join("svc-cli"))
            .expect("link svc-cli");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env = vec![
            ("HOME".to_owned(), meta.path().display().to_string()),
            (
                "XDG_CONFIG_HOME".to_owned(),
                meta.path().join("xdg").display().to_string(),
            ),
            ("PATH".to_owned(), path),
        ];
        Self {
            work,
            meta,
            env,
            background: Vec::new(),
        }
    }

    /// Starts `bash` on the block's script, its output into `meta`.
    fn spawn(&self, index: usize, block: &Block, text: &str) -> (Child, PathBuf, PathBuf) {
        use std::os::unix::process::CommandExt;
        let base = self.meta.path().join(format!("{index:02}-{}", block.name));
        let script = base.with_extension("sh");
        std::fs::write(&script, format!("set -euo pipefail\n{text}\n")).expect("write script");
        let (out, err) = (base.with_extension("out"), base.with_extension("err"));
        let child = Command::new("bash")
            .arg(&script)
            .current_dir(self.work.path())
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .process_group(0)
            .spawn()
            .expect("spawn bash");
        (child, out, err)
    }

    /// Runs a block to its end; its stdout.
    fn run(&self, index: usize, block: &Block, text: &str) -> String {
        let (mut child, out, err) = self.spawn(index, block, text);
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                stop(&mut child);
                panic!(
                    "{} ({}) did not finish within {BLOCK_TIMEOUT:?}:\n{text}\n{}",
                    block.name,
                    block.at,
                    read(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = read(&out);
        assert!(
            status.success(),
            "{} ({}) failed ({status}) as pasted:\n{text}\n--- stdout\n{stdout}\n--- stderr\n{}{}",
            block.name,
            block.at,
            read(&err),
            self.background_stderr()
        );
        stdout
    }

    /// The stderr of each background block so far, to read beside a failure.
    fn background_stderr(&self) -> String {
        self.background
            .iter()
            .map(|serving| {
                format!(
                    "\n--- stderr of {} ({}), in the background\n{}",
                    serving.name,
                    serving.at,
                    read(&serving.err)
                )
            })
            .collect()
    }

    /// Fails the test, with its stderr, when a background block is no longer running: the
    /// blocks after it would fail for a reason their own output does not show.
    fn check_serving(&mut self) {
        for serving in &mut self.background {
            if let Some(status) = serving.child.try_wait().expect("wait") {
                panic!(
                    "{} ({}) stopped ({status}) while the blocks after it ran:\n{}",
                    serving.name,
                    serving.at,
                    read(&serving.err)
                );
            }
        }
    }

    /// Starts a background block and waits until its servers answer HTTP and it printed the
    /// `export` lines its block shows; those join the environment. A port that accepts
    /// connections is not enough: `webhook serve` binds before it opens the store's inbox, and
    /// a delivery sent in between, or a start that fails there, would go unseen.
    fn start(&mut self, index: usize, block: &Block, text: &str, ports: &[u16]) {
        let (mut child, out, err) = self.spawn(index, block, text);
        let exports_shown = block.text.matches("# export ").count();
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        let exports = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                panic!(
                    "{} ({}) exited ({status}) instead of serving:\n{text}\n{}",
                    block.name,
                    block.at,
                    read(&err)
                );
            }
            let exports = export_lines(&read(&out));
            let answering = ports.iter().all(|port| answers_http(*port));
            if answering && exports.len() >= exports_shown {
                break exports;
            }
            if Instant::now() > deadline {
                stop(&mut child);
                panic!(
                    "{} ({}) was not serving within {BLOCK_TIMEOUT:?}:\n{text}\n{}",
                    block.name,
                    block.at,
                    read(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.env.extend(exports);
        self.background.push(Serving {
            name: block.name.clone(),
            at: block.at.clone(),
            child,
            err,
        });
    }

    fn exported(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        for serving in self.background.iter_mut().rev() {
            stop(&mut serving.child);
        }
    }
}

/// Whether an HTTP server answers on `port` of loopback (with any status).
fn answers_http(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let mut head = [0_u8; 8];
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .and_then(|()| stream.set_write_timeout(Some(Duration::from_secs(2))))
        .and_then(|()| {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        })
        .and_then(|()| stream.read_exact(&mut head))
        .is_ok_and(|()| head.starts_with(b"HTTP/1."))
}

/// SIGTERM to the block's process group (bash and the `svc-cli` it runs), then SIGKILL if
/// anything of it is left after 15 s.
fn stop(child: &mut Child) {
    let group = format!("-{}", child.id());
    let signal = |name: &str| {
        Command::new("kill")
            .args([name, "--", &group])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    signal("-TERM");
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        let _ = child.try_wait();
        if !signal("-0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL");
    let _ = child.wait();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn export_lines(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Every file and directory under `dir`, relative to it (`fixtures`, the link, left out).
fn left_behind(dir: &Path, prefix: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let relative = prefix.join(entry.file_name());
        if relative == Path::new("fixtures") {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            left_behind(&entry.path(), &relative, found);
        } else {
            found.push(relative);
        }
    }
}

/// The files of `paths` the repository's `.gitignore` does not cover, or `None` when `git`
/// cannot tell here (not installed, or no checkout).
fn not_ignored(paths: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let mut command = Command::new("git");
    command
        .arg("-C")
        .arg(repo_root())
        .args(["check-ignore", "--no-index", "--verbose", "--non-matching"])
        .args(paths)
        .stderr(Stdio::null());
    let output = command.output().ok()?;
    // Exit 0: some matched; 1: none matched; anything else: git could not tell.
    if !matches!(output.status.code(), Some(0 | 1)) {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Some(
        text.lines()
            .filter(|line| line.starts_with("::\t"))
            .map(|line| PathBuf::from(&line[3..]))
            .collect(),
    )
}

#[test]
fn the_readme_walkthrough_runs_as_pasted_against_the_sandbox() {
    if Command::new("bash").arg("--version").output().is_err() {
        svc_test_support::skip::announce(
            "the_readme_walkthrough_runs_as_pasted_against_the_sandbox",
            "bash is not installed",
        );
        return;
    }
    let root = repo_root();
    let blocks: Vec<Block> = READMES
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(root.join(file)).expect("read README");
            marked_blocks(file, &text)
        })
        .collect();
    let names: Vec<&str> = blocks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, EXPECTED, "the marked blocks, in order");

    // Ports as documented: no two servers on one, and webhooks sent where they are received.
    let defaults = sandbox_defaults();
    let documented: Vec<String> = blocks.iter().map(|b| as_run(&b.text, &defaults)).collect();
    let mut held: BTreeMap<u16, &str> = BTreeMap::new();
    for (block, text) in blocks.iter().zip(&documented) {
        for port in listen_ports(text) {
            if let Some(holder) = held.get(&port) {
                panic!(
                    "port clash: {} ({}) listens on port {port}, which {holder} holds while it \
                     runs:\n{text}",
                    block.name, block.at
                );
            }
            if block.background {
                held.insert(port, &block.name);
            }
        }
    }
    let port_of = |name: &str, find: &dyn Fn(&str) -> Option<u16>| {
        let index = names.iter().position(|n| *n == name).expect("block");
        find(&documented[index]).unwrap_or_else(|| panic!("no port in {name}"))
    };
    let webhook_port = port_of("sandbox", &|text| {
        let (_, after) = text.split_once("--webhook-url http://127.0.0.1:")?;
        after
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    });
    let serve_port = port_of("webhook-serve", &|text| listen_ports(text).first().copied());
    assert_eq!(
        webhook_port, serve_port,
        "the sandbox sends webhooks where webhook serve listens"
    );

    let mut ports = Ports::default();
    let mut walk = Walk::new();
    let mut outputs: BTreeMap<&str, String> = BTreeMap::new();
    for (index, (block, text)) in blocks.iter().zip(&documented).enumerate() {
        let listening: Vec<u16> = listen_ports(text).iter().map(|p| ports.free(*p)).collect();
        let text = ports.rewrite(text);
        walk.check_serving();
        if block.background {
            walk.start(index, block, &text, &listening);
        } else {
            outputs.insert(&block.name, walk.run(index, block, &text));
        }
    }
    walk.check_serving();

    // What the blocks say they do.
    let base_url = walk.exported("SVC_BASE_URL").unwrap_or_default();
    assert_eq!(
        base_url,
        format!("http://{}/v1", {
            let (host, port) = defaults.0.rsplit_once(':').expect("host:port");
            format!("{host}:{}", ports.free(port.parse().expect("port")))
        }),
        "the sandbox serves where its defaults say"
    );
    let sign = &outputs["webhook-sign"];
    let expected_sig = read(&root.join("fixtures/webhooks/example.sig"));
    let mut lines = sign.lines();
    assert_eq!(lines.next(), Some(expected_sig.trim()), "{sign}");
    let curl = lines.next().unwrap_or_default();
    assert!(
        curl.starts_with("curl ")
            && curl.contains(&format!(
                "http://127.0.0.1:{}/webhooks",
                ports.free(serve_port)
            )),
        "{sign}"
    );
    let ingested = read(&walk.work.path().join("ingested.txt"));
    assert!(
        ingested.contains(" stored svc_call_"),
        "the shipped dialer records are ingested, not all dropped: {ingested}"
    );

    // Stop the servers, then: nothing the walk-through left is for `git add -A`.
    for serving in walk.background.iter_mut().rev() {
        stop(&mut serving.child);
    }
    walk.background.clear();
    let mut files = Vec::new();
    left_behind(walk.work.path(), Path::new(""), &mut files);
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(".credentials.json")),
        "{files:?}"
    );
    match not_ignored(&files) {
        Some(left) => assert!(
            left.is_empty(),
            "the walk-through leaves files .gitignore does not cover: {left:?}"
        ),
        None => svc_test_support::skip::announce(
            "the_readme_walkthrough_runs_as_pasted_against_the_sandbox (its .gitignore check)",
            "git cannot check .gitignore here (install git, run from a checkout)",
        ),
    }
}
