//! Size limits as a real control plane has them, so a client never gets the simulated cluster to hold (or
//! build) what a real one refuses, and nothing can grow the process without bound: kube-apiserver's request
//! body limit (`MaxRequestBodyBytes`, 3 MiB), etcd's request limit (`--max-request-bytes`, 1.5 MiB, on the
//! stored object), and JSON patch's operation count (10,000) and accumulated `copy` growth (3 MiB).

use serde_json::Value;

use super::errors::ApiError;

/// kube-apiserver's default `MaxRequestBodyBytes`.
pub const REQUEST_BODY_LIMIT: usize = 3 * 1024 * 1024;
/// etcd's default `--max-request-bytes` (the stored object must fit in one request).
pub const OBJECT_LIMIT: usize = 1536 * 1024;
/// `maxJSONPatchOperations`.
pub const JSON_PATCH_MAX_OPS: usize = 10_000;
/// `JSONPatchMaxCopyBytes` (json-patch's `AccumulatedCopySizeLimit`).
pub const JSON_PATCH_MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The 413 for a body over the limit.
pub fn body_too_large() -> ApiError {
    ApiError::new(
        413,
        "RequestEntityTooLarge",
        format!("Request entity too large: limit is {REQUEST_BODY_LIMIT}"),
    )
}

/// Refuses an object etcd would refuse. `bound` is an upper bound of its size known without serializing it
/// (the old object's plus the request's bytes); only objects that may be near the limit are serialized.
pub fn check_object(obj: &Value, bound: usize) -> Result<(), ApiError> {
    // What the server adds to a request's object (uid, timestamps, defaults) stays well under this.
    const SERVER_ADDED: usize = 64 * 1024;
    if bound + SERVER_ADDED <= OBJECT_LIMIT {
        return Ok(());
    }
    let size = serde_json::to_vec(obj).map(|b| b.len()).unwrap_or(usize::MAX);
    if size > OBJECT_LIMIT {
        // What kube-apiserver passes on from etcd (`etcdserver: request is too large`): a 500 without a reason, as
        // `ErrorToAPIStatus` renders an error that is no Status (observed on v1.37.2). Past etcd's gRPC limit
        // (2 MiB) kube answers the client library's `trying to send message larger than max (N vs. 2097152)`
        // instead, with N the encoded request's size, which this answer does not reproduce.
        return Err(ApiError::new(500, "", "etcdserver: request is too large"));
    }
    Ok(())
}

/// Applies a JSON patch with kube-apiserver's limits, op by op so that `copy` growth is counted as it happens
/// (a 1 KB patch of copies cannot build a 64 MiB object). Atomic: `doc` is only replaced on success.
/// Returns the bytes the copies added.
pub fn apply_json_patch(doc: &mut Value, ops: &[json_patch::PatchOperation]) -> Result<usize, ApiError> {
    if ops.len() > JSON_PATCH_MAX_OPS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {JSON_PATCH_MAX_OPS}, got {}",
                ops.len()
            ),
        ));
    }
    let mut work = doc.clone();
    let mut copied = 0usize;
    for op in ops {
        if let json_patch::PatchOperation::Copy(c) = op {
            let size = work
                .pointer(c.from.as_str())
                .map(|v| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0))
                .unwrap_or(0);
            copied += size;
            if copied > JSON_PATCH_MAX_COPY_BYTES {
                tracing::debug!(copied, "json patch copy limit");
                return Err(rejected());
            }
        }
        json_patch::patch(&mut work, std::slice::from_ref(op)).map_err(|e| {
            tracing::debug!(error = %e, "json patch failed");
            rejected()
        })?;
    }
    *doc = work;
    Ok(copied)
}

/// kube-apiserver answers any failure to apply a JSON patch (a failed `test`, a missing path, the copy limit)
/// with `NewGenericServerResponse(422, ...)`, whose message is this fixed text (the patch library's error is not
/// passed on).
pub(super) fn rejected() -> ApiError {
    ApiError {
        details: Some(serde_json::json!({})),
        ..ApiError::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
    }
}

/// Refuses a JSON patch's result nesting past [`MAX_DEPTH`] (its paths can add depth its body does not have)
/// as kube-apiserver does: the patch library fails on it, answered as any failure to apply a JSON patch (422,
/// `the server rejected our request due to an error in our request`).
pub(super) fn check_patched(obj: &serde_json::Value) -> Result<(), ApiError> {
    if crate::deep::value_nesting(obj) > crate::deep::MAX_DEPTH {
        return Err(rejected());
    }
    Ok(())
}
