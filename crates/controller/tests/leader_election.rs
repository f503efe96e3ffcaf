//! Leader election on a Lease (crates/controller/src/leader.rs) against the simulated apiserver, on virtual time:
//! exactly one leader; a crashed leader (no release) is replaced after the lease duration; a released lease is
//! taken over at the standby's next retry.

use std::time::Duration;

use insitu_controller::leader::{LeaderElectionConfig, LeaderElector};
use insitu_sim::apiserver::ApiServer;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::PostParams;

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("insitu-system", "insitu-cloneset-controller", identity)
}

async fn holder(client: &kube::Client) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), "insitu-system");
    api.get_opt("insitu-cloneset-controller")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
}

#[tokio::test(start_paused = true)]
async fn one_leader_failover_and_release() {
    let clock = insitu_sim::SimClock::new(k8s_openapi::jiff::Timestamp::now(), 1.0);
    let apiserver = ApiServer::new(clock);
    let client = apiserver.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "insitu-system"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");

    let a = LeaderElector::spawn(client.clone(), config("a"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b = LeaderElector::spawn(client.clone(), config("b"));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(*a.subscribe().borrow(), "the first candidate leads");
    assert!(!*b.subscribe().borrow(), "only one leader");
    assert_eq!(holder(&client).await.as_deref(), Some("a"));

    // Crash: the loop stops without releasing. b must wait out the lease (15 s) and then take over.
    drop(a);
    let crashed = tokio::time::Instant::now();
    let mut b_leads = b.subscribe();
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert!(!*b_leads.borrow(), "b took over before the lease expired");
    tokio::time::timeout(Duration::from_secs(15), b_leads.wait_for(|l| *l))
        .await
        .expect("b takes over within the lease duration + retry")
        .expect("elector alive");
    let took = crashed.elapsed();
    assert!(
        took >= Duration::from_secs(15) && took <= Duration::from_secs(20),
        "takeover after {took:?}"
    );
    assert_eq!(holder(&client).await.as_deref(), Some("b"));
    let api: Api<Lease> = Api::namespaced(client.clone(), "insitu-system");
    let lease = api.get("insitu-cloneset-controller").await.expect("lease");
    assert_eq!(lease.spec.and_then(|s| s.lease_transitions), Some(1));

    // Graceful handover: b releases, c acquires at its next retry (no lease-duration wait).
    let c = LeaderElector::spawn(client.clone(), config("c"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!*c.subscribe().borrow());
    b.release().await;
    let released = tokio::time::Instant::now();
    let mut c_leads = c.subscribe();
    tokio::time::timeout(Duration::from_secs(5), c_leads.wait_for(|l| *l))
        .await
        .expect("c takes a released lease quickly")
        .expect("elector alive");
    assert!(released.elapsed() <= Duration::from_secs(3));
    assert_eq!(holder(&client).await.as_deref(), Some("c"));
    // Acquiring a released lease is a transition too (client-go's count).
    let lease = api.get("insitu-cloneset-controller").await.expect("lease");
    assert_eq!(lease.spec.and_then(|s| s.lease_transitions), Some(2));
}

/// A leader cut off from the apiserver while it keeps running (its requests hang, or are refused) steps down
/// within the renew deadline, before the standby may take over; once healed, nothing it sent is accepted.
#[tokio::test(start_paused = true)]
async fn a_partitioned_leader_steps_down_before_the_standby_takes_over() {
    use insitu_sim::apiserver::Partition;
    for how in [Partition::Hang, Partition::Refused] {
        let clock = insitu_sim::SimClock::new(
            k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            1.0,
        );
        let apiserver = ApiServer::new(clock);
        let oracle = apiserver.oracle_client();
        let namespaces: Api<Namespace> = Api::all(oracle.clone());
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "insitu-system"}})).unwrap();
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
        let a = LeaderElector::spawn(apiserver.client_as("a"), config("a"));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let b = LeaderElector::spawn(apiserver.client_as("b"), config("b"));
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(*a.subscribe().borrow(), "{how:?}: a leads");

        apiserver.partition("a", how);
        let cut = tokio::time::Instant::now();
        let mut a_leads = a.subscribe();
        tokio::time::timeout(Duration::from_secs(11), a_leads.wait_for(|l| !*l))
            .await
            .unwrap_or_else(|_| panic!("{how:?}: a still leads 11 s into the partition"))
            .expect("elector alive");
        let stepped_down = cut.elapsed();
        let mut b_leads = b.subscribe();
        tokio::time::timeout(Duration::from_secs(20), b_leads.wait_for(|l| *l))
            .await
            .expect("b takes over")
            .expect("elector alive");
        let took_over = cut.elapsed();
        assert!(
            stepped_down < took_over,
            "{how:?}: a stepped down after {stepped_down:?}, b took over after {took_over:?}"
        );
        assert_eq!(holder(&oracle).await.as_deref(), Some("b"));
        // Healed: whatever a still had in flight is not accepted (its elector stopped; a stale renew is a 409).
        apiserver.heal("a");
        tokio::time::sleep(Duration::from_secs(40)).await;
        let writes = apiserver.accepted_writes();
        let last_a = writes.iter().rposition(|w| w.client == "a");
        let first_b = writes.iter().position(|w| w.client == "b");
        assert!(last_a < first_b, "{how:?}: {writes:?}");
        assert_eq!(holder(&oracle).await.as_deref(), Some("b"));
    }
}
