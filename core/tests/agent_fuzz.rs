//! Fuzzing: no program, line or action text can hang or panic the environment.

use arlbook_core::agent::interp::run;
use arlbook_core::agent::lang::parse_line;
use arlbook_core::agent::parse_call;
use arlbook_core::agent::program::parse_program;
use proptest::prelude::*;

const PIECES: &[&str] = &[
    "x", "xs", "i", "best", "0", "1", "-1", "9", "=", "==", "<", ">", "+", "-", "*", "/", "%", "(",
    ")", "[", "]", ",", ":", "if", "else", "for", "in", "range", "while", "return", "end", "and",
    "or", "not", "true", "false", "len", "xs[i]", "x + 1",
];

fn line() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..10).prop_map(|p| p.join(" "))
}

/// Lines drawn from well-formed statements too, so programs often parse and run.
fn statement() -> impl Strategy<Value = String> {
    prop_oneof![
        line(),
        Just("while true:".to_owned()),
        Just("for x in xs:".to_owned()),
        Just("for i in range(0, 1000000000):".to_owned()),
        Just("end".to_owned()),
        Just("xs = xs + xs".to_owned()),
        Just("best = best * best + 1".to_owned()),
        Just("best = xs[i]".to_owned()),
        Just("if x > best:".to_owned()),
        Just("else:".to_owned()),
        Just("return best".to_owned()),
        Just("i = i + 1".to_owned()),
        Just("best = 1".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn interpreter_never_hangs_or_panics(
        body in prop::collection::vec(statement(), 0..14),
        input in prop::collection::vec(-9i64..10, 0..6),
    ) {
        let mut lines = vec!["def f(xs):".to_owned()];
        lines.extend(body);
        if let Ok(function) = parse_program(&lines) {
            // Any outcome is fine; returning at all (within the step limit) is the point.
            let _ = run(&function, &input, 2_000);
        }
    }

    /// Block skeletons that parse, with fuzzed bodies: the runs actually execute.
    #[test]
    fn structured_programs_run_within_the_step_limit(
        opener in prop::sample::select(vec![
            "while true:", "for x in xs:", "for i in range(0, 1000000000):", "if x > best:",
            "while i < len(xs):",
        ]),
        inner in prop::collection::vec(prop_oneof![
            Just("xs = xs + xs".to_owned()),
            Just("best = best * best + 1".to_owned()),
            Just("best = xs[i]".to_owned()),
            Just("i = i + 1".to_owned()),
            Just("best = best / i".to_owned()),
            Just("return best".to_owned()),
            line(),
        ], 0..6),
        input in prop::collection::vec(-9i64..10, 0..6),
    ) {
        let mut lines: Vec<String> =
            ["def f(xs):", "best = 0", "x = 1", "i = 0", opener].iter().map(|s| (*s).to_owned()).collect();
        lines.extend(inner);
        lines.push("end".to_owned());
        lines.push("return best".to_owned());
        if let Ok(function) = parse_program(&lines) {
            let _ = run(&function, &input, 2_000);
        }
    }

    #[test]
    fn parser_never_panics_on_arbitrary_text(text in "[ -~]{0,60}") {
        let _ = parse_line(&text);
        let _ = parse_call(&text);
    }
}
