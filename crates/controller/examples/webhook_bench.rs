//! Peak memory of the conversion webhook answering one ConversionReview of many small CloneSets, and the
//! latency of `/healthz` meanwhile.
//!
//! `cargo run --release -p insitu-controller --example webhook_bench [COUNTS...]` (default 1000 10000 80000;
//! `taskset -c 0` in front pins it to one CPU as the Deployment's limit does). For each count a fresh server
//! process (this program with `serve`, jemalloc as in the `insitu` binary) answers one review sent by this
//! process, which polls `/healthz` on a second connection all the while; the peak is the server's `VmHWM`.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use insitu_controller::webhook::{budget::Limits, certs, server};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve") {
        return serve();
    }
    let counts: Vec<usize> = if args.is_empty() {
        vec![1_000, 10_000, 80_000]
    } else {
        args.iter().map(|a| a.parse()).collect::<Result<_, _>>()?
    };
    println!(
        "objects  body MiB  server RSS before MiB  peak RSS MiB  review s  healthz max ms  healthz p50 ms  healthz n"
    );
    for n in counts {
        measure(n)?;
    }
    Ok(())
}

/// The server side: prints the CA and the port, then serves until killed.
fn serve() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let names = vec!["localhost".to_string()];
        let bundle = certs::generate(&names, Duration::from_secs(3600), None)?;
        let resolver = server::CertResolver::new();
        resolver.set(&bundle)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        print!("{}", bundle.ca_cert);
        println!("PORT {port}");
        server::serve_with(listener, server::tls_config(resolver)?, Limits::default()).await;
        anyhow::Ok(())
    })
}

fn cloneset(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"apps.kruise.io/v1alpha1","kind":"CloneSet","metadata":{{"name":"web-{i:06}","namespace":"bench","uid":"6b1f0c2e-{i:04x}-4b1e-9d36-0c7d1c5c{i:04x}","resourceVersion":"{i}","generation":1,"labels":{{"app":"web"}}}},"spec":{{"replicas":3,"selector":{{"matchLabels":{{"app":"web"}}}},"template":{{"metadata":{{"labels":{{"app":"web"}}}},"spec":{{"containers":[{{"name":"main","image":"nginx:1.25"}}]}}}},"updateStrategy":{{"type":"InPlaceIfPossible","maxUnavailable":1}}}}}}"#
    )
}

fn review(n: usize) -> Vec<u8> {
    let mut body = String::from(
        r#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"bench","desiredAPIVersion":"apps.kruise.io/v1beta1","objects":["#,
    );
    for i in 0..n {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&cloneset(i));
    }
    body.push_str("]}}");
    body.into_bytes()
}

/// `VmRSS` and `VmHWM` of a process, in KiB.
fn rss(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

fn measure(n: usize) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe).arg("serve").stdout(Stdio::piped()).spawn()?;
    let mut ca = String::new();
    let mut port = 0u16;
    let stdout = child.stdout.take().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line?;
        if let Some(p) = line.strip_prefix("PORT ") {
            port = p.parse()?;
            break;
        }
        ca.push_str(&line);
        ca.push('\n');
    }
    let body = review(n);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(run_one(port, &ca, body, child.id()));
    let _ = child.kill();
    let _ = child.wait();
    let r = result?;
    println!(
        "{n:>7}  {:>8.1}  {:>21.1}  {:>12.1}  {:>8.2}  {:>14.1}  {:>14.1}  {:>9}",
        r.body_bytes as f64 / 1048576.0,
        r.rss_before_kib as f64 / 1024.0,
        r.peak_kib as f64 / 1024.0,
        r.review.as_secs_f64(),
        r.health_max.as_secs_f64() * 1000.0,
        r.health_p50.as_secs_f64() * 1000.0,
        r.health_n
    );
    Ok(())
}

struct Figures {
    body_bytes: usize,
    rss_before_kib: u64,
    peak_kib: u64,
    review: Duration,
    health_max: Duration,
    health_p50: Duration,
    health_n: usize,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16, ca: &str) -> anyhow::Result<Sender> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c?)?;
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost")?, tcp)
        .await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn run_one(port: u16, ca: &str, body: Vec<u8>, pid: u32) -> anyhow::Result<Figures> {
    let body_bytes = body.len();
    let mut health = connect(port, ca).await?;
    let mut post = connect(port, ca).await?;
    let (rss_before_kib, _) = rss(pid)?;
    let (done_tx, mut done_rx) = tokio::sync::watch::channel(false);
    let poller = tokio::spawn(async move {
        let mut lat = Vec::new();
        while !*done_rx.borrow_and_update() {
            let started = Instant::now();
            let req = Request::get("/healthz")
                .header(hyper::header::HOST, "localhost")
                .body(Full::new(Bytes::new()))?;
            let resp = health.send_request(req).await?;
            anyhow::ensure!(resp.status().is_success(), "/healthz answered {}", resp.status());
            resp.into_body().collect().await?;
            lat.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::Ok(lat)
    });
    let started = Instant::now();
    let req = Request::post("/convert")
        .header(hyper::header::HOST, "localhost")
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))?;
    let resp = post.send_request(req).await?;
    let status = resp.status();
    let answer = resp.into_body().collect().await?.to_bytes();
    let review = started.elapsed();
    let _ = done_tx.send(true);
    anyhow::ensure!(status.is_success(), "/convert answered {status}");
    let success = br#""status":"Success"}"#;
    anyhow::ensure!(
        answer.windows(success.len()).any(|w| w == success),
        "the review did not succeed"
    );
    let (_, peak_kib) = rss(pid)?;
    let mut lat = poller.await??;
    lat.sort();
    Ok(Figures {
        body_bytes,
        rss_before_kib,
        peak_kib,
        review,
        health_max: lat.last().copied().unwrap_or_default(),
        health_p50: lat.get(lat.len() / 2).copied().unwrap_or_default(),
        health_n: lat.len(),
    })
}
