//! JSON bodies read strictly: an object that names one key twice is refused, with the
//! key's path, instead of silently keeping the last value (what `serde_json::Value`
//! does). Used for every body the server and the CLI accept: compute requests and job
//! requests.

use std::collections::HashSet;
use std::fmt;

use arlbook_core::FieldError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `text` as JSON, refusing duplicate keys; the error names the field.
pub fn parse(text: &[u8]) -> Result<Value, FieldError> {
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value = At(String::new())
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    value.map_err(|e| {
        let message = e.to_string();
        match message.strip_prefix("duplicate key ") {
            Some(rest) => {
                let (field, _) = rest.split_once(" at line").unwrap_or((rest, ""));
                FieldError::new(
                    field.trim_matches('`'),
                    "appears twice in this object; give each field once",
                )
            }
            None => FieldError::new("(request)", format!("not valid JSON: {message}")),
        }
    })
}

/// A value at `path` (for the error).
struct At(String);

impl At {
    fn child(&self, key: &str) -> Self {
        if self.0.is_empty() {
            Self(key.to_owned())
        } else {
            Self(format!("{}.{key}", self.0))
        }
    }

    fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }
}

impl<'de> DeserializeSeed<'de> for At {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for At {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("`{}` is not a finite number", self.0)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.index(items.len()))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut seen = HashSet::new();
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = self.child(&key);
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key `{}`", path.0)));
            }
            let value = map.next_value_seed(path)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_named_at_any_depth() {
        let err = parse(br#"{"p": 0.5, "p": 0.9}"#).unwrap_err();
        assert_eq!(err.field, "p");
        let err = parse(br#"{"sft": {"steps": 5, "steps": 6}}"#).unwrap_err();
        assert_eq!(err.field, "sft.steps");
        let err = parse(br#"{"rows": [{"a": 1}, {"a": 1, "a": 2}]}"#).unwrap_err();
        assert_eq!(err.field, "rows[1].a");
    }

    #[test]
    fn valid_json_reads_as_serde_json_reads_it() {
        let text = br#"{"a": [1, -2, 3.5, 1e300, 18446744073709551615], "b": {"c": null, "d": "x"}, "e": true}"#;
        let strict = parse(text).unwrap();
        let plain: Value = serde_json::from_slice(text).unwrap();
        assert_eq!(strict, plain);
        assert_eq!(parse(b"{} trailing").unwrap_err().field, "(request)");
        assert_eq!(parse(b"{\"a\": ").unwrap_err().field, "(request)");
    }
}
