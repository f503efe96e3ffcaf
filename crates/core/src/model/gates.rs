//! Kruise feature gates that change CloneSet behaviour (`pkg/features/kruise_features.go`), with Kruise's
//! defaults.

use std::collections::BTreeMap;

/// Feature gates relevant to the CloneSet planner; Kruise's defaults, except `InPlaceWorkloadVerticalScaling`
/// (alpha, off in Kruise), which insitu turns on: resizing in place is what real Kubernetes allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    /// Allow moving pods back to the current revision when partition grows. Kruise default: off.
    pub cloneset_partition_rollback: bool,
    /// PreparingUpdate pods count as updated when scaling. Kruise default: off.
    pub preparing_update_as_update: bool,
    /// Revision label holds only the hash. Kruise default: off.
    pub cloneset_short_hash: bool,
    /// Exclude PreparingDelete pods when counting replicas for scale (flag
    /// `--cloneset-scaling-exclude-preparing-delete`). Kruise default: false.
    pub exclude_preparing_delete: bool,
    /// `RecreatePodWhenChangeVCTInCloneSetGate`: a pod whose revision's volumeClaimTemplates hash differs
    /// from the target's is recreated instead of updated in place (not under InPlaceOnly). Kruise default: off.
    pub recreate_pod_when_change_vct: bool,
    /// cpu/memory changes resize pods in place through `pods/resize` (Kruise
    /// `pkg/util/inplaceupdate/inplace_update_vertical.go`). insitu default: on.
    pub in_place_workload_vertical_scaling: bool,
    /// `PreDownloadImageForInPlaceUpdate`: ImagePullJobs for an in-place update's new images (Kruise
    /// `pkg/controller/cloneset/cloneset_predownload_image.go`, `createImagePullJobsForInPlaceUpdate`).
    /// Kruise default: off (Alpha); it also needs `KruiseDaemon`.
    pub pre_download_image_for_in_place_update: bool,
    /// `KruiseDaemon`: node agents run (image pulls, container restarts). Kruise default: on (Beta); off, it
    /// turns pre-download off too.
    pub kruise_daemon: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        Self {
            cloneset_partition_rollback: false,
            preparing_update_as_update: false,
            cloneset_short_hash: false,
            exclude_preparing_delete: false,
            recreate_pod_when_change_vct: false,
            in_place_workload_vertical_scaling: true,
            pre_download_image_for_in_place_update: false,
            kruise_daemon: true,
        }
    }
}

/// Kruise's release stage of a gate: `AllAlpha=true` / `AllBeta=true` switch on every gate of that stage that is
/// not set explicitly (k8s component-base featuregate semantics, which Kruise uses; its e2e CI installs the
/// manager with `--feature-gates=AllAlpha=true,AllBeta=true`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
    /// Not a Kruise feature gate (a Kruise flag insitu accepts as a gate): `AllAlpha`/`AllBeta` leave it alone.
    Flag,
}

/// The gates insitu knows: Kruise name, stage and default (pkg/features/kruise_features.go).
const GATES: &[(&str, Stage, bool)] = &[
    ("CloneSetPartitionRollback", Stage::Alpha, false),
    ("PreparingUpdateAsUpdate", Stage::Alpha, false),
    ("CloneSetShortHash", Stage::Alpha, false),
    ("CloneSetScalingExcludePreparingDelete", Stage::Flag, false),
    ("RecreatePodWhenChangeVCTInCloneSetGate", Stage::Alpha, false),
    // Alpha in Kruise (default off there); on by default in insitu. `AllAlpha=false` turns it off.
    ("InPlaceWorkloadVerticalScaling", Stage::Alpha, true),
    ("PreDownloadImageForInPlaceUpdate", Stage::Alpha, false),
    ("KruiseDaemon", Stage::Beta, true),
];

/// The pseudo-gates of component-base that set every gate of a stage.
const ALL_ALPHA: &str = "AllAlpha";
const ALL_BETA: &str = "AllBeta";

impl FeatureGates {
    /// Parses `--feature-gates K=V,K2=V2` (Kruise gate names, plus `AllAlpha`/`AllBeta`). Unknown gates are an
    /// error naming them. As in component-base, an explicit `K=V` wins over `AllAlpha`/`AllBeta` whatever the order.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut explicit = BTreeMap::new();
        let (mut all_alpha, mut all_beta) = (None, None);
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("feature gate {item:?} must be NAME=true|false"))?;
            let k = k.trim();
            let v: bool = v
                .trim()
                .parse()
                .map_err(|_| format!("feature gate {k}: value {v:?} must be true or false"))?;
            match k {
                ALL_ALPHA => all_alpha = Some(v),
                ALL_BETA => all_beta = Some(v),
                _ if GATES.iter().any(|(name, ..)| *name == k) => {
                    explicit.insert(k, v);
                }
                other => {
                    let known: Vec<&str> = GATES
                        .iter()
                        .map(|(n, ..)| *n)
                        .chain([ALL_ALPHA, ALL_BETA])
                        .collect();
                    return Err(format!(
                        "unknown feature gate {other:?}; known: {}",
                        known.join(", ")
                    ));
                }
            }
        }
        let mut g = Self::default();
        for &(name, stage, default) in GATES {
            let bulk = match stage {
                Stage::Alpha => all_alpha,
                Stage::Beta => all_beta,
                Stage::Flag => None,
            };
            let on = explicit.get(name).copied().or(bulk).unwrap_or(default);
            g.set(name, on);
        }
        // Kruise SetDefaultFeatureGates: without kruise-daemon nothing would pull, so pre-download is off too.
        if !g.kruise_daemon {
            g.pre_download_image_for_in_place_update = false;
        }
        Ok(g)
    }

    /// Sets one known gate by its Kruise name (names come from `GATES`).
    fn set(&mut self, name: &str, on: bool) {
        match name {
            "CloneSetPartitionRollback" => self.cloneset_partition_rollback = on,
            "PreparingUpdateAsUpdate" => self.preparing_update_as_update = on,
            "CloneSetShortHash" => self.cloneset_short_hash = on,
            "CloneSetScalingExcludePreparingDelete" => self.exclude_preparing_delete = on,
            "RecreatePodWhenChangeVCTInCloneSetGate" => self.recreate_pod_when_change_vct = on,
            "InPlaceWorkloadVerticalScaling" => self.in_place_workload_vertical_scaling = on,
            "PreDownloadImageForInPlaceUpdate" => self.pre_download_image_for_in_place_update = on,
            "KruiseDaemon" => self.kruise_daemon = on,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_alpha_sets_every_alpha_gate_but_not_flags() {
        let g = FeatureGates::parse("AllAlpha=true,AllBeta=true").unwrap();
        assert!(g.cloneset_partition_rollback && g.preparing_update_as_update && g.cloneset_short_hash);
        assert!(g.recreate_pod_when_change_vct);
        assert!(!g.exclude_preparing_delete, "a Kruise flag is no alpha gate");
        assert!(g.in_place_workload_vertical_scaling);
        assert!(
            FeatureGates::default().in_place_workload_vertical_scaling,
            "on by default here"
        );
        let off = FeatureGates::parse("InPlaceWorkloadVerticalScaling=false").unwrap();
        assert!(!off.in_place_workload_vertical_scaling);
        assert!(g.pre_download_image_for_in_place_update && g.kruise_daemon);
        assert!(
            !FeatureGates::default().pre_download_image_for_in_place_update,
            "Alpha: off by default"
        );
    }

    #[test]
    fn kruise_daemon_off_turns_pre_download_off() {
        let g = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true,KruiseDaemon=false").unwrap();
        assert!(!g.pre_download_image_for_in_place_update && !g.kruise_daemon);
        let g = FeatureGates::parse("AllAlpha=true,AllBeta=false").unwrap();
        assert!(
            !g.pre_download_image_for_in_place_update,
            "AllBeta=false switches KruiseDaemon off"
        );
    }

    #[test]
    fn explicit_gate_wins_over_all_alpha_in_any_order() {
        for spec in [
            "AllAlpha=true,CloneSetShortHash=false",
            "CloneSetShortHash=false,AllAlpha=true",
        ] {
            let g = FeatureGates::parse(spec).unwrap();
            assert!(!g.cloneset_short_hash, "{spec}");
            assert!(g.cloneset_partition_rollback, "{spec}");
        }
        let g = FeatureGates::parse("AllAlpha=false,CloneSetShortHash=true").unwrap();
        assert!(g.cloneset_short_hash && !g.cloneset_partition_rollback);
    }

    #[test]
    fn empty_is_kruise_defaults_and_unknown_names_are_errors() {
        assert_eq!(FeatureGates::parse("").unwrap(), FeatureGates::default());
        let e = FeatureGates::parse("AllGA=true").unwrap_err();
        assert!(e.contains("\"AllGA\"") && e.contains("AllAlpha"), "{e}");
        let e = FeatureGates::parse("AllAlpha=yes").unwrap_err();
        assert!(e.contains("AllAlpha") && e.contains("true or false"), "{e}");
    }
}
