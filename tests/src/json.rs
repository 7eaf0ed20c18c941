//! JSON walks the sweep tests share.

use serde_json::Value;

/// JSON pointers (`/a/0`) of every number in `value`, depth first.
pub fn numeric_leaves(value: &Value) -> Vec<String> {
    fn walk(value: &Value, path: &str, out: &mut Vec<String>) {
        match value {
            Value::Number(_) => out.push(path.to_owned()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}/{i}"), out);
                }
            }
            Value::Object(fields) => {
                for (key, item) in fields {
                    walk(item, &format!("{path}/{key}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, "", &mut out);
    out
}

/// Whether `value` holds a `null` anywhere (serde writes NaN and infinities as `null`).
pub fn has_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(fields) => fields.values().any(has_null),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_and_nulls_are_found_at_any_depth() {
        let value = serde_json::json!({"a": [1, {"b": 2.5}], "c": "x", "d": {"e": null}});
        assert_eq!(numeric_leaves(&value), ["/a/0", "/a/1/b"]);
        assert!(has_null(&value));
        assert!(!has_null(&serde_json::json!({"a": [1]})));
    }
}
