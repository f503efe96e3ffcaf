//! What one pod write costs in JSON alone: each pass a pod's JSON goes through in the embedded cluster, timed on
//! one pod of the seed's CloneSet after an in-place update (`fixtures/seed-pod-after-inplace.json`, as the
//! embedded apiserver served it).
//!
//! `cargo run --release -p insitu-sim --example json_passes`. The figures bound the simulator from below: every
//! write the kubelets and the controller make goes through the writer's encode, the apiserver's parse, its
//! strict check, its read of the stored object, its encode of the new one, and one decode per watcher that
//! receives it; `docs/benchmarks.md` ("The embedded cluster's speed and its floor") multiplies them by a
//! rollout's writes.

use std::hint::black_box;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use kube::core::PartialObjectMeta;
use serde::Deserialize;
use serde_json::Value;

const POD: &str = include_str!("fixtures/seed-pod-after-inplace.json");
const ROUNDS: u32 = 20_000;

/// Mean microseconds of `f` over `ROUNDS` runs (after 1,000 to warm up).
fn time(f: &mut dyn FnMut()) -> f64 {
    for _ in 0..1_000 {
        f();
    }
    let start = Instant::now();
    for _ in 0..ROUNDS {
        f();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS)
}

fn main() {
    let pod: Pod = serde_json::from_str(POD).expect("the fixture is a Pod");
    let wire = serde_json::to_vec(&pod).expect("a Pod encodes");
    let value: Value = serde_json::from_slice(&wire).expect("JSON");
    let stored = lz4_flex::compress_prepend_size(&wire);
    println!(
        "one pod, {} bytes of JSON ({} compressed)\n",
        wire.len(),
        stored.len()
    );

    let passes: [(&str, &mut dyn FnMut()); 7] = [
        ("writer: encode the Pod", &mut || {
            black_box(serde_json::to_vec(black_box(&pod)).ok());
        }),
        ("apiserver: parse the request", &mut || {
            black_box(serde_json::from_slice::<Value>(black_box(&wire)).ok());
        }),
        ("apiserver: strict decode (unknown fields)", &mut || {
            black_box(Pod::deserialize(black_box(&value)).ok());
        }),
        ("apiserver: read the stored object", &mut || {
            let bytes = lz4_flex::decompress_size_prepended(black_box(&stored)).unwrap_or_default();
            black_box(serde_json::from_slice::<Value>(&bytes).ok());
        }),
        ("apiserver: encode and store the new one", &mut || {
            let bytes = serde_json::to_vec(black_box(&value)).unwrap_or_default();
            black_box(lz4_flex::compress_prepend_size(&bytes));
        }),
        ("watcher: decode the Pod (controller, kubelet)", &mut || {
            black_box(serde_json::from_slice::<Pod>(black_box(&wire)).ok());
        }),
        ("watcher: decode its metadata (GC)", &mut || {
            black_box(serde_json::from_slice::<PartialObjectMeta<Pod>>(black_box(&wire)).ok());
        }),
    ];
    let mut total = 0.0;
    for (i, (name, f)) in passes.into_iter().enumerate() {
        let us = time(f);
        // The watcher's full decode counts twice: the controller's and the node's kubelet's.
        total += if i == 5 { 2.0 * us } else { us };
        println!("  {name:<48} {us:6.1} µs");
    }
    println!("\none pod write, all of the above (two full decodes): {total:.1} µs of JSON");
}
