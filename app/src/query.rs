//! The query string of a page URL: parsing it into pairs and writing pairs back.
//!
//! A figure's state lives in the query so that a link reproduces the view. On a chapter
//! page each key carries the figure's id as a prefix (`bandit.p=0.5`) because several
//! figures share one URL; an `/embed/<figure>` page uses bare keys (`p=0.5`).

use std::fmt::Write as _;

/// Splits `?a=1&b=x%20y` (leading `?` optional) into decoded `(key, value)` pairs.
pub fn parse(query: &str) -> Vec<(String, String)> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (key, value) = part.split_once('=').unwrap_or((part, ""));
            (decode(key), decode(value))
        })
        .collect()
}

/// Joins pairs into `a=1&b=x%20y` (no leading `?`).
pub fn format(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes everything except unreserved characters and `,` (lists stay legible).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~,".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// Decodes `%XX` escapes and `+` (a space in form encoding); bad escapes stay literal.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_decodes_and_skips_empty_parts() {
        let pairs = parse("?p=0.5&&rewards=1%2C0,0&name=a+b&flag");
        assert_eq!(
            pairs,
            vec![
                ("p".into(), "0.5".into()),
                ("rewards".into(), "1,0,0".into()),
                ("name".into(), "a b".into()),
                ("flag".into(), String::new()),
            ]
        );
    }

    #[test]
    fn format_then_parse_round_trips() {
        let pairs = vec![
            ("bandit.p".to_owned(), "0.25".to_owned()),
            ("lengths".to_owned(), "2,4, 4&6".to_owned()),
            ("text".to_owned(), "μ=π%".to_owned()),
        ];
        assert_eq!(parse(&format(&pairs)), pairs);
    }

    #[test]
    fn truncated_escape_is_kept_literally() {
        assert_eq!(parse("a=%4"), vec![("a".into(), "%4".into())]);
        assert_eq!(parse("a=%zz"), vec![("a".into(), "%zz".into())]);
    }
}
