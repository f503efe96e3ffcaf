//! Stamps the commit the binary is built from into `insitu --version` (`INSITU_GIT_COMMIT`).
//!
//! `scripts/build-image` and the Dockerfile pass the commit in the environment, so the build needs no `.git`
//! and the same commit always gives the same bytes. Otherwise it asks git; outside a checkout: `unknown`.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo::rerun-if-env-changed=INSITU_GIT_COMMIT");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commit = match std::env::var("INSITU_GIT_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => {
            // Rebuilt when HEAD moves: HEAD itself (a branch switch), the branch's ref, packed refs. Only files
            // that exist: cargo reruns a script whose watched file is missing on every build.
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            watched.extend(git(dir, &["symbolic-ref", "-q", "HEAD"]));
            for name in &watched {
                if let Some(p) = git(dir, &["rev-parse", "--git-path", name]).map(|p| dir.join(p))
                    && p.exists()
                {
                    println!("cargo::rerun-if-changed={}", p.display());
                }
            }
            git(dir, &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo::rustc-env=INSITU_GIT_COMMIT={commit}");
}
