//! The launch files of `configs/cluster/` checked as far as can be done without a
//! cluster: the Kubernetes manifests parse and have the shape a run needs (a broker
//! that requires the token, a learner that resumes, workers as an indexed job), the
//! Slurm script is valid bash, and every `arlbook` flag they use exists.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] functions")]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_arlbook");

fn cluster_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/cluster")
}

fn manifest(name: &str) -> Value {
    let path = cluster_dir().join("k8s").join(name);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The objects of a manifest (a `List`'s items, or the object itself).
fn objects(manifest: &Value) -> Vec<&Value> {
    match manifest["kind"].as_str() {
        Some("List") => manifest["items"].as_array().unwrap().iter().collect(),
        _ => vec![manifest],
    }
}

fn of_kind<'a>(manifest: &'a Value, kind: &str) -> &'a Value {
    objects(manifest)
        .into_iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

/// The shell text of a pod template's containers.
fn container_text(object: &Value) -> String {
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            ["command", "args"]
                .into_iter()
                .filter_map(|k| c[k].as_array())
                .flatten()
        })
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every `arlbook SUBCOMMAND --flag ...` in `text`: (subcommand, flags).
fn invocations(text: &str) -> Vec<(String, Vec<String>)> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ';' || c == '"' || c == '\\')
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let is_binary = *word == "arlbook" || *word == "\"$ARLBOOK\"" || *word == "$ARLBOOK";
        if !is_binary || i + 1 >= words.len() {
            continue;
        }
        let sub = words[i + 1].to_owned();
        if !["train", "worker"].contains(&sub.as_str()) {
            continue;
        }
        let flags = words[i + 2..]
            .iter()
            .take_while(|w| !matches!(**w, "else" | "fi" | "&" | "then"))
            .filter(|w| w.starts_with("--"))
            .map(|w| (*w).to_owned())
            .collect();
        found.push((sub, flags));
    }
    found
}

fn assert_flags_exist(invocations: &[(String, Vec<String>)]) {
    assert!(!invocations.is_empty());
    for (sub, flags) in invocations {
        let help = Command::new(BIN).args([sub, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        for flag in flags {
            assert!(
                help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}\n")),
                "arlbook {sub} has no {flag}"
            );
        }
    }
}

#[test]
fn the_kubernetes_manifests_describe_a_broker_a_resuming_learner_and_indexed_workers() {
    let nats = manifest("nats.json");
    let conf = of_kind(&nats, "ConfigMap")["data"]["nats.conf"]
        .as_str()
        .unwrap();
    assert!(conf.contains("jetstream"), "{conf}");
    assert!(conf.contains("token: $ARLBOOK_NATS_TOKEN"), "{conf}");
    assert_eq!(of_kind(&nats, "Service")["metadata"]["name"], "nats");
    let broker = of_kind(&nats, "StatefulSet");
    assert!(broker["spec"]["volumeClaimTemplates"].is_array());

    let learner = manifest("learner.json");
    let job = of_kind(&learner, "Job");
    let text = container_text(job);
    assert!(
        text.contains("--resume"),
        "a restarted learner pod must resume"
    );
    let calls = invocations(&text);
    assert_eq!(calls.len(), 2, "{text}");
    assert!(
        calls
            .iter()
            .all(|(sub, flags)| sub == "train" && flags.contains(&"--nats".to_owned()))
    );
    assert_flags_exist(&calls);

    let workers = manifest("workers.json");
    let job = of_kind(&workers, "Job");
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let text = container_text(job);
    assert!(text.contains("$JOB_COMPLETION_INDEX"), "{text}");
    let calls = invocations(&text);
    assert_eq!(calls[0].0, "worker");
    assert_flags_exist(&calls);

    // Every pod that talks to the broker has the token from the same secret.
    for object in [broker, of_kind(&learner, "Job"), job] {
        let env = &object["spec"]["template"]["spec"]["containers"][0]["env"];
        let token = env
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "ARLBOOK_NATS_TOKEN")
            .expect("ARLBOOK_NATS_TOKEN");
        assert_eq!(token["valueFrom"]["secretKeyRef"]["name"], "arlbook-nats");
    }
}

#[test]
fn the_slurm_script_is_valid_bash_and_uses_existing_flags() {
    let path = cluster_dir().join("slurm.sbatch");
    let syntax = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("ARLBOOK_NATS_TOKEN:?"),
        "the token must be required"
    );
    let calls = invocations(&text);
    assert_eq!(
        calls.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        ["worker", "train", "train"]
    );
    assert_flags_exist(&calls);
}
