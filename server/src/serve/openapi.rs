//! `GET /api/openapi.json`: an `OpenAPI` 3.0 description of every route under `/api`.
//!
//! [`OPERATIONS`] is the list the document is made from; a unit test checks it
//! against the routes `serve::router` registers, and the HTTP tests call every
//! operation in it.

use serde_json::{Map, Value, json};

/// One documented operation.
#[derive(Debug, Clone, Copy)]
pub struct Operation {
    /// `get`, `post` or `delete`.
    pub method: &'static str,
    /// The path with `{parameters}`, as axum writes it.
    pub path: &'static str,
    /// One line.
    pub summary: &'static str,
    /// What a success answers (status, description).
    pub success: (&'static str, &'static str),
    /// Whether it changes jobs (needs the bearer token when one is required).
    pub needs_token: bool,
}

const fn op(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    success: (&'static str, &'static str),
    needs_token: bool,
) -> Operation {
    Operation {
        method,
        path,
        summary,
        success,
        needs_token,
    }
}

/// Every operation the server answers under `/api`.
pub const OPERATIONS: &[Operation] = &[
    op(
        "get",
        "/api/health",
        "Liveness, version, `computations_running` (compute requests being worked on), `computations_cancelled` (stopped unfinished since the start) and `connections`: `open`, `cap` (the connection cap in force), `closed_first_byte_deadline` (closed for sending no byte in time), `closed_idle_for_room` and `closed_unfinished_headers_for_room` (closed at the cap to make room for a new connection), `accept_paused_all_busy` (times every connection at the cap was answering a request, so new ones waited).",
        ("200", "ok"),
        false,
    ),
    op(
        "get",
        "/api/openapi.json",
        "This document.",
        ("200", "OpenAPI 3 JSON"),
        false,
    ),
    op(
        "get",
        "/api/compute",
        "The computations, one summary each.",
        ("200", "the list"),
        false,
    ),
    op(
        "get",
        "/api/compute/{name}/example",
        "An example request for one computation.",
        ("200", "a request body"),
        false,
    ),
    op(
        "post",
        "/api/compute/{name}",
        "Run one computation (the same JSON as `arlbook compute <name>`).",
        ("200", "the computation's response"),
        false,
    ),
    op(
        "get",
        "/api/presets",
        "The training presets (configs/*.toml): name, first comment line, every setting as JSON (defaults filled in).",
        (
            "200",
            "{\"presets\": [{\"name\", \"summary\", \"config\"}]}",
        ),
        false,
    ),
    op(
        "get",
        "/api/jobs",
        "Every training job, oldest first.",
        ("200", "{\"jobs\": [job]}"),
        false,
    ),
    op(
        "post",
        "/api/jobs",
        "Queue a training job: a training config as JSON, optionally {\"preset\": name} plus overrides, and {\"distributed\": true} to collect its GRPO rollouts with the workers of the server's broker (arlbook serve --nats URL; refused without one).",
        ("201", "the job"),
        true,
    ),
    op(
        "get",
        "/api/jobs/{id}",
        "One job: state, config, times, checkpoint, last metrics row.",
        ("200", "the job"),
        false,
    ),
    op(
        "delete",
        "/api/jobs/{id}",
        "Cancel a job (kills its training process).",
        ("200", "the cancelled job"),
        true,
    ),
    op(
        "get",
        "/api/jobs/{id}/metrics",
        "The job's metrics rows as server-sent events: the backlog, live rows, then an `end` event.",
        ("200", "text/event-stream; one `data:` per JSON row"),
        false,
    ),
];

fn parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = if name == "id" {
                json!({"type": "integer", "minimum": 1})
            } else {
                json!({"type": "string"})
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

/// The document.
pub fn document() -> Value {
    let error = json!({"$ref": "#/components/schemas/Error"});
    let error_response = |description: &str| json!({"description": description, "content": {"application/json": {"schema": error}}});
    let mut paths = Map::new();
    for operation in OPERATIONS {
        let mut responses = Map::new();
        responses.insert(
            operation.success.0.to_owned(),
            json!({"description": operation.success.1}),
        );
        responses.insert("4XX".to_owned(), error_response("a rejected request"));
        let mut entry = json!({
            "summary": operation.summary,
            "parameters": parameters(operation.path),
            "responses": responses,
        });
        if operation.method == "post" {
            entry["requestBody"] = json!({
                "required": true,
                "content": {"application/json": {"schema": {"type": "object"}}}
            });
        }
        if operation.needs_token {
            entry["security"] = json!([{"bearer": []}, {}]);
        }
        let item = paths
            .entry(operation.path.to_owned())
            .or_insert_with(|| json!({}));
        item[operation.method] = entry;
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "arlbook",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The compute API and the training-job API of `arlbook serve`. \
                Every route answers only under an IP address, localhost or an --allowed-host \
                name (403, field host); POST and DELETE from another site's Origin are refused \
                (403, origin); request bodies must be application/json (415, content-type); \
                a full job queue answers 429.",
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {
                        "type": "object",
                        "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                        "required": ["field", "message"],
                    }},
                    "required": ["error"],
                },
            },
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "Required on POST and DELETE /api/jobs when the server listens beyond loopback or was given --token.",
                },
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `(method, path)` pairs `serve::router` registers, read from its source.
    fn registered_routes() -> Vec<(String, String)> {
        let source = include_str!("mod.rs");
        let mut routes = Vec::new();
        for call in source.split(".route(").skip(1) {
            let Some(quoted) = call.trim_start().strip_prefix('"') else {
                continue;
            };
            let Some((path, rest)) = quoted.split_once('"') else {
                continue;
            };
            if path.contains("{*") {
                continue; // the JSON 404 for unknown API paths
            }
            let rest = rest.split(".fallback").next().unwrap_or(rest);
            for method in ["get", "post", "delete", "put", "patch"] {
                let calls = rest.contains(&format!("({method}("))
                    || rest.contains(&format!(" {method}("))
                    || rest.contains(&format!(".{method}("));
                if calls {
                    routes.push((method.to_owned(), path.to_owned()));
                }
            }
        }
        routes.sort();
        routes
    }

    #[test]
    fn every_registered_route_is_documented_and_nothing_else() {
        let mut documented: Vec<(String, String)> = OPERATIONS
            .iter()
            .map(|o| (o.method.to_owned(), o.path.to_owned()))
            .collect();
        documented.sort();
        let registered = registered_routes();
        assert!(registered.len() >= 10, "{registered:?}");
        assert_eq!(registered, documented);
    }

    #[test]
    fn the_document_has_every_operation_with_its_path_parameters() {
        let doc = document();
        for operation in OPERATIONS {
            let entry = &doc["paths"][operation.path][operation.method];
            assert!(entry.is_object(), "{} {}", operation.method, operation.path);
            let named = entry["parameters"].as_array().map_or(0, Vec::len);
            assert_eq!(
                named,
                operation.path.matches('{').count(),
                "{}",
                operation.path
            );
        }
    }
}
