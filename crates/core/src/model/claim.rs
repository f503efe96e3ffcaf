//! Kruise `claimPods` (refmanager `ClaimOwnedObjects`): which of the pods referencing a CloneSet it manages,
//! and which it releases (selector no longer matches) or adopts (referenced but not controlled, matching).

use insitu_api::CloneSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod's relation to the CloneSet, from its ownerReferences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The CloneSet is the pod's controller.
    Controller,
    /// Another object controls the pod: never ours (Kruise: `controllerRef.UID != owner.UID`).
    Other,
    /// The pod references the CloneSet but has no controller: adoptable when it matches.
    Orphan,
    /// No reference to the CloneSet at all: the snapshot's caller picked it (e.g. `insitu plan` input by
    /// labels); treated as controlled, with nothing to release or adopt.
    Unreferenced,
}

/// The owner check for one CloneSet, prepared once per plan.
pub(crate) struct Claimer<'a> {
    uid: &'a str,
    name: &'a str,
}

impl<'a> Claimer<'a> {
    pub(crate) fn new(cs: &'a CloneSet) -> Self {
        Claimer {
            uid: cs.metadata.uid.as_deref().unwrap_or_default(),
            name: cs.metadata.name.as_deref().unwrap_or_default(),
        }
    }

    fn is_us(&self, uid: &str, kind: &str, name: &str) -> bool {
        if self.uid.is_empty() {
            // A CloneSet without uid (hand-written input): known by kind and name.
            kind == "CloneSet" && name == self.name
        } else {
            uid == self.uid
        }
    }

    /// Kruise `claimObject`'s first question: whose is this pod?
    pub(crate) fn owner(&self, meta: &ObjectMeta) -> Owner {
        let refs = meta.owner_references.as_deref().unwrap_or_default();
        if let Some(c) = refs.iter().find(|r| r.controller == Some(true)) {
            return if self.is_us(&c.uid, &c.kind, &c.name) {
                Owner::Controller
            } else {
                Owner::Other
            };
        }
        if refs.iter().any(|r| self.is_us(&r.uid, &r.kind, &r.name)) {
            Owner::Orphan
        } else {
            Owner::Unreferenced
        }
    }
}

/// What `claimPods` does with one active pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// Managed this round.
    Keep,
    /// Ours but no longer selected: remove our ownerReference (then the garbage collector leaves it alone
    /// when the CloneSet goes).
    Release,
    /// Referenced, not controlled, selected: become its controller; managed this round.
    Adopt,
    /// Not managed, nothing to write.
    Ignore,
}

/// Kruise `claimObject` for a pod: `selected` = the selector matches its labels. A deleting CloneSet
/// releases and adopts nothing; a deleting pod is not adopted.
pub(crate) fn claim(owner: Owner, selected: bool, cs_deleting: bool, pod_deleting: bool) -> Claim {
    match owner {
        Owner::Other => Claim::Ignore,
        Owner::Controller | Owner::Unreferenced if selected => Claim::Keep,
        Owner::Controller if !cs_deleting => Claim::Release,
        Owner::Controller | Owner::Unreferenced => Claim::Ignore,
        Owner::Orphan if selected && !cs_deleting && !pod_deleting => Claim::Adopt,
        Owner::Orphan => Claim::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_follows_kruise_claim_object() {
        use Claim::*;
        use Owner::*;
        // (owner, selected, cs deleting, pod deleting) → claim
        let table = [
            (Controller, true, false, false, Keep),
            (Controller, false, false, false, Release),
            (Controller, false, true, false, Ignore),
            (Controller, true, true, false, Keep),
            (Other, true, false, false, Ignore),
            (Orphan, true, false, false, Adopt),
            (Orphan, false, false, false, Ignore),
            (Orphan, true, true, false, Ignore),
            (Orphan, true, false, true, Ignore),
            (Unreferenced, true, false, false, Keep),
            (Unreferenced, false, false, false, Ignore),
        ];
        for (o, sel, csd, pd, want) in table {
            assert_eq!(
                claim(o, sel, csd, pd),
                want,
                "{o:?} selected={sel} csDeleting={csd} podDeleting={pd}"
            );
        }
    }
}
