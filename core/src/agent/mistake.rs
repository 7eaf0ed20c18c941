//! Refused-edit demonstrations: the teacher makes one edit whose text the file does
//! not have, reads the refusal, and then makes the right edit.
//!
//! A policy trained on the teacher's episodes alone has never seen its own edit
//! refused, and it is exactly there that most of its failed episodes go wrong: after
//! `error: the code does not contain "..."` it writes fragments until the malformed
//! calls end the episode. [`MistakenTeacher`] puts that state into the
//! demonstrations. Its first `edit` names a text the code does not contain, made the way
//! the policy's own wrong edits look (the right edit's text with one lexeme changed: a
//! number, an operator, or a name of the listing); every later call is the teacher's.
//! The loss of such a demonstration starts after the refused call, so the mistake is
//! context and never a target (`trained_from` in the trainer's SFT).

use super::action::ToolCall;
use super::env::parse_listing;
use super::lang::variable_names;
use super::policy::{Generation, Policy, PolicyInfo, Teacher, last_observation, scripted};
use super::replacement::{occurrences, pieces};
use crate::rng::RandomStream;

/// Operators a changed operator is drawn among (same class: comparisons, arithmetic).
const COMPARISONS: [&str; 6] = ["<", "<=", ">", ">=", "==", "!="];
const ARITHMETIC: [&str; 4] = ["+", "-", "*", "%"];

/// What a piece may be changed into: another small number, another operator of its
/// class, or another name of the listing.
fn alternatives(piece: &str, names: &[String]) -> Vec<String> {
    if piece.chars().all(|c| c.is_ascii_digit()) {
        return (0..10)
            .map(|n| n.to_string())
            .filter(|n| n != piece)
            .collect();
    }
    for class in [&COMPARISONS[..], &ARITHMETIC[..]] {
        if class.contains(&piece) {
            return class
                .iter()
                .filter(|op| **op != piece)
                .map(|op| (*op).to_owned())
                .collect();
        }
    }
    if piece.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return names
            .iter()
            .filter(|name| name.as_str() != piece)
            .cloned()
            .collect();
    }
    Vec::new()
}

/// Texts the right edit's `old` could be mistaken for: `old` with one piece (the
/// teacher's own cut, [`super::replacement`]) changed,
/// none of them found anywhere in `code` (so `edit` refuses each), deduplicated, in
/// a fixed order.
pub fn mistaken_texts(code: &[String], old: &str) -> Vec<String> {
    let mut names: Vec<String> = code.iter().flat_map(|l| variable_names(l)).collect();
    names.sort();
    names.dedup();
    let parts = pieces(old);
    let mut out: Vec<String> = Vec::new();
    for (i, piece) in parts.iter().enumerate() {
        for alternative in alternatives(piece, &names) {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                text.push_str(if i == j { &alternative } else { part });
            }
            let absent = code.iter().all(|line| occurrences(line, &text) == 0);
            if absent && !out.contains(&text) {
                out.push(text);
            }
        }
    }
    out
}

/// The teacher, except that its first `edit` names a text the code lacks (drawn
/// from [`mistaken_texts`] with `rng`); it then goes on as the teacher would.
#[derive(Debug, Clone)]
pub struct MistakenTeacher {
    teacher: Teacher,
    rng: RandomStream,
    /// The call index of the refused edit, once made.
    mistake_at: Option<usize>,
    calls: usize,
}

impl MistakenTeacher {
    /// Wraps `teacher`; `rng` draws the mistaken text.
    pub fn new(teacher: Teacher, rng: RandomStream) -> Self {
        Self {
            teacher,
            rng,
            mistake_at: None,
            calls: 0,
        }
    }

    /// The index of the call that made the mistake (`None`: no mistake was possible,
    /// the episode is the teacher's own).
    pub fn mistake_at(&self) -> Option<usize> {
        self.mistake_at
    }

    /// The mistaken version of `call`, when it is an `edit` made right after the
    /// listing `observation`.
    fn mistake(&mut self, observation: Option<&str>, call: &ToolCall) -> Option<ToolCall> {
        let ToolCall::EditText { old, new } = call else {
            return None;
        };
        let code = parse_listing(observation?)?;
        let texts = mistaken_texts(&code, old);
        if texts.is_empty() {
            return None;
        }
        let pick = self.rng.below(texts.len() as u32) as usize;
        Some(ToolCall::EditText {
            old: texts[pick].clone(),
            new: new.clone(),
        })
    }
}

impl Policy for MistakenTeacher {
    fn info(&self) -> PolicyInfo {
        let mut info = self.teacher.info();
        "scripted-1-mistaken".clone_into(&mut info.version);
        info
    }

    fn next_tokens(
        &mut self,
        context: &[u32],
        max_new_tokens: usize,
        _: &mut RandomStream,
    ) -> Generation {
        let observation = last_observation(context);
        let mut call = self.teacher.decide(observation.as_deref());
        if self.mistake_at.is_none()
            && let Some(wrong) = self.mistake(observation.as_deref(), &call)
        {
            self.mistake_at = Some(self.calls);
            call = wrong;
        }
        self.calls += 1;
        scripted(&call.to_text(), max_new_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::harness::{EpisodeIds, HarnessConfig, run_episode};
    use crate::agent::key::Split;
    use crate::agent::task::{article_example, generate_task};

    #[test]
    fn pieces_split_words_spaces_and_operators() {
        assert_eq!(pieces("best = 0"), vec!["best", " ", "=", " ", "0"]);
        assert_eq!(pieces("] +"), vec!["]", " ", "+"]);
        assert_eq!(pieces(""), Vec::<&str>::new());
    }

    #[test]
    fn every_mistaken_text_is_absent_from_the_code_and_differs_in_one_piece() {
        // `def find_max(xs):`, `best = 0`, `for x in xs:`, `if x > best:`, ...
        let listing = article_example().buggy_code;
        let texts = mistaken_texts(&listing, "best = 0");
        assert!(!texts.is_empty());
        for text in &texts {
            assert!(listing.iter().all(|l| !l.contains(text.as_str())), "{text}");
            let (a, b) = (pieces(text), pieces("best = 0"));
            assert_eq!(a.len(), b.len(), "{text}");
            assert_eq!(
                a.iter().zip(&b).filter(|(x, y)| x != y).count(),
                1,
                "{text}"
            );
        }
        // A number becomes another number, a name another name of the listing.
        assert!(texts.contains(&"best = 1".to_owned()));
        assert!(texts.contains(&"x = 0".to_owned()));
        // `>` is in the code, so `x > best` as such is never offered; `x < best` is.
        let compare = mistaken_texts(&listing, "x > best");
        assert!(compare.contains(&"x < best".to_owned()));
        assert!(!compare.contains(&"x > best".to_owned()));
    }

    #[test]
    fn a_mistaken_teacher_is_refused_once_then_repairs_the_task() {
        let harness = HarnessConfig {
            edit_tool: true,
            listing_on_refusal: true,
            ..HarnessConfig::default()
        };
        let mut mistaken_episodes = 0;
        for seed in 0..40 {
            let task = generate_task(Split::Train, seed);
            let teacher = Teacher::for_harness(&task, &harness);
            let mut policy = MistakenTeacher::new(teacher, RandomStream::new(seed, 1));
            let record = run_episode(&task, &mut policy, &harness, EpisodeIds::default(), seed);
            assert!(record.success(), "task {seed}: the teacher recovers");
            let Some(at) = policy.mistake_at() else {
                continue;
            };
            mistaken_episodes += 1;
            let refused = &record.calls[at];
            assert!(
                refused
                    .observation_text
                    .starts_with("error: the code does not contain"),
                "{}",
                refused.observation_text
            );
            // With the listing after the refusal, the next call is the right edit.
            let next = record.calls[at + 1].call.as_ref().unwrap();
            assert!(matches!(
                next,
                ToolCall::EditText { .. } | ToolCall::WriteCode { .. }
            ));
            assert!(record.calls[at + 1].observation_text.starts_with("ok:"));
        }
        assert!(mistaken_episodes >= 30, "{mistaken_episodes} of 40");
    }
}
