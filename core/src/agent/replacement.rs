//! The smallest `replace(line, "old", "new")` that turns one line into another: what
//! the teacher writes when the harness has the `replace` tool.
//!
//! Both lines are cut into pieces: runs of letters, digits and `_` (a name or a
//! number), the two-character operators `==`, `!=`, `<=`, `>=`, and single characters
//! otherwise. The pieces the two lines share at the start and at the end are dropped;
//! `old` is what is left of the current line and `new` what is left of the wanted one,
//! so a name or a number is never cut in half. If `old` is empty (the repair only adds
//! text) or occurs more than once on the line, one more shared piece is taken into
//! both, on the left while there is one, then on the right, until `old` is not empty
//! and occurs exactly once (the whole line always does).
//!
//! `best = 0` -> `best = xs[0]` gives `replace(2, "0", "xs[0]")`; `if x > best:` ->
//! `if x >= best:` gives `(">", ">=")`.

/// Whether `c` belongs to a name or a number.
fn is_word_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The byte offsets where `line`'s pieces start, and its length at the end.
fn piece_bounds(line: &str) -> Vec<usize> {
    let bytes = line.as_bytes();
    let mut bounds = vec![0];
    let mut i = 0;
    while i < bytes.len() {
        let step = if is_word_char(bytes[i]) {
            bytes[i..].iter().take_while(|&&c| is_word_char(c)).count()
        } else if matches!(&bytes[i..], [b'=' | b'!' | b'<' | b'>', b'=', ..]) {
            2
        } else {
            // Whole characters, so a cut never splits a multi-byte one.
            line[i..].chars().next().map_or(1, char::len_utf8)
        };
        i += step;
        bounds.push(i);
    }
    bounds
}

/// The pieces of `line`.
fn pieces(line: &str) -> Vec<&str> {
    piece_bounds(line)
        .windows(2)
        .map(|w| &line[w[0]..w[1]])
        .collect()
}

/// The `(old, new)` of the smallest replacement turning `current` into `wanted` (see
/// the module docs); `None` when the lines are equal.
pub fn smallest_replacement(current: &str, wanted: &str) -> Option<(String, String)> {
    if current == wanted {
        return None;
    }
    let have = pieces(current);
    let want = pieces(wanted);
    let shortest = have.len().min(want.len());
    let mut prefix = have.iter().zip(&want).take_while(|(a, b)| a == b).count();
    let mut suffix = have
        .iter()
        .rev()
        .zip(want.iter().rev())
        .take(shortest - prefix)
        .take_while(|(a, b)| a == b)
        .count();
    loop {
        let old = have[prefix..have.len() - suffix].concat();
        if !old.is_empty() && current.matches(old.as_str()).count() == 1 {
            let new = want[prefix..want.len() - suffix].concat();
            return Some((old, new));
        }
        if prefix > 0 {
            prefix -= 1;
        } else if suffix > 0 {
            suffix -= 1;
        } else {
            // `old` is the whole line, which occurs once unless the line is empty.
            return Some((current.to_owned(), wanted.to_owned()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replacement(current: &str, wanted: &str) -> (String, String) {
        smallest_replacement(current, wanted).unwrap()
    }

    /// Applies `(old, new)` as `CodeEnv::replace_text` does.
    fn apply(current: &str, old: &str, new: &str) -> String {
        assert_eq!(current.matches(old).count(), 1, "{old} in {current}");
        current.replacen(old, new, 1).trim().to_owned()
    }

    #[test]
    fn pieces_keep_names_numbers_and_operators_whole() {
        assert_eq!(
            pieces("if x_1 >= xs[10]:"),
            ["if", " ", "x_1", " ", ">=", " ", "xs", "[", "10", "]", ":"]
        );
    }

    #[test]
    fn worked_examples() {
        assert_eq!(
            replacement("best = 0", "best = xs[0]"),
            ("0".into(), "xs[0]".into())
        );
        assert_eq!(
            replacement("if x > best:", "if x >= best:"),
            (">".into(), ">=".into())
        );
        assert_eq!(
            replacement("total = total + x", "total = total - x"),
            ("+".into(), "-".into())
        );
        // A repair that only adds text takes the piece before it.
        assert_eq!(
            replacement("return best", "return best + 1"),
            ("best".into(), "best + 1".into())
        );
        // `x` occurs in `xs` too, so the replacement grows until it is unique.
        assert_eq!(
            replacement("if x > xs[0]:", "if y > xs[0]:"),
            ("if x".into(), "if y".into())
        );
        assert_eq!(smallest_replacement("end", "end"), None);
    }

    #[test]
    fn the_replacement_always_produces_the_wanted_line() {
        let lines = [
            "best = 0",
            "best = xs[0]",
            "for i in range(0, len(xs)):",
            "for i in range(1, len(xs)):",
            "if xs[i] > xs[i - 1]:",
            "if xs[i] >= xs[i - 1]:",
            "count = count + 1",
            "count = count",
            "return count",
            "return -count",
            "x = x",
            "x = x + x",
        ];
        for current in lines {
            for wanted in lines {
                if let Some((old, new)) = smallest_replacement(current, wanted) {
                    assert!(!old.is_empty(), "{current} -> {wanted}");
                    assert_eq!(apply(current, &old, &new), wanted, "{current} -> {wanted}");
                }
            }
        }
    }
}
