//! Container images: reference normalization, deterministic image IDs and per-image behaviour profiles.

use std::time::Duration;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What goes wrong with an image, if anything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImageFailure {
    /// The image pulls and runs forever.
    #[default]
    None,
    /// Every pull fails (`ErrImagePull` → `ImagePullBackOff`, retried with back-off).
    NeverPulls,
    /// The container exits with code 1 this long after each start (`CrashLoopBackOff`).
    CrashAfter(Duration),
    /// The image's default command exits 0 at once (e.g. busybox's `sh` without a terminal): a container
    /// that sets no `command` is `Completed`, then restarted per `restartPolicy` (`CrashLoopBackOff` under
    /// `Always`); one with a `command` runs normally.
    ExitsAtOnce,
}

/// How a simulated image behaves on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageProfile {
    /// Time to pull the image onto a node (pulling again on the same node is instant).
    pub pull: Duration,
    /// Time from "image present" to "container running" (create + start).
    pub start: Duration,
    /// Application warm-up: readiness probes fail until this long after start.
    pub warmup: Duration,
    /// Failure mode.
    pub fail: ImageFailure,
}

impl Default for ImageProfile {
    fn default() -> Self {
        Self {
            pull: Duration::from_secs(2),
            start: Duration::from_secs(1),
            warmup: Duration::ZERO,
            fail: ImageFailure::None,
        }
    }
}

/// Image profiles matched by pattern (first match wins), with a default for everything else.
///
/// A pattern is compared with both the image reference as written in the pod spec and its normalized form
/// (`docker.io/library/nginx:1.19.0`); `*` matches any run of characters (e.g. `nginx:*`, `*/crashy:*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageProfiles {
    /// Profile for images that match no rule.
    pub default: ImageProfile,
    /// `(pattern, profile)` rules, tried in order.
    pub rules: Vec<(String, ImageProfile)>,
    /// The registry: normalized reference → `sha256:<64 hex>` digest. Several tags may share one digest
    /// (the same image pushed twice); references not listed get a digest derived from their name.
    pub digests: std::collections::BTreeMap<String, String>,
    /// Seeded transient failures of container start attempts, and the new-pod sandbox time.
    pub starts: StartModel,
}

/// What starting a container costs beyond its image's pull/start: a new pod's sandbox (CRI `RunPodSandbox` +
/// CNI: the pod's network namespace and IP) and a seeded chance that one start attempt fails transiently
/// (shown as `ErrImagePull`, retried after the kubelet's back-off, 10 s doubling), higher for a pod that is new
/// on its node (sandbox, IP, volumes, a cold image cache all happen then) than for a container restarted in place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StartModel {
    /// Time from a pod's admission on a node to its first image pull/container create.
    pub sandbox: Duration,
    /// Per-million chance that a start attempt of a pod's first containers (a new pod on the node) fails.
    pub new_pod_failure_ppm: u32,
    /// Per-million chance that a start attempt of a container that already ran in this pod fails (in-place
    /// update or restart).
    pub restart_failure_ppm: u32,
}

impl ImageProfiles {
    /// Adds a rule (builder style).
    pub fn with(mut self, pattern: impl Into<String>, profile: ImageProfile) -> Self {
        self.rules.push((pattern.into(), profile));
        self
    }

    /// Records that `reference` resolves to `digest` in the registry (`sha256:` + 64 hex digits).
    pub fn with_digest(mut self, reference: &str, digest: &str) -> Result<Self, String> {
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(format!(
                "image digest {digest:?} for {reference:?} must be sha256: followed by 64 lowercase hex digits"
            ));
        }
        if reference.is_empty() || reference.contains('@') {
            return Err(format!(
                "image reference {reference:?} must be a tag reference such as nginx:alpine"
            ));
        }
        self.digests
            .insert(normalize_image(reference), digest.to_string());
        Ok(self)
    }

    /// The image ID the runtime reports for a reference (`repo@sha256:…`): the registry's digest when it
    /// knows the tag, else [`image_id`].
    pub fn image_id(&self, image: &str) -> String {
        let normalized = normalize_image(image);
        match self.digests.get(&normalized) {
            Some(d) => format!("{}@{d}", repository(&normalized)),
            None => image_id(image),
        }
    }

    /// The profile for an image reference.
    pub fn lookup(&self, image: &str) -> ImageProfile {
        let normalized = normalize_image(image);
        self.rules
            .iter()
            .find(|(pat, _)| glob_match(pat, image) || glob_match(pat, &normalized))
            .map(|(_, p)| *p)
            .unwrap_or(self.default)
    }
}

/// `*`-only glob matching.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Normalizes an image reference like containerd does: `nginx:1.19.0` → `docker.io/library/nginx:1.19.0`,
/// `nginx` → `docker.io/library/nginx:latest`, `quay.io/a/b@sha256:…` unchanged.
pub fn normalize_image(image: &str) -> String {
    let image = image.trim();
    let (name, suffix) = split_ref(image);
    let first = name.split('/').next().unwrap_or_default();
    let has_domain =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_domain {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    match suffix {
        Some(s) => format!("{full}{s}"),
        None => format!("{full}:latest"),
    }
}

/// Splits `repo[:tag][@digest]` into the repository and the `:tag`/`@digest` suffix (if any).
/// With a digest, containerd reports `repo@digest` (the tag is dropped).
fn split_ref(image: &str) -> (&str, Option<&str>) {
    if let Some(at) = image.find('@') {
        let (name, digest) = image.split_at(at);
        return (split_tag(name).0, Some(digest));
    }
    split_tag(image)
}

fn split_tag(image: &str) -> (&str, Option<&str>) {
    let last_slash = image.rfind('/').map(|i| i + 1).unwrap_or(0);
    match image[last_slash..].rfind(':') {
        Some(i) => {
            let (name, tag) = image.split_at(last_slash + i);
            (name, Some(tag))
        }
        None => (image, None),
    }
}

/// The repository part of a normalized reference (`docker.io/library/nginx`).
fn repository(normalized: &str) -> &str {
    split_ref(normalized).0
}

/// The image ID the runtime reports: `repo@sha256:<64 hex>`, the digest from the reference if it has one,
/// else derived deterministically from the normalized reference.
pub fn image_id(image: &str) -> String {
    let normalized = normalize_image(image);
    let repo = repository(&normalized);
    if let Some(at) = normalized.find("@sha256:") {
        return format!("{repo}{}", &normalized[at..]);
    }
    format!("{repo}@sha256:{}", hex64(fnv1a(normalized.as_bytes())))
}

/// 64 lowercase hex characters derived from a seed.
pub fn hex64(seed: u64) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    let mut out = String::with_capacity(64);
    for b in bytes {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 0xf), 16).unwrap_or('0'));
    }
    out
}

/// FNV-1a, 64 bit: a stable hash (std's hasher is not guaranteed stable across releases).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_like_containerd() {
        assert_eq!(normalize_image("nginx:1.19.0"), "docker.io/library/nginx:1.19.0");
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(normalize_image("bitnami/redis:7"), "docker.io/bitnami/redis:7");
        assert_eq!(
            normalize_image("quay.io/coreos/etcd:v3.5.0"),
            "quay.io/coreos/etcd:v3.5.0"
        );
        assert_eq!(normalize_image("localhost:5000/app"), "localhost:5000/app:latest");
        assert_eq!(normalize_image("registry:5000/app:1"), "registry:5000/app:1");
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            normalize_image(&format!("nginx:1.2@{d}")),
            format!("docker.io/library/nginx@{d}")
        );
    }

    #[test]
    fn image_ids_are_deterministic_and_distinct() {
        let a = image_id("nginx:1.19.0");
        assert!(a.starts_with("docker.io/library/nginx@sha256:"));
        assert_eq!(a.len(), "docker.io/library/nginx@sha256:".len() + 64);
        assert_eq!(a, image_id("docker.io/library/nginx:1.19.0"));
        assert_ne!(a, image_id("nginx:1.21.0"));
        let d = format!("sha256:{}", "b".repeat(64));
        assert_eq!(
            image_id(&format!("nginx@{d}")),
            format!("docker.io/library/nginx@{d}")
        );
    }

    #[test]
    fn registry_digests_shared_by_tags() {
        let d = format!("sha256:{}", "ab".repeat(32));
        let p = ImageProfiles::default()
            .with_digest("nginx:alpine", &d)
            .unwrap()
            .with_digest("docker.io/library/nginx:stable-alpine", &d)
            .unwrap();
        assert_eq!(p.image_id("nginx:alpine"), format!("docker.io/library/nginx@{d}"));
        assert_eq!(p.image_id("nginx:alpine"), p.image_id("nginx:stable-alpine"));
        assert_eq!(p.image_id("nginx:1.27"), image_id("nginx:1.27"));
        assert!(
            ImageProfiles::default()
                .with_digest("nginx:alpine", "sha256:xyz")
                .is_err()
        );
        assert!(ImageProfiles::default().with_digest("", &d).is_err());
    }

    #[test]
    fn globs_and_profiles() {
        assert!(glob_match("nginx:*", "nginx:1.21"));
        assert!(glob_match("*crash*", "docker.io/library/crashy:1"));
        assert!(!glob_match("nginx:*", "redis:1"));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b*c", "ac"));
        let crash = ImageProfile {
            fail: ImageFailure::CrashAfter(Duration::from_secs(3)),
            ..Default::default()
        };
        let p = ImageProfiles::default().with("docker.io/library/crashy:*", crash);
        assert_eq!(p.lookup("crashy:1"), crash);
        assert_eq!(p.lookup("nginx:1"), ImageProfile::default());
    }
}
