//! The seed tutorial driven by the real kubectl binary against `insitu up` (e2e/kubectl-seed.sh; ./e2e/run runs
//! the same script against the real control plane). Uses e2e/bin/kubectl (e2e/build-tools.sh) and, if present,
//! an older kubectl on PATH; skips when no kubectl is found.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The kubectl binaries to drive: the e2e-built one and any other on PATH (e.g. an older release).
fn kubectls() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let built = root().join("e2e/bin/kubectl");
    if built.is_file() {
        out.push(built);
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join("kubectl");
        if p.is_file() && !out.iter().any(|o| same_file(o, &p)) {
            out.push(p);
        }
    }
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

struct Up(std::process::Child);

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn seed_tutorial_with_kubectl_on_insitu_up() {
    let kubectls = kubectls();
    if kubectls.is_empty() {
        eprintln!("skipping: no kubectl (run e2e/build-tools.sh)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("insitu-kubectl-seed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let kc = dir.join("kubeconfig");
    let log = std::fs::File::create(dir.join("up.log")).expect("log");
    let child = Command::new(env!("CARGO_BIN_EXE_insitu"))
        .args(["up", "--addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kc)
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start insitu up");
    let _up = Up(child);
    let start = Instant::now();
    while !kc.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(kc.exists(), "insitu up wrote no kubeconfig: {}", dir.display());
    for (i, kubectl) in kubectls.iter().enumerate() {
        let version = Command::new(kubectl)
            .args(["version", "--client"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let out = Command::new(root().join("e2e/kubectl-seed.sh"))
            .arg(kubectl)
            .arg(&kc)
            .arg(format!("seed-{i}"))
            .output()
            .expect("run e2e/kubectl-seed.sh");
        let text = String::from_utf8_lossy(&out.stdout);
        println!(
            "{} ({})\n{text}{}",
            kubectl.display(),
            version.lines().next().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr)
        );
        let last = text.lines().last().unwrap_or("");
        assert!(
            out.status.success() && last.ends_with(" 0 failed"),
            "{}: {last}\n{text}",
            kubectl.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
