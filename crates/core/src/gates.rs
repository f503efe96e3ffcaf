//! Kruise feature gates that change CloneSet behaviour (research §3.12), with Kruise's defaults.

use std::collections::BTreeMap;

/// Feature gates relevant to the CloneSet planner; all default off, as in Kruise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
}

impl FeatureGates {
    /// Parses `--feature-gates K=V,K2=V2` (Kruise gate names). Unknown gates are an error naming them.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut g = Self::default();
        let mut seen = BTreeMap::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("feature gate {item:?} must be NAME=true|false"))?;
            let v: bool = v
                .trim()
                .parse()
                .map_err(|_| format!("feature gate {k}: value {v:?} must be true or false"))?;
            match k.trim() {
                "CloneSetPartitionRollback" => g.cloneset_partition_rollback = v,
                "PreparingUpdateAsUpdate" => g.preparing_update_as_update = v,
                "CloneSetShortHash" => g.cloneset_short_hash = v,
                "CloneSetScalingExcludePreparingDelete" => g.exclude_preparing_delete = v,
                other => {
                    return Err(format!(
                        "unknown feature gate {other:?}; known: CloneSetPartitionRollback, PreparingUpdateAsUpdate, CloneSetShortHash, CloneSetScalingExcludePreparingDelete"
                    ));
                }
            }
            seen.insert(k.to_string(), v);
        }
        Ok(g)
    }
}
