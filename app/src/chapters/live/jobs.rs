//! The job API as the chapter sees it: the presets a run starts from, the job list,
//! the body of `POST /api/jobs` built from the form, and the server's error answers.
//!
//! A job request is `{"preset": name, ...overrides}`: the server loads the preset's
//! TOML as JSON and merges the overrides table by table, so `{"sft": {"steps": 6}}`
//! changes one field and keeps the rest of the `[sft]` table.

use arlbook_core::error::FieldError;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A training preset (`configs/<name>.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Preset {
    /// Its name, what a job request's `preset` names.
    pub name: String,
    /// One line on what it is for.
    #[serde(default)]
    pub summary: String,
    /// Its settings as JSON (TOML tables as objects).
    #[serde(default)]
    pub config: Value,
}

impl Preset {
    /// The preset's value of a dotted field (`grpo.steps`), as text.
    pub fn setting(&self, path: &str) -> Option<String> {
        let value = path
            .split('.')
            .try_fold(&self.config, |value, key| value.get(key))?;
        match value {
            Value::String(text) => Some(text.clone()),
            Value::Null | Value::Object(_) | Value::Array(_) => None,
            other => Some(other.to_string()),
        }
    }
}

/// One job in the list, as the server's job API writes it.
pub use arlbook_report::job::{JobState, JobView};

#[derive(Deserialize)]
struct Presets {
    presets: Vec<Preset>,
}

/// The body of `GET /api/presets`.
pub fn parse_presets(body: &str) -> Result<Vec<Preset>, String> {
    serde_json::from_str::<Presets>(body)
        .map(|p| p.presets)
        .map_err(|e| format!("unexpected presets answer: {e}"))
}

/// The body of `GET /api/jobs`, newest first.
pub fn parse_jobs(body: &str) -> Result<Vec<JobView>, String> {
    let mut jobs = serde_json::from_str::<arlbook_report::job::JobList>(body)
        .map(|j| j.jobs)
        .map_err(|e| format!("unexpected jobs answer: {e}"))?;
    jobs.sort_by_key(|j| std::cmp::Reverse(j.id));
    Ok(jobs)
}

/// The id of the job a `201` answer to `POST /api/jobs` created.
pub fn created_id(body: &str) -> Option<i64> {
    serde_json::from_str::<Value>(body)
        .ok()?
        .get("id")?
        .as_i64()
}

/// The error an answer with status `status` carries: the server's
/// `{"error": {"field", "message"}}`, or the status and text when it is not that.
pub fn api_error(status: u16, body: &str) -> FieldError {
    let parsed = serde_json::from_str::<Value>(body).ok();
    let error = parsed.as_ref().and_then(|v| v.get("error"));
    match (
        error.and_then(|e| e.get("field")).and_then(Value::as_str),
        error.and_then(|e| e.get("message")).and_then(Value::as_str),
    ) {
        (Some(field), Some(message)) => FieldError::new(field, message),
        _ => {
            let text: String = body.chars().take(200).collect();
            FieldError::new("(server)", format!("HTTP {status}: {text}"))
        }
    }
}

/// The optional overrides of the form, as typed (empty: keep the preset's value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overrides {
    /// `seed`.
    pub seed: String,
    /// `sft.steps`.
    pub sft_steps: String,
    /// `sft.recovery_steps`.
    pub recovery_steps: String,
    /// `grpo.steps`.
    pub grpo_steps: String,
    /// `arm`: the RL arm after SFT, `grpo` or `rs` (empty: the preset's).
    pub arm: String,
    /// `selection.enabled`: `on` or `off` (empty: the preset's).
    pub selection: String,
}

/// The RL arms a job can run after SFT (the config's `arm`).
pub const ARMS: [&str; 2] = ["grpo", "rs"];

impl Overrides {
    /// The fields in the form's order: `(dotted config field, text)`.
    pub fn fields(&self) -> [(&'static str, &str); 4] {
        [
            ("seed", &self.seed),
            ("sft.steps", &self.sft_steps),
            ("sft.recovery_steps", &self.recovery_steps),
            ("grpo.steps", &self.grpo_steps),
        ]
    }
}

/// The body of `POST /api/jobs`: the preset and each override that is filled in.
/// An override must be a whole number `>= 0`; the error names its config field. The
/// server checks the rest (ranges, the preset's existence).
pub fn job_request(preset: &str, overrides: &Overrides) -> Result<Value, FieldError> {
    if preset.is_empty() {
        return Err(FieldError::new("preset", "choose a preset"));
    }
    let mut body = Map::new();
    body.insert("preset".to_owned(), Value::from(preset));
    for (path, text) in overrides.fields() {
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let number: u64 = text
            .parse()
            .map_err(|_| FieldError::new(path, format!("`{text}` is not a whole number >= 0")))?;
        insert_dotted(&mut body, path, Value::from(number));
    }
    match overrides.arm.trim() {
        "" => {}
        arm if ARMS.contains(&arm) => {
            body.insert("arm".to_owned(), Value::from(arm));
        }
        other => {
            return Err(FieldError::new(
                "arm",
                format!("`{other}` is not an arm; choose grpo or rs"),
            ));
        }
    }
    match overrides.selection.trim() {
        "" => {}
        "on" => insert_dotted(&mut body, "selection.enabled", Value::Bool(true)),
        "off" => insert_dotted(&mut body, "selection.enabled", Value::Bool(false)),
        other => {
            return Err(FieldError::new(
                "selection.enabled",
                format!("`{other}` is neither on nor off"),
            ));
        }
    }
    Ok(Value::Object(body))
}

/// Sets `a.b.c` in `object`, creating the tables on the way.
fn insert_dotted(object: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            object.insert(path.to_owned(), value);
        }
        Some((head, rest)) => {
            let inner = object
                .entry(head.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !inner.is_object() {
                *inner = Value::Object(Map::new());
            }
            if let Value::Object(map) = inner {
                insert_dotted(map, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn overrides_become_nested_tables_and_empty_ones_are_left_out() {
        let overrides = Overrides {
            seed: " 11 ".to_owned(),
            sft_steps: "6".to_owned(),
            recovery_steps: "0".to_owned(),
            grpo_steps: "1".to_owned(),
            arm: "rs".to_owned(),
            selection: "off".to_owned(),
        };
        assert_eq!(
            job_request("cpu-small", &overrides).unwrap(),
            json!({"preset": "cpu-small", "seed": 11, "arm": "rs",
                   "sft": {"steps": 6, "recovery_steps": 0}, "grpo": {"steps": 1},
                   "selection": {"enabled": false}})
        );
        assert_eq!(
            job_request("cpu-small", &Overrides::default()).unwrap(),
            json!({"preset": "cpu-small"})
        );
    }

    #[test]
    fn a_bad_override_names_its_config_field() {
        let overrides = Overrides {
            grpo_steps: "-3".to_owned(),
            ..Overrides::default()
        };
        let err = job_request("cpu-small", &overrides).unwrap_err();
        assert_eq!(err.field, "grpo.steps");
        let overrides = Overrides {
            arm: "ppo".to_owned(),
            ..Overrides::default()
        };
        assert_eq!(
            job_request("cpu-small", &overrides).unwrap_err().field,
            "arm"
        );
        assert_eq!(
            job_request("", &Overrides::default()).unwrap_err().field,
            "preset"
        );
    }

    #[test]
    fn server_errors_keep_field_and_message_and_others_show_the_status() {
        let err = api_error(
            422,
            r#"{"error":{"field":"grpo.group_size","message":"must be at least 2"}}"#,
        );
        assert_eq!(err.field, "grpo.group_size");
        assert_eq!(err.message, "must be at least 2");
        let err = api_error(502, "Bad Gateway");
        assert_eq!(err.field, "(server)");
        assert_eq!(err.message, "HTTP 502: Bad Gateway");
    }

    #[test]
    fn presets_jobs_and_created_ids_parse() {
        let presets = parse_presets(
            r#"{"presets":[{"name":"cpu-small","summary":"small","config":{"seed":7,"grpo":{"steps":12,"reduction":"token-mean"}}}]}"#,
        )
        .unwrap();
        assert_eq!(presets[0].setting("grpo.steps").as_deref(), Some("12"));
        assert_eq!(presets[0].setting("seed").as_deref(), Some("7"));
        assert_eq!(
            presets[0].setting("grpo.reduction").as_deref(),
            Some("token-mean")
        );
        assert_eq!(presets[0].setting("grpo"), None);
        assert_eq!(presets[0].setting("sft.steps"), None);
        let job = |id, state| JobView {
            id,
            state,
            preset: Some("cpu-small".into()),
            created_unix_ms: 5,
            started_unix_ms: None,
            finished_unix_ms: None,
            resumes: 0,
            exit_code: None,
            error: None,
            pid: None,
            dir: "x".into(),
        };
        let list = arlbook_report::job::JobList {
            jobs: vec![job(1, JobState::Succeeded), job(2, JobState::Running)],
        };
        let jobs = parse_jobs(&serde_json::to_string(&list).unwrap()).unwrap();
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [2, 1]);
        assert!(!jobs[0].state.is_final() && jobs[1].state.is_final());
        assert!(parse_jobs(r#"{"jobs":[{"id":1,"state":"done"}]}"#).is_err());
        assert_eq!(created_id(r#"{"id":9,"state":"queued"}"#), Some(9));
        assert!(parse_jobs("<html>").is_err());
    }
}
