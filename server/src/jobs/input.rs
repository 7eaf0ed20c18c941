//! A job request: the fields of a training config as JSON (the TOML file's tables as
//! objects), optionally `"preset": "<name>"` to start from `configs/<name>.toml` and
//! override some of its fields, and `"distributed": true` to have the rollouts of its
//! GRPO stage collected by workers on the server's broker. Every error names the field
//! as the request wrote it.
//!
//! A request never names a broker itself (`cluster.url` is refused): a distributed job
//! uses the one the server was started with (`arlbook serve --nats URL`), and a server
//! started without one refuses distributed jobs.

use std::path::Path;

use arlbook_core::FieldError;
use serde_json::{Map, Value};

use arlbook_train::config::{TrainConfig, merge_fields};

/// The longest accepted preset name.
const MAX_PRESET_LEN: usize = 64;

/// A validated job request.
#[derive(Debug, Clone)]
pub struct JobRequest {
    /// The config the job trains with.
    pub config: TrainConfig,
    /// The preset it started from.
    pub preset: Option<String>,
}

/// Parses and validates a request body against the presets in `configs`; `broker` is
/// the server's broker for distributed jobs, if it has one.
pub fn parse(body: &[u8], configs: &Path, broker: Option<&str>) -> Result<JobRequest, FieldError> {
    let value = crate::strict_json::parse(body)?;
    let Value::Object(mut fields) = value else {
        return Err(FieldError::new(
            "(request)",
            "expected a JSON object with the fields of a training config",
        ));
    };
    let preset = match fields.remove("preset") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => Some(name),
        Some(_) => return Err(FieldError::new("preset", "must be a string")),
    };
    let distributed = match fields.remove("distributed") {
        None | Some(Value::Null | Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err(FieldError::new("distributed", "must be true or false")),
    };
    let merged = match &preset {
        Some(name) => {
            let mut base = load_preset(name, configs)?;
            merge_fields(&mut base, fields);
            base
        }
        None => fields,
    };
    let mut config = TrainConfig::from_fields(Value::Object(merged))?;
    if !config.cluster.url.is_empty() {
        return Err(FieldError::new(
            "cluster.url",
            "is set by the server (`arlbook serve --nats URL`); send \"distributed\": true instead",
        ));
    }
    if distributed {
        let Some(url) = broker else {
            return Err(FieldError::new(
                "distributed",
                "this server was started without --nats URL: its jobs collect in process only",
            ));
        };
        url.clone_into(&mut config.cluster.url);
    }
    config.validate()?;
    Ok(JobRequest { config, preset })
}

/// `configs/<name>.toml` as JSON fields.
pub fn load_preset(name: &str, configs: &Path) -> Result<Map<String, Value>, FieldError> {
    let well_formed = !name.is_empty()
        && name.len() <= MAX_PRESET_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !well_formed {
        return Err(FieldError::new(
            "preset",
            "must be a config name of letters, digits, '-' and '_' (see configs/)",
        ));
    }
    let path = configs.join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).map_err(|_| {
        FieldError::new(
            "preset",
            format!(
                "unknown preset `{name}`; available: {}",
                presets(configs).join(", ")
            ),
        )
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| {
        FieldError::new(
            "preset",
            format!("{} is not valid TOML: {e}", path.display()),
        )
    })?;
    match serde_json::to_value(table) {
        Ok(Value::Object(fields)) => Ok(fields),
        _ => Err(FieldError::new(
            "preset",
            format!("{} does not convert to JSON", path.display()),
        )),
    }
}

/// Every setting a job started from preset `name` trains with: the file's fields and
/// the defaults of those it leaves out, as JSON (what `GET /api/presets` shows, so a
/// form can show the value a field it leaves empty will take).
pub fn resolved_preset(name: &str, configs: &Path) -> Result<Value, FieldError> {
    let config = TrainConfig::from_fields(Value::Object(load_preset(name, configs)?))?;
    serde_json::to_value(config)
        .map_err(|e| FieldError::new("preset", format!("`{name}` does not convert to JSON: {e}")))
}

/// The first comment line of a preset file (what it is for), without the `#`.
pub fn preset_summary(name: &str, configs: &Path) -> String {
    std::fs::read_to_string(configs.join(format!("{name}.toml")))
        .ok()
        .and_then(|text| {
            let line = text.lines().next()?.strip_prefix('#')?.trim().to_owned();
            Some(line)
        })
        .unwrap_or_default()
}

/// The preset names in `configs`, sorted.
pub fn presets(configs: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(configs)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            let is_toml = path.extension().is_some_and(|x| x == "toml");
            is_toml
                .then(|| path.file_stem()?.to_str().map(str::to_owned))
                .flatten()
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn configs() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs")
    }

    fn field_of(body: &Value) -> String {
        parse(body.to_string().as_bytes(), &configs(), None)
            .unwrap_err()
            .field
    }

    #[test]
    fn a_preset_with_overrides_keeps_the_rest_of_the_preset() {
        let body = json!({"preset": "cpu-small", "grpo": {"steps": 3}, "seed": 11});
        let request = parse(body.to_string().as_bytes(), &configs(), None).unwrap();
        assert_eq!(request.preset.as_deref(), Some("cpu-small"));
        assert_eq!(request.config.grpo.steps, 3);
        assert_eq!(request.config.seed, 11);
        let text = std::fs::read_to_string(configs().join("cpu-small.toml")).unwrap();
        let preset = TrainConfig::from_toml(&text).unwrap();
        assert_eq!(request.config.sft, preset.sft, "from the preset");
        assert_eq!(request.config.model, preset.model, "from the preset");
        assert_eq!(request.config.grpo.group_size, preset.grpo.group_size);
    }

    #[test]
    fn a_distributed_job_needs_the_server_s_broker_and_names_none_itself() {
        let body = json!({"preset": "cpu-small", "distributed": true}).to_string();
        let err = parse(body.as_bytes(), &configs(), None).unwrap_err();
        assert_eq!(err.field, "distributed");
        assert!(err.message.contains("--nats"), "{}", err.message);
        let broker = Some("nats://127.0.0.1:4222");
        let request = parse(body.as_bytes(), &configs(), broker).unwrap();
        assert_eq!(request.config.cluster.url, "nats://127.0.0.1:4222");
        let local = parse(br#"{"preset": "cpu-small"}"#, &configs(), broker).unwrap();
        assert_eq!(local.config.cluster.url, "", "not distributed unless asked");
        let named = json!({"cluster": {"url": "nats://10.1.2.3:4222"}}).to_string();
        for server in [None, broker] {
            let err = parse(named.as_bytes(), &configs(), server).unwrap_err();
            assert_eq!(err.field, "cluster.url");
        }
        assert_eq!(field_of(&json!({"distributed": "yes"})), "distributed");
    }

    #[test]
    fn bodies_are_strict_and_defaults_are_one_set() {
        // A list where a table belongs would reset the preset's table.
        assert_eq!(field_of(&json!({"preset": "cpu-small", "sft": [5]})), "sft");
        assert_eq!(field_of(&json!({"model": 3})), "model");
        let err = parse(br#"{"seed": 1, "seed": 2}"#, &configs(), None).unwrap_err();
        assert_eq!(err.field, "seed");
        let err = parse(br#"{"grpo": {"steps": 1, "steps": 9}}"#, &configs(), None).unwrap_err();
        assert_eq!(err.field, "grpo.steps");
        // A table written in part takes the other fields' defaults from the same
        // place as a table left out.
        let none = parse(b"{}", &configs(), None).unwrap().config;
        let part = parse(br#"{"harness": {"max_turns": 8}}"#, &configs(), None)
            .unwrap()
            .config;
        assert_eq!(part.harness, none.harness);
        let toml_part = TrainConfig::from_toml("[harness]\nmax_turns = 8\n").unwrap();
        assert_eq!(toml_part.harness, none.harness);
        assert!(
            TrainConfig::from_toml("sft = [5]\n")
                .unwrap_err()
                .to_string()
                .starts_with("sft:"),
            "the TOML file is as strict"
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            field_of(&json!({"grpo": {"group_size": 1}})),
            "grpo.group_size"
        );
        assert_eq!(
            field_of(&json!({"grpo": {"group_size": "8"}})),
            "grpo.group_size"
        );
        assert_eq!(
            field_of(&json!({"grpo": {"eps_low": "NaN"}})),
            "grpo.eps_low"
        );
        assert_eq!(
            field_of(&json!({"grpo": {"group_sise": 4}})),
            "grpo.group_sise"
        );
        assert_eq!(field_of(&json!({"bogus": 4})), "bogus");
        assert_eq!(field_of(&json!({"seed": -1})), "seed");
        assert_eq!(
            field_of(&json!({"grpo": {"group_size": 1_000_000_000_000_u64}})),
            "grpo.group_size"
        );
        assert_eq!(field_of(&json!({"preset": "../../etc/passwd"})), "preset");
        assert_eq!(field_of(&json!({"preset": "nope"})), "preset");
        assert_eq!(field_of(&json!({"preset": 3})), "preset");
        assert_eq!(field_of(&json!([1, 2])), "(request)");
        let err = parse(b"{\"seed\": 1e999}", &configs(), None).unwrap_err();
        assert_eq!(err.field, "(request)");
    }
}
