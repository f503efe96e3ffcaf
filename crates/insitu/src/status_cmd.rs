//! `insitu status cloneset/NAME [-w]`: the seed's monitor in one command, redrawn on watch events.
//!
//! Exit codes as `kubectl rollout status`: with `-w`, 0 once the rollout completes, 1 when it fails
//! (progress deadline exceeded, failed update) or `--timeout` passes; without `-w`, one frame and 0
//! (1 if the rollout has already failed).

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use futures::{StreamExt, stream};
use insitu_api::CloneSet;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

use crate::rollout_view::{self, Verdict};
use crate::target::{self, ClusterArgs};

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The CloneSet: `cloneset/NAME`.
    #[arg(required = true, num_args = 1..=2)]
    pub object: Vec<String>,
    /// Watch: redraw on every change of the CloneSet or its pods until the rollout completes or fails.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// With -w: give up (exit 1) after this many seconds; 0 waits forever.
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// How the rollout watch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed(String),
    /// Without -w: the rollout is still going.
    InProgress,
}

impl Outcome {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Outcome::Done | Outcome::InProgress => ExitCode::SUCCESS,
            Outcome::Failed(_) => ExitCode::from(1),
        }
    }
}

/// What the command knows: the CloneSet and its pods, as the watches last reported them.
struct View {
    cs: Option<CloneSet>,
    pods: BTreeMap<String, Pod>,
    /// Creation time of the update revision (`status.updateRevision`), and which revision it was read for.
    since: Option<(String, Option<Timestamp>)>,
}

impl View {
    fn pods_of(&self, cs: &CloneSet) -> Vec<&Pod> {
        self.pods
            .values()
            .filter(|p| rollout_view::owned(cs, p))
            .collect()
    }
}

/// The label selector of the CloneSet's pods, for the pod watch.
fn selector(cs: &CloneSet) -> String {
    if let Some(s) = cs
        .status
        .as_ref()
        .map(|s| &s.label_selector)
        .filter(|s| !s.is_empty())
    {
        return s.clone();
    }
    cs.spec
        .selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// When the update revision was created (its ControllerRevision), re-read only when it changes.
async fn refresh_since(revisions: &Api<ControllerRevision>, view: &mut View) {
    let Some(update) = view
        .cs
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .map(|s| s.update_revision.clone())
        .filter(|r| !r.is_empty())
    else {
        return;
    };
    if view.since.as_ref().is_some_and(|(r, _)| *r == update) {
        return;
    }
    let created = match revisions.get_opt(&update).await {
        Ok(Some(r)) => r.metadata.creation_timestamp.map(|t| t.0),
        _ => None,
    };
    view.since = Some((update, created));
}

/// Frames to stdout: a terminal gets the screen cleared before each; a pipe gets frames separated by a
/// blank line, each only when it differs from the previous one, and no escape sequences.
pub struct Screen {
    tty: bool,
    last: String,
}

impl Screen {
    pub fn stdout() -> Self {
        Screen {
            tty: std::io::stdout().is_terminal(),
            last: String::new(),
        }
    }

    /// Plain frames (no escape sequences), whatever stdout is: for tests and pipes.
    pub fn plain() -> Self {
        Screen {
            tty: false,
            last: String::new(),
        }
    }

    fn show(&mut self, frame: String, out: &mut (dyn FnMut(&str) + Send)) {
        if frame == self.last {
            return;
        }
        if self.tty {
            out(&format!("\x1b[H\x1b[2J{frame}"));
        } else {
            if !self.last.is_empty() {
                out("\n");
            }
            out(&frame);
        }
        self.last = frame;
    }
}

/// Apply one watcher event to the map of objects (relists replace it whole at InitDone).
fn apply<K: kube::Resource + Clone>(
    map: &mut BTreeMap<String, K>,
    pending: &mut Option<BTreeMap<String, K>>,
    ev: Event<K>,
) -> bool {
    match ev {
        Event::Apply(o) => {
            map.insert(o.name_any(), o);
            true
        }
        Event::Delete(o) => {
            map.remove(&o.name_any());
            true
        }
        Event::Init => {
            *pending = Some(BTreeMap::new());
            false
        }
        Event::InitApply(o) => {
            pending.get_or_insert_with(BTreeMap::new).insert(o.name_any(), o);
            false
        }
        Event::InitDone => {
            *map = pending.take().unwrap_or_default();
            true
        }
    }
}

enum Change {
    CloneSet(Box<Event<CloneSet>>),
    Pod(Box<Event<Pod>>),
}

/// Shows the rollout once (`watch` false) or until it ends, writing frames through `out`.
pub async fn run(
    client: kube::Client,
    namespace: &str,
    name: &str,
    watch: bool,
    out: &mut (dyn FnMut(&str) + Send),
    screen: &mut Screen,
) -> anyhow::Result<Outcome> {
    let clonesets: Api<CloneSet> = Api::namespaced(client.clone(), namespace);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let revisions: Api<ControllerRevision> = Api::namespaced(client, namespace);
    let cs = clonesets
        .get(name)
        .await
        .with_context(|| format!("getting {} in namespace {namespace}", target::display(name)))?;
    let sel = selector(&cs);
    let mut view = View {
        cs: Some(cs),
        pods: BTreeMap::new(),
        since: None,
    };
    if !watch {
        let pods = pods_api.list(&ListParams::default().labels(&sel)).await?;
        view.pods = pods.items.into_iter().map(|p| (p.name_any(), p)).collect();
        refresh_since(&revisions, &mut view).await;
        let outcome = draw(&view, screen, out);
        return Ok(match outcome {
            Some(o) => o,
            None => Outcome::InProgress,
        });
    }
    let cs_events = watcher(
        clonesets,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .map(|e| e.map(|ev| Change::CloneSet(Box::new(ev))));
    let pod_events = watcher(pods_api, watcher::Config::default().labels(&sel))
        .map(|e| e.map(|ev| Change::Pod(Box::new(ev))));
    let mut events = stream::select(cs_events.boxed(), pod_events.boxed());
    let (mut cs_map, mut cs_pending) = (BTreeMap::new(), None);
    let mut pod_pending = None;
    let (mut cs_synced, mut pods_synced) = (false, false);
    while let Some(ev) = events.next().await {
        let changed = match ev {
            Ok(Change::CloneSet(e)) => {
                let e = *e;
                cs_synced |= matches!(e, Event::InitDone);
                let c = apply(&mut cs_map, &mut cs_pending, e);
                if c {
                    match cs_map.remove(name) {
                        Some(cs) => view.cs = Some(cs),
                        None => anyhow::bail!("{} was deleted", target::display(name)),
                    }
                }
                c
            }
            Ok(Change::Pod(e)) => {
                let e = *e;
                pods_synced |= matches!(e, Event::InitDone);
                apply(&mut view.pods, &mut pod_pending, e)
            }
            // The watcher retries on its own (with backoff); say why the picture may be stale.
            Err(e) => {
                tracing::warn!(error = %e, "watch failed, retrying");
                false
            }
        };
        if changed && cs_synced && pods_synced {
            refresh_since(&revisions, &mut view).await;
            if let Some(outcome) = draw(&view, screen, out) {
                return Ok(outcome);
            }
        }
    }
    anyhow::bail!("the watch of {} ended", target::display(name))
}

fn watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).default_backoff()
}

/// Draws a frame; `Some` when the rollout has ended.
fn draw(view: &View, screen: &mut Screen, out: &mut (dyn FnMut(&str) + Send)) -> Option<Outcome> {
    let cs = view.cs.as_ref()?;
    let since = view.since.as_ref().and_then(|(_, t)| *t);
    let verdict = rollout_view::verdict(cs, since);
    let pods = view.pods_of(cs);
    screen.show(rollout_view::frame(cs, &pods, &verdict), out);
    match verdict {
        Verdict::Done(_) => Some(Outcome::Done),
        Verdict::Failed(m) => Some(Outcome::Failed(m)),
        Verdict::Waiting(_) => None,
    }
}

pub fn main(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let name = target::cloneset_name(&args.object)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (client, namespace) = target::connect(&args.cluster, "status").await?;
        let mut screen = Screen::stdout();
        let mut print = |s: &str| {
            use std::io::Write as _;
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(s.as_bytes());
            let _ = o.flush();
        };
        let work = run(client, &namespace, &name, args.watch, &mut print, &mut screen);
        let outcome = if args.watch && args.timeout > 0 {
            match tokio::time::timeout(Duration::from_secs(args.timeout), work).await {
                Ok(r) => r?,
                Err(_) => Outcome::Failed(format!(
                    "timed out after {}s waiting for the rollout",
                    args.timeout
                )),
            }
        } else {
            work.await?
        };
        if let Outcome::Failed(m) = &outcome {
            eprintln!("error: {m}");
        }
        Ok(outcome.exit_code())
    })
}
