//! An in-place restart as the kubelet kills a container (Kruise `pkg/daemon/kuberuntime/kuberuntime_container.go`,
//! `KillContainer` and `executePreStopHook`): the preStop hook within the grace period, then CRI StopContainer
//! with what is left of it (at least the kubelet's 2 s minimum). The kubelet then starts the container again.

use std::time::{Duration, Instant};

use crate::cri::{Cri, CriError};
use crate::decide::{HttpGet, MIN_GRACE_SECONDS, PreStop, Restart};

/// Runs the restart. The hook's failure or timeout does not stop it (as with the kubelet): it is returned, for
/// a `FailedPreStopHook` Warning.
pub async fn restart(cri: &Cri, r: &Restart, pod: &str) -> Result<Option<String>, CriError> {
    let mut grace = r.grace_seconds;
    let mut hook_failure = None;
    if let Some(hook) = r.pre_stop.as_ref().filter(|_| grace > 0) {
        let budget = Duration::from_secs(u64::try_from(grace).unwrap_or(0));
        let start = Instant::now();
        hook_failure = match tokio::time::timeout(budget, run_hook(cri, &r.id, hook, budget)).await {
            Ok(result) => result.err(),
            Err(_) => Some(format!("PreStop hook did not complete within {grace}s")),
        };
        if let Some(msg) = &hook_failure {
            tracing::warn!(pod, container = %r.name, msg, "preStop hook failed");
        }
        grace -= i64::try_from(start.elapsed().as_secs()).unwrap_or(grace);
    }
    let grace = grace.max(MIN_GRACE_SECONDS);
    tracing::info!(pod, container = %r.name, id = %r.id, grace, "stopping container (env from metadata changed)");
    cri.stop(&r.id, grace).await?;
    Ok(hook_failure)
}

/// One preStop hook; `Err` says why it failed.
async fn run_hook(cri: &Cri, id: &str, hook: &PreStop, budget: Duration) -> Result<(), String> {
    match hook {
        PreStop::Exec(cmd) => match cri.exec_sync(id, cmd.clone(), budget).await {
            Ok(0) => Ok(()),
            Ok(code) => Err(format!("PreStop exec {cmd:?} exited with {code}")),
            Err(e) => Err(format!("PreStop exec {cmd:?} failed: {e}")),
        },
        PreStop::Sleep(s) => {
            tokio::time::sleep(Duration::from_secs(u64::try_from(*s).unwrap_or(0))).await;
            Ok(())
        }
        // The kubelet does not verify the pod's certificate; this agent has no TLS client for it yet.
        PreStop::HttpGet(g) if g.https => {
            Err("PreStop httpGet over HTTPS is not run by insitu's agent".into())
        }
        // The kubelet's `runHTTPHandler` fails a hook answered outside 2xx/3xx.
        PreStop::HttpGet(g) => match http_get(g).await {
            Ok(code) if (200..400).contains(&code) => Ok(()),
            Ok(code) => Err(format!(
                "PreStop httpGet {}:{}{} answered {code}",
                g.host, g.port, g.path
            )),
            Err(e) => Err(format!("PreStop httpGet failed: {e}")),
        },
    }
}

/// One HTTP/1.1 GET, as the kubelet's lifecycle handler sends it; the answer's status is returned, not judged.
async fn http_get(g: &HttpGet) -> Result<u16, String> {
    let stream = tokio::net::TcpStream::connect((g.host.as_str(), g.port))
        .await
        .map_err(|e| format!("connect {}:{}: {e}", g.host, g.port))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let authority = if g.host.contains(':') {
        format!("[{}]:{}", g.host, g.port)
    } else {
        format!("{}:{}", g.host, g.port)
    };
    let mut req = http::Request::get(g.path.as_str())
        .header(http::header::HOST, authority)
        .header(http::header::USER_AGENT, "kube-lifecycle/insitu-agent");
    for (k, v) in &g.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .map_err(|e| e.to_string())?;
    let status = sender
        .send_request(req)
        .await
        .map_err(|e| e.to_string())?
        .status();
    conn.abort();
    Ok(status.as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn http_get_sends_the_path_and_headers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.expect("read");
            s.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                .await
                .expect("write");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let g = HttpGet {
            https: false,
            host: "127.0.0.1".into(),
            port,
            path: "/drain?x=1".into(),
            headers: vec![("X-A".into(), "1".into())],
        };
        assert_eq!(http_get(&g).await, Ok(204));
        let req = server.await.expect("server");
        assert!(req.starts_with("GET /drain?x=1 HTTP/1.1\r\n"), "{req}");
        assert!(req.to_ascii_lowercase().contains("x-a: 1\r\n"), "{req}");
        let closed = HttpGet { port: 1, ..g };
        assert!(http_get(&closed).await.is_err());
    }
}
