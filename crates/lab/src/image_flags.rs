//! Failing images for the simulated kubelet (`--crash-image`, `--pull-fail-image`, `--exit-image`, `--image-digest`),
//! shared by `insitu nodes` and `insitu up` so the seed's CrashLoopBackOff section can be followed on either.

use std::time::Duration;

use insitu_sim::kubelet::{ImageFailure, ImageProfile, ImageProfiles};

/// Non-negative seconds as a Duration.
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ImageFlags {
    /// Images matching this glob (`*` wildcards; raw or normalized reference) exit with code 1 shortly after
    /// every start → CrashLoopBackOff. Repeatable, or comma-separated in $INSITU_NODES_CRASH_IMAGES.
    #[arg(
        long = "crash-image",
        value_name = "GLOB",
        env = "INSITU_NODES_CRASH_IMAGES",
        value_delimiter = ','
    )]
    pub crash_images: Vec<String>,
    /// Seconds a crashing image runs before it exits (below a readiness probe's initial delay, the pod never
    /// turns Ready, like an application that fails at startup).
    #[arg(long, default_value_t = 0.5)]
    pub crash_after_seconds: f64,
    /// Images matching this glob never pull → ErrImagePull / ImagePullBackOff. Repeatable, or comma-separated in
    /// $INSITU_NODES_PULL_FAIL_IMAGES.
    #[arg(
        long = "pull-fail-image",
        value_name = "GLOB",
        env = "INSITU_NODES_PULL_FAIL_IMAGES",
        value_delimiter = ','
    )]
    pub pull_fail_images: Vec<String>,
    /// Images matching this glob have a default command that exits 0 at once (e.g. busybox's `sh` with no
    /// terminal): a container that sets no `command` is Completed, then CrashLoopBackOff under restartPolicy
    /// Always. Repeatable, or comma-separated in $INSITU_NODES_EXIT_IMAGES.
    #[arg(
        long = "exit-image",
        value_name = "GLOB",
        env = "INSITU_NODES_EXIT_IMAGES",
        value_delimiter = ','
    )]
    pub exit_images: Vec<String>,
    /// The registry's digest of a tag, `REF=sha256:<64 hex>` (repeatable): the kubelet reports it as the
    /// container's imageID, so two tags of one digest report the same imageID (an image re-tagged).
    #[arg(long = "image-digest", value_name = "REF=DIGEST")]
    pub image_digests: Vec<String>,
}

impl ImageFlags {
    /// `base` with a rule per failing glob (on top of its default profile) and the registry digests; a
    /// malformed `--image-digest` is an error naming it.
    pub fn profiles(&self, mut profiles: ImageProfiles) -> anyhow::Result<ImageProfiles> {
        let default = profiles.default;
        for glob in self.crash_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::CrashAfter(secs(self.crash_after_seconds));
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for glob in self.pull_fail_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::NeverPulls;
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for glob in self.exit_images.iter().filter(|g| !g.is_empty()) {
            let fail = ImageFailure::ExitsAtOnce;
            profiles = profiles.with(glob.clone(), ImageProfile { fail, ..default });
        }
        for spec in &self.image_digests {
            let (reference, digest) = spec.split_once('=').ok_or_else(|| {
                anyhow::anyhow!(
                    "--image-digest {spec:?}: expected REF=sha256:<64 hex>, e.g. nginx:alpine=sha256:…"
                )
            })?;
            profiles = profiles
                .with_digest(reference.trim(), digest.trim())
                .map_err(|e| anyhow::anyhow!("--image-digest {spec:?}: {e}"))?;
        }
        Ok(profiles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_adds_its_failure_and_a_bad_digest_is_named() {
        let flags = ImageFlags {
            crash_images: vec!["*:broken".into()],
            crash_after_seconds: 2.0,
            pull_fail_images: vec!["nope/*".into()],
            exit_images: vec!["busybox*".into()],
            ..ImageFlags::default()
        };
        let p = flags.profiles(ImageProfiles::default()).unwrap();
        let fails: Vec<(&str, ImageFailure)> = p.rules.iter().map(|(g, r)| (g.as_str(), r.fail)).collect();
        assert_eq!(
            fails,
            [
                ("*:broken", ImageFailure::CrashAfter(Duration::from_secs(2))),
                ("nope/*", ImageFailure::NeverPulls),
                ("busybox*", ImageFailure::ExitsAtOnce),
            ]
        );
        let bad = ImageFlags {
            image_digests: vec!["nginx:1".into()],
            ..ImageFlags::default()
        };
        let e = bad.profiles(ImageProfiles::default()).unwrap_err().to_string();
        assert!(
            e.contains("--image-digest \"nginx:1\"") && e.contains("REF=sha256"),
            "{e}"
        );
    }
}
