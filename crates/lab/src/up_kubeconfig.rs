//! The kubeconfig `insitu up` writes: a fresh random bearer token per run, file mode 0600, never through a
//! symlink, and never over a file it did not write itself (unless `--force`).

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// First line of every kubeconfig `insitu up` writes: how a later run knows the file is its own.
pub const MARKER: &str =
    "# written by `insitu up`: the embedded simulated cluster's kubeconfig (rewritten on each run)";

/// 32 random bytes from the OS, hex-encoded: the run's bearer token.
pub fn new_token() -> anyhow::Result<String> {
    Ok(random_bytes::<32>()?.iter().map(|b| format!("{b:02x}")).collect())
}

/// `N` bytes from the OS's random source.
pub fn random_bytes<const N: usize>() -> anyhow::Result<[u8; N]> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .context("reading /dev/urandom for the kubeconfig token")?;
    Ok(buf)
}

/// A kubeconfig pointing kubectl at the simulated apiserver (`https://addr`, trusting `ca_data`, the base64
/// PEM of the run's CA) with `token`.
pub fn kubeconfig_yaml(addr: SocketAddr, ca_data: &str, token: &str) -> String {
    format!(
        "{MARKER}\napiVersion: v1\nkind: Config\nclusters:\n- name: insitu-sim\n  cluster:\n    server: https://{addr}\n    certificate-authority-data: {ca_data}\ncontexts:\n- name: insitu-sim\n  context:\n    cluster: insitu-sim\n    user: insitu\n    namespace: default\ncurrent-context: insitu-sim\nusers:\n- name: insitu\n  user:\n    token: {token}\n"
    )
}

/// Writes `contents` to `path` (mode 0600) by a rename from a fresh file in the same directory, so a symlink
/// at `path` is replaced, never followed; refuses a symlink outright, and a regular file that does not start
/// with [`MARKER`] unless `force`.
pub fn write(path: &Path, contents: &str, force: bool) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => anyhow::bail!(
            "{} is a symbolic link: insitu up does not write through links; pass another --kubeconfig path",
            path.display()
        ),
        Ok(meta) if !meta.is_file() => {
            anyhow::bail!(
                "{} exists and is not a regular file; pass another --kubeconfig path",
                path.display()
            )
        }
        Ok(_) if !force && !written_by_us(path) => anyhow::bail!(
            "{} exists and was not written by insitu up: refusing to overwrite it (pass --force to replace it, or \
             another --kubeconfig path)",
            path.display()
        ),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", path.display())),
    }
    let tmp = temp_path(path)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let result = opts
        .open(&tmp)
        .and_then(|mut f| f.write_all(contents.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

fn written_by_us(path: &Path) -> bool {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    head[..n].starts_with(MARKER.as_bytes())
}

fn temp_path(path: &Path) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("--kubeconfig {} has no file name", path.display()))?;
    let suffix: String = random_bytes::<6>()?.iter().map(|b| format!("{b:02x}")).collect();
    let tmp_name = format!(".{}.{suffix}.tmp", name.to_string_lossy());
    Ok(path.with_file_name(tmp_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let suffix: String = random_bytes::<6>()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect())
            .unwrap_or_default();
        let dir = std::env::temp_dir().join(format!("insitu-kubeconfig-{suffix}"));
        assert!(std::fs::create_dir_all(&dir).is_ok());
        dir
    }

    #[test]
    fn writes_its_own_file_refuses_others_and_links() {
        let dir = scratch();
        let cfg = dir.join("kubeconfig");
        let addr: SocketAddr = ([127, 0, 0, 1], 6443).into();
        let token = new_token().unwrap_or_default();
        assert_eq!(token.len(), 64);
        assert!(write(&cfg, &kubeconfig_yaml(addr, "Q0E=", &token), false).is_ok());
        let text = std::fs::read_to_string(&cfg).unwrap_or_default();
        assert!(text.starts_with(MARKER) && text.contains(&format!("token: {token}")));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&cfg)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            assert_eq!(mode, 0o600);
        }
        // Its own file: rewritten.
        assert!(write(&cfg, &kubeconfig_yaml(addr, "Q0E=", "t2"), false).is_ok());
        // Someone else's: refused, then replaced with --force.
        let other = dir.join("config");
        assert!(std::fs::write(&other, "apiVersion: v1\nkind: Config\n").is_ok());
        let err = write(&other, "x", false)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("was not written by insitu up") && err.contains("--force"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&other).unwrap_or_default(),
            "apiVersion: v1\nkind: Config\n"
        );
        assert!(write(&other, &kubeconfig_yaml(addr, "Q0E=", "t3"), true).is_ok());
        // A symlink: refused even with --force, its target untouched.
        #[cfg(unix)]
        {
            let target = dir.join("target");
            assert!(std::fs::write(&target, "precious").is_ok());
            let link = dir.join("link");
            assert!(std::os::unix::fs::symlink(&target, &link).is_ok());
            let err = write(&link, "x", true)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("symbolic link"), "{err}");
            assert_eq!(std::fs::read_to_string(&target).unwrap_or_default(), "precious");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
