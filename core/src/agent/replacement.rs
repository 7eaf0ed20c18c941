//! The smallest replacement that turns one line into another: what the teacher writes
//! when the harness has the `replace` tool (`replace(line, "old", "new")`, `old`
//! unique on its line) or the `edit` tool (`edit("old", "new")`, `old` unique in the
//! whole file).
//!
//! Both lines are cut into pieces: runs of letters, digits and `_` (a name or a
//! number), the two-character operators `==`, `!=`, `<=`, `>=`, and single characters
//! otherwise. The pieces the two lines share at the start and at the end are dropped;
//! `old` is what is left of the current line and `new` what is left of the wanted one,
//! so a name or a number is never cut in half. If `old` is empty (the repair only adds
//! text) or is not unique where the tool looks for it, one more shared piece is taken
//! into both, on the left while there is one, then on the right, until `old` is not
//! empty and unique. For `replace` the whole line always is; for `edit` a line that
//! occurs twice in the file has no such replacement. `edit` widens by words: a space at
//! either edge of its `old` takes the piece beyond it in too, so `old` starts and ends
//! with a word or a sign (`return count` -> `return -count` is
//! `("return count", "return -count")`, not `("return ", "return -")`).
//!
//! `best = 0` -> `best = xs[0]` gives `replace(2, "0", "xs[0]")`; `if x > best:` ->
//! `if x >= best:` gives `(">", ">=")`. In a file where `0` occurs on another line too,
//! the `edit` is `edit("= 0", "= xs[0]")`.

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
pub(crate) fn pieces(line: &str) -> Vec<&str> {
    piece_bounds(line)
        .windows(2)
        .map(|w| &line[w[0]..w[1]])
        .collect()
}

/// How many times `needle` occurs in `haystack`, overlapping occurrences counted (so
/// `aa` occurs twice in `aaa`); 0 for an empty needle.
pub fn occurrences(haystack: &str, needle: &str) -> usize {
    if needle.is_empty() {
        return 0;
    }
    haystack
        .char_indices()
        .filter(|&(at, _)| haystack[at..].starts_with(needle))
        .count()
}

/// How a replacement grows when its `old` is not yet unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Widen {
    /// One piece at a time.
    ByPiece,
    /// One piece at a time, and never a space at an edge of `old`.
    ByWord,
}

/// The `(old, new)` of the smallest replacement turning `current` into `wanted` whose
/// `old` satisfies `unique`, widening as `widen` says; `None` when the lines are equal
/// or not even the whole line is unique.
fn smallest_where(
    current: &str,
    wanted: &str,
    widen: Widen,
    unique: impl Fn(&str) -> bool,
) -> Option<(String, String)> {
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
    let is_space = |piece: &str| piece.chars().all(char::is_whitespace);
    loop {
        if widen == Widen::ByWord {
            // A space at an edge of `old` takes the piece beyond it in too.
            while prefix > 0 && prefix < have.len() - suffix && is_space(have[prefix]) {
                prefix -= 1;
            }
            while suffix > 0
                && have.len() - suffix > prefix
                && is_space(have[have.len() - suffix - 1])
            {
                suffix -= 1;
            }
        }
        let old = have[prefix..have.len() - suffix].concat();
        if !old.is_empty() && unique(&old) {
            let new = want[prefix..want.len() - suffix].concat();
            return Some((old, new));
        }
        if prefix > 0 {
            prefix -= 1;
        } else if suffix > 0 {
            suffix -= 1;
        } else {
            return None;
        }
    }
}

/// The `(old, new)` of the smallest `replace` turning `current` into `wanted`, `old`
/// unique on the line (see the module docs); `None` when the lines are equal.
pub fn smallest_replacement(current: &str, wanted: &str) -> Option<(String, String)> {
    smallest_where(current, wanted, Widen::ByPiece, |old| {
        occurrences(current, old) == 1
    })
    // An empty line: `old` is the whole (empty) line.
    .or_else(|| (current != wanted).then(|| (current.to_owned(), wanted.to_owned())))
}

/// The `(old, new)` of the smallest `edit` turning line `index` (0-based) of `code`
/// into `wanted`, `old` unique in the whole file (see the module docs); `None` when
/// the lines are equal or the line occurs twice, so no text of it is unique.
pub fn smallest_unique_edit(
    code: &[String],
    index: usize,
    wanted: &str,
) -> Option<(String, String)> {
    let current = code.get(index)?;
    smallest_where(current, wanted, Widen::ByWord, |old| {
        code.iter()
            .map(|line| occurrences(line, old))
            .sum::<usize>()
            == 1
    })
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
    fn occurrences_count_overlapping_matches() {
        assert_eq!(occurrences("aaa", "aa"), 2);
        assert_eq!(occurrences("best = xs[0]", "0"), 1);
        assert_eq!(occurrences("x", ""), 0);
        assert_eq!(occurrences("", "x"), 0);
    }

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|&l| l.to_owned()).collect()
    }

    #[test]
    fn an_edit_widens_by_words_until_its_old_text_is_unique_in_the_file() {
        let code = lines(&[
            "def f(xs):",
            "best = 0",
            "for x in xs:",
            "if x > best:",
            "best = x",
            "end",
            "end",
            "return best",
        ]);
        // `0` is unique in this file.
        assert_eq!(
            smallest_unique_edit(&code, 1, "best = xs[0]"),
            Some(("0".into(), "xs[0]".into()))
        );
        // `>` too.
        assert_eq!(
            smallest_unique_edit(&code, 3, "if x >= best:"),
            Some((">".into(), ">=".into()))
        );
        // `x` is everywhere: `= x` is unique, and no edge is a space.
        assert_eq!(
            smallest_unique_edit(&code, 4, "best = best"),
            Some(("= x".into(), "= best".into()))
        );
        // `end` occurs twice as a whole line: no unique text.
        assert_eq!(smallest_unique_edit(&code, 5, "end"), None);
        assert_eq!(smallest_unique_edit(&code, 6, "return best"), None);
        assert_eq!(smallest_unique_edit(&code, 99, "x"), None);
        let twice = lines(&["def f(xs):", "n = 0", "count = 0", "return n"]);
        assert_eq!(
            smallest_unique_edit(&twice, 2, "count = 1"),
            Some(("count = 0".into(), "count = 1".into()))
        );
    }

    #[test]
    fn an_edit_applied_to_the_file_produces_the_wanted_line() {
        let code = lines(&[
            "def f(xs):",
            "count = 0",
            "for i in range(0, len(xs)):",
            "if xs[i] > xs[i - 1]:",
            "count = count + 1",
            "end",
            "end",
            "return count",
        ]);
        let wanted = [
            "count = 1",
            "for i in range(1, len(xs)):",
            "if xs[i] >= xs[i - 1]:",
            "count = count",
            "return -count",
            "count = count - 1",
        ];
        for (index, current) in code.iter().enumerate().skip(1) {
            for want in wanted {
                if let Some((old, new)) = smallest_unique_edit(&code, index, want) {
                    let total: usize = code.iter().map(|l| occurrences(l, &old)).sum();
                    assert_eq!(total, 1, "{old} in the file");
                    assert_eq!(old.trim(), old, "{current} -> {want}");
                    assert_eq!(apply(current, &old, &new), want, "{current} -> {want}");
                }
            }
        }
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
