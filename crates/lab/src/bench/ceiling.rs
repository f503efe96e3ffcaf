//! `insitu bench ceiling`: the apiserver's own write ceiling for an in-place rollout's request mix, measured.
//!
//! A controller can roll pods out no faster than the apiserver accepts its writes. This writer issues, for
//! every pod of a selector, the three writes insitu's executor makes per in-place update (Kruise's order:
//! `PUT pods/status` with `InPlaceUpdateReady=False`, `PUT pods` with the new template fields, `PUT pods/status`
//! with `InPlaceUpdateReady=True`), each from the object the previous write returned (no GET), with `--concurrency`
//! pods in flight and no controller logic or waiting between them. The pod write changes an annotation, not the
//! image, so no kubelet work follows: what is measured is the apiserver (and etcd) alone. Pods/s here is the
//! bound a controller issuing that mix can approach on this apiserver.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::Api;
use kube::api::{ListParams, PostParams};

#[derive(clap::Args, Debug, Clone)]
pub struct CeilingArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Namespace of the pods.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Label selector of the pods to write (e.g. `app=web`); every pod it selects gets the three writes.
    #[arg(long, short = 'l')]
    pub selector: String,
    /// Pods whose writes are in flight at once (insitu's executor: 64).
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

const CONDITION: &str = "InPlaceUpdateReady";
const ANNOTATION: &str = "bench.insitu.dev/ceiling";

/// Sets the `InPlaceUpdateReady` condition (replacing one there), as the executor's status writes do.
fn set_condition(pod: &mut Pod, status: &str) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != CONDITION);
    conditions.push(PodCondition {
        type_: CONDITION.into(),
        status: status.into(),
        reason: (status == "False").then(|| "StartInPlaceUpdate".into()),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        )),
        ..Default::default()
    });
}

#[derive(Default)]
struct Counts {
    writes: AtomicU64,
    conflicts: AtomicU64,
    failed_pods: AtomicU64,
}

/// One write with Kruise's RetryOnConflict: on 409 the pod is read again and the change re-applied.
async fn write(
    api: &Api<Pod>,
    mut pod: Pod,
    status: bool,
    change: &(dyn Fn(&mut Pod) + Sync),
    counts: &Counts,
) -> Result<Pod, kube::Error> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    for attempt in 0..6 {
        change(&mut pod);
        counts.writes.fetch_add(1, Ordering::Relaxed);
        let res = if status {
            api.replace_status(&name, &PostParams::default(), &pod).await
        } else {
            api.replace(&name, &PostParams::default(), &pod).await
        };
        match res {
            Ok(p) => return Ok(p),
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => {
                counts.conflicts.fetch_add(1, Ordering::Relaxed);
                pod = api.get(&name).await?;
            }
            Err(e) => return Err(e),
        }
    }
    unreachable!("the last attempt returns")
}

async fn one_pod(api: &Api<Pod>, pod: Pod, round: &str, counts: &Counts) -> Result<(), kube::Error> {
    let pod = write(api, pod, true, &|p| set_condition(p, "False"), counts).await?;
    let pod = write(
        api,
        pod,
        false,
        &|p| {
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION.into(), round.into());
        },
        counts,
    )
    .await?;
    write(api, pod, true, &|p| set_condition(p, "True"), counts).await?;
    Ok(())
}

pub fn main(args: CeilingArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let client = insitu_controller::client::from_kubeconfig(args.kubeconfig.as_deref(), "ceiling").await?;
        let api: Api<Pod> = Api::namespaced(client, &args.namespace);
        let pods = api
            .list(&ListParams::default().labels(&args.selector))
            .await
            .with_context(|| format!("listing pods {} in {}", args.selector, args.namespace))?
            .items;
        anyhow::ensure!(!pods.is_empty(), "no pod matches --selector {:?}", args.selector);
        let n = pods.len();
        let round = format!("{}", k8s_openapi::jiff::Timestamp::now().as_millisecond());
        let counts = Arc::new(Counts::default());
        let started = Instant::now();
        let concurrency = args.concurrency.max(1);
        futures::stream::iter(pods)
            .for_each_concurrent(concurrency, |pod| {
                let (api, counts, round) = (api.clone(), counts.clone(), round.clone());
                async move {
                    if let Err(e) = one_pod(&api, pod, &round, &counts).await {
                        counts.failed_pods.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(error = %e, "pod writes failed");
                    }
                }
            })
            .await;
        let secs = started.elapsed().as_secs_f64();
        let writes = counts.writes.load(Ordering::Relaxed);
        let conflicts = counts.conflicts.load(Ordering::Relaxed);
        let failed = counts.failed_pods.load(Ordering::Relaxed);
        let pods_per_s = n as f64 / secs;
        let writes_per_s = writes as f64 / secs;
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "pods": n, "concurrency": concurrency, "seconds": secs, "pods_per_s": pods_per_s,
                    "writes": writes, "writes_per_s": writes_per_s, "conflicts": conflicts, "failed_pods": failed,
                })
            );
        } else {
            println!(
                "apiserver write ceiling: {n} pods x 3 writes (PUT pods/status, PUT pods, PUT pods/status), {concurrency} pods in flight: \
                 {secs:.1} s, {pods_per_s:.0} pods/s, {writes_per_s:.0} writes/s, {conflicts} conflicts, {failed} pods failed"
            );
        }
        Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
    })
}
