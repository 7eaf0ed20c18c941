//! The fixed, small vocabulary that turns prompts, tool calls and observations into
//! token IDs and back.
//!
//! ## Design
//! - The vocabulary is a constant list: special tokens first, then word pieces (each
//!   word of the language, the tools and the observations, with and without a leading
//!   space), then every printable ASCII character and the newline. Its size is
//!   [`Tokenizer::vocab_size`] (473), small enough for a tiny transformer.
//! - Encoding is greedy longest match over the pieces, so it is deterministic, and since
//!   every printable ASCII character is a piece of its own, `decode(encode(s)) == s` for
//!   every string over printable ASCII and `\n`, which covers everything the
//!   environment writes. Any other character becomes [`UNK`].
//! - Special tokens are never produced by encoding text; they enter a sequence only
//!   through the harness (or a policy emitting [`END`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Padding (right padding in batches).
pub const PAD: u32 = 0;
/// A character outside the vocabulary.
pub const UNK: u32 = 1;
/// Start of an episode's prompt.
pub const BOS: u32 = 2;
/// The harness hands the turn to the model: the next token is generated.
pub const CALL: u32 = 3;
/// The model ends its action (generated, and trained on).
pub const END: u32 = 4;
/// Start of a tool observation written by the harness.
pub const OBS: u32 = 5;

const SPECIALS: [&str; 6] = ["<pad>", "<unk>", "<bos>", "<call>", "<end>", "<obs>"];

/// Words that get a piece of their own, plain and with a leading space.
const WORDS: &[&str] = &[
    // the language
    "def",
    "if",
    "else",
    "for",
    "in",
    "range",
    "while",
    "return",
    "end",
    "and",
    "or",
    "not",
    "true",
    "false",
    "len",
    // names the task generator uses
    "xs",
    "nums",
    "values",
    "arr",
    "items",
    "data",
    "best",
    "top",
    "result",
    "acc",
    "total",
    "count",
    "found",
    "prev",
    "first",
    "second",
    "out",
    "prod",
    "run",
    "ok",
    "idx",
    "pos",
    "x",
    "v",
    "n",
    "e",
    "item",
    "i",
    "j",
    "k",
    "p",
    "res",
    "ans",
    "cur",
    "part",
    "size",
    "start",
    "spare",
    "tmp",
    "idx",
    // neutral function names and the words descriptive names are made of (a name such
    // as `sum_above` is several pieces, so no token stands for one problem)
    "solve",
    "compute",
    "calc",
    "process",
    "helper",
    "check",
    "f",
    "g",
    "find",
    "max",
    "min",
    "last",
    "select",
    "above",
    "below",
    "least",
    "most",
    "even",
    "odd",
    "any",
    "_",
    // tools and the action format
    "run_tests",
    "read_code",
    "write_code",
    "finish",
    "insert",
    "delete",
    "replace",
    // prompt and observation words
    "task",
    "fix",
    "so",
    "that",
    "all",
    "tests",
    "test",
    "pass",
    "passed",
    "failed",
    "fail",
    "spec",
    "tools",
    "expected",
    "got",
    "error",
    "line",
    "lines",
    "is",
    "now",
    "the",
    "of",
    "a",
    "an",
    "list",
    "value",
    "values",
    "largest",
    "smallest",
    "sum",
    "number",
    "index",
    "elements",
    "element",
    "greater",
    "than",
    "equal",
    "to",
    "nonempty",
    "each",
    "prefix",
    "product",
    "sorted",
    "positive",
    "no",
    "with",
    "has",
    "code",
    "call",
    "name",
    "defined",
    "out",
    "step",
    "limit",
    "exceeded",
    "expected",
    "int",
    "bool",
    "unknown",
    "ended",
    "without",
    "returning",
    "empty",
    "deleted",
    "inserted",
    "before",
    "after",
    "at",
    "executor",
    "crashed",
    "environment",
    "fault",
    "malformed",
    "block",
    "order",
    "or",
    "returns",
    "second",
    "ascending",
    "otherwise",
    "-1",
    "must",
    // specification words of the grammar
    "some",
    "every",
    "there",
    "none",
    "are",
    "over",
    "plus",
    "minus",
    "times",
    "negated",
    "running",
    "sums",
    "products",
    "largest",
    "other",
    "length",
    "true",
];

/// Multi-character symbols with a piece of their own (plain and with a leading space).
const SYMBOLS: &[&str] = &[
    "==", "!=", "<=", ">=", "()", "):", "  ", "=", "<", ">", "+", "-", "*", "/", "%", "[", "(",
    "\"",
];

/// The tokenizer: piece strings and the lookup for greedy encoding.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    pieces: Vec<String>,
    lookup: BTreeMap<String, u32>,
    longest: usize,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self::new()
    }
}

impl Tokenizer {
    /// Builds the fixed vocabulary (see the module docs for its order).
    pub fn new() -> Self {
        let mut pieces: Vec<String> = SPECIALS.iter().map(|s| (*s).to_owned()).collect();
        let mut seen: std::collections::BTreeSet<String> = pieces.iter().cloned().collect();
        let mut push = |piece: String, pieces: &mut Vec<String>| {
            if seen.insert(piece.clone()) {
                pieces.push(piece);
            }
        };
        for word in WORDS.iter().chain(SYMBOLS) {
            push((*word).to_owned(), &mut pieces);
            push(format!(" {word}"), &mut pieces);
        }
        for digit in '0'..='9' {
            push(format!(" {digit}"), &mut pieces);
        }
        push("\n".to_owned(), &mut pieces);
        for code in 0x20u8..0x7f {
            push(char::from(code).to_string(), &mut pieces);
        }
        let lookup = pieces
            .iter()
            .enumerate()
            .skip(SPECIALS.len())
            .map(|(i, p)| (p.clone(), i as u32))
            .collect();
        let longest = pieces.iter().map(String::len).max().unwrap_or(1);
        Self {
            pieces,
            lookup,
            longest,
        }
    }

    /// Number of token IDs (IDs are `0..vocab_size`).
    pub fn vocab_size(&self) -> usize {
        self.pieces.len()
    }

    /// The piece string of every ID, in ID order (specials as `<name>`).
    pub fn pieces(&self) -> &[String] {
        &self.pieces
    }

    /// Greedy longest-match encoding of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(text.len() / 2);
        let mut pos = 0;
        while pos < bytes.len() {
            let max_len = self.longest.min(bytes.len() - pos);
            let hit = (1..=max_len).rev().find_map(|len| {
                text.get(pos..pos + len)
                    .and_then(|piece| self.lookup.get(piece))
                    .map(|&id| (id, len))
            });
            if let Some((id, len)) = hit {
                out.push(id);
                pos += len;
            } else {
                out.push(UNK);
                // Skip one whole character, never half of a UTF-8 sequence.
                pos += text[pos..].chars().next().map_or(1, char::len_utf8);
            }
        }
        out
    }

    /// Concatenates the pieces of `ids` (special tokens print as `<name>`; IDs outside
    /// the vocabulary print as `<?>`).
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&id| self.pieces.get(id as usize).map_or("<?>", String::as_str))
            .collect()
    }

    /// Decodes only the text pieces, dropping special tokens.
    pub fn decode_text(&self, ids: &[u32]) -> String {
        ids.iter()
            .filter(|&&id| id as usize >= SPECIALS.len())
            .map(|&id| self.pieces.get(id as usize).map_or("<?>", String::as_str))
            .collect()
    }

    /// Whether `id` is one of the special tokens.
    pub fn is_special(id: u32) -> bool {
        (id as usize) < SPECIALS.len()
    }
}

/// The shared tokenizer instance.
pub fn tokenizer() -> &'static Tokenizer {
    static INSTANCE: OnceLock<Tokenizer> = OnceLock::new();
    INSTANCE.get_or_init(Tokenizer::new)
}

/// Version tag stored in every record, bumped whenever the vocabulary changes.
pub const TOKENIZER_VERSION: &str = "arlbook-agent-vocab-2";

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn vocabulary_is_small_and_specials_come_first() {
        let t = Tokenizer::new();
        assert_eq!(t.vocab_size(), 473);
        assert_eq!(t.pieces()[END as usize], "<end>");
        assert_eq!(t.pieces()[PAD as usize], "<pad>");
    }

    #[test]
    fn code_line_uses_word_pieces() {
        let t = Tokenizer::new();
        let ids = t.encode("best = xs[0]");
        assert_eq!(t.decode(&ids), "best = xs[0]");
        assert_eq!(ids.len(), 6, "{ids:?}");
    }

    #[test]
    fn unknown_characters_become_unk() {
        let t = Tokenizer::new();
        assert_eq!(t.encode("é"), vec![UNK]);
    }

    proptest! {
        #[test]
        fn printable_ascii_round_trips(text in "[ -~\n]{0,80}") {
            let t = tokenizer();
            prop_assert_eq!(t.decode(&t.encode(&text)), text);
        }
    }
}
