//! CEL rules on the update strategy: type, pod update policy, partition, maxUnavailable/maxSurge, priority,
//! scatter and image pre-download.

use super::super::msg;
use super::{REPLICAS, Rule, Version, int_or_percent, r, scaled_cmp};

/// The update strategy, whose rolling parameters sit under `updateStrategy` in v1alpha1 and under
/// `updateStrategy.rollingUpdate` in v1beta1.
pub(super) fn update_strategy_rules(version: Version) -> Vec<Rule> {
    let beta = version == Version::V1beta1;
    // Schema path (relative to spec) and CEL expression of the object holding the rolling parameters.
    let (rp, us, us_has) = if beta {
        (
            "updateStrategy.rollingUpdate",
            "self.updateStrategy.rollingUpdate",
            "has(self.updateStrategy) && has(self.updateStrategy.rollingUpdate)",
        )
    } else {
        (
            "updateStrategy",
            "self.updateStrategy",
            "has(self.updateStrategy)",
        )
    };
    let has_us = |f: &str| format!("{us_has} && has({us}.{f})");
    let mut out = Vec::new();
    if beta {
        out.push(r(
            "updateStrategy.type",
            "self in ['', 'RollingUpdate', 'OnDelete']",
            msg::BAD_TYPE_V1BETA1,
        ));
        out.extend(legacy_spelling_rules());
        out.push(r(
            "updateStrategy.rollingUpdate.podUpdatePolicy",
            "self in ['', 'ReCreate', 'InPlaceIfPossible', 'InPlaceOnly']",
            msg::BAD_POD_UPDATE_POLICY,
        ));
        let ips = "updateStrategy.rollingUpdate.inPlaceUpdateStrategy";
        out.extend([
            r(
                format!("{ips}.imagePreDownloadParallelism"),
                "type(self) == int || !self.endsWith('%')",
                msg::PARALLELISM_PERCENT,
            ),
            r(
                format!("{ips}.imagePreDownloadParallelism"),
                "type(self) == int || self.endsWith('%') || self.matches('^[-+]?[0-9]+$')",
                "imagePreDownloadParallelism must be a valid integer",
            ),
            r(
                format!("{ips}.imagePreDownloadParallelism"),
                "type(self) == int ? self >= 0 : !self.matches('^-[0-9]+$')",
                msg::PARALLELISM_NEGATIVE,
            ),
            r(
                format!("{ips}.imagePreDownloadTimeoutSeconds"),
                "self >= 0",
                msg::NONNEGATIVE,
            ),
            r(
                format!("{ips}.imagePreDownloadMinUpdatedReadyPods"),
                "self >= 0",
                msg::NONNEGATIVE,
            ),
        ]);
    } else {
        out.push(r(
            "updateStrategy.type",
            "self in ['', 'ReCreate', 'InPlaceIfPossible', 'InPlaceOnly']",
            msg::BAD_TYPE,
        ));
    }
    out.extend(int_or_percent(&format!("{rp}.partition"), "partition", true));
    out.extend(int_or_percent(
        &format!("{rp}.maxUnavailable"),
        "maxUnavailable",
        true,
    ));
    out.extend(int_or_percent(&format!("{rp}.maxSurge"), "maxSurge", true));
    let (policy, surge_msg) = if beta {
        ("podUpdatePolicy", msg::INPLACEONLY_SURGE_V1BETA1)
    } else {
        ("type", msg::INPLACEONLY_SURGE)
    };
    out.push(
        r(
            "",
            format!(
                "!({us_has} && has({us}.{policy}) && {us}.{policy} == 'InPlaceOnly' && {} && {})",
                has_us("maxSurge"),
                scaled_cmp(&format!("{us}.maxSurge"), ">", false)
            ),
            surge_msg,
        )
        .at(format!(".{rp}.maxSurge")),
    );
    out.push(
        r(
            "",
            format!(
                "{REPLICAS} <= 0 || !({us_has}) || !(({mu_has} ? {mu_lt1} : false) && ({ms_has} ? {ms_lt1} : true))",
                mu_has = has_us("maxUnavailable"),
                mu_lt1 = scaled_cmp(&format!("{us}.maxUnavailable"), "<", true),
                ms_has = has_us("maxSurge"),
                ms_lt1 = scaled_cmp(&format!("{us}.maxSurge"), "<", true),
            ),
            msg::MU_MS_LT1,
        )
        .at(format!(".{rp}.maxUnavailable")),
    );
    let ps = format!("{rp}.priorityStrategy");
    let ps = ps.as_str();
    out.extend([
        r(
            ps,
            "!(has(self.weightPriority) && size(self.weightPriority) > 0 && has(self.orderPriority) && size(self.orderPriority) > 0)",
            msg::ONLY_ONE_PRIORITY,
        )
        .required(),
        r(
            ps,
            "!has(self.weightPriority) || self.weightPriority.all(w, w.weight >= 0 && w.weight <= 100)",
            msg::WEIGHT_RANGE,
        )
        .required(),
        r(
            ps,
            "!has(self.weightPriority) || self.weightPriority.all(w, (has(w.matchSelector.matchLabels) && size(w.matchSelector.matchLabels) > 0) || (has(w.matchSelector.matchExpressions) && size(w.matchSelector.matchExpressions) > 0))",
            msg::SELECTOR_CAN_NOT_BE_EMPTY,
        )
        .required(),
        r(
            ps,
            "!has(self.weightPriority) || self.weightPriority.all(w, !has(w.matchSelector.matchExpressions) || w.matchSelector.matchExpressions.all(e, \
             e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : \
             e.operator in ['Exists', 'DoesNotExist'] ? (!has(e.values) || size(e.values) == 0) : false))",
            "invalid selector: each matchExpressions entry needs operator In or NotIn with values, or Exists or DoesNotExist without values",
        )
        .required(),
        r(
            ps,
            "!has(self.orderPriority) || self.orderPriority.all(o, size(o.orderedKey) > 0)",
            msg::ORDER_KEY_EMPTY,
        )
        .required(),
    ]);
    out.extend([
        r(
            format!("{rp}.scatterStrategy"),
            "self.all(t, size(t.key) > 0)",
            msg::SCATTER_KEY_EMPTY,
        )
        .required(),
        r(
            format!("{rp}.scatterStrategy"),
            "self.all(t, self.exists_one(u, u.key == t.key && u.value == t.value))",
            "duplicated key=value term: list each scatter term once",
        )
        .required(),
    ]);

    out
}

/// v1beta1's schema declares v1alpha1's spelling of the rolling-update fields so that the defaulting webhook can
/// move them (`defaults::legacy`); if they are still there at validation, the webhook did not run: refused, so a
/// stored object never keeps them (a paused: true that pauses nothing).
fn legacy_spelling_rules() -> Vec<Rule> {
    crate::defaults::legacy::MOVED_FIELDS
        .iter()
        .copied()
        .chain(["inPlaceUpdateStrategy"])
        .map(|f| {
            r(
                "updateStrategy",
                format!("!has(self.{f})"),
                format!(
                    "is the apps.kruise.io/v1alpha1 spelling of spec.updateStrategy.rollingUpdate.{f}, which insitu's \
                     defaulting webhook moves there, and it did not run (kubectl get mutatingwebhookconfiguration \
                     {}): set spec.updateStrategy.rollingUpdate.{f} instead",
                    crate::keys::MUTATING_CONFIG_NAME
                ),
            )
            .at(format!(".{f}"))
        })
        .collect()
}
