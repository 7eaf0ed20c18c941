//! A small TeX subset turned into MathML, which browsers render natively.
//!
//! Enough for the notebook's formulas: letters, numbers, operators, groups `{…}`,
//! sub- and superscripts, `\frac`, `\sqrt`, `\hat`, `\bar`, `\tilde`, `\binom`,
//! `\text`/`\mathrm`/`\operatorname`, `\mathbb{E}`, Greek letters and common symbols.
//! Anything else is an error, so a typo in a chapter fails a test instead of showing
//! raw TeX to a reader.

/// Converts `tex` to a `<math>` element; `display` centres it on its own line.
pub fn to_mathml(tex: &str, display: bool) -> Result<String, String> {
    let chars: Vec<char> = tex.chars().collect();
    let mut parser = Parser { chars, at: 0 };
    let body = parser.sequence(None)?;
    let mode = if display { " display=\"block\"" } else { "" };
    Ok(format!(
        "<math xmlns=\"http://www.w3.org/1998/Math/MathML\"{mode}><mrow>{body}</mrow></math>"
    ))
}

/// Converts a paragraph with inline `$…$` math into HTML (text escaped).
pub fn paragraph_html(text: &str) -> Result<String, String> {
    let mut html = String::new();
    for (i, part) in text.split('$').enumerate() {
        if i % 2 == 0 {
            html.push_str(&escape(part));
        } else {
            html.push_str(&to_mathml(part, false)?);
        }
    }
    if text.matches('$').count() % 2 == 1 {
        return Err(format!("unbalanced `$` in: {text}"));
    }
    Ok(html)
}

/// Escapes text for HTML.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// Atoms with their scripts until `close` (or the end when `None`).
    fn sequence(&mut self, close: Option<char>) -> Result<String, String> {
        let mut out = String::new();
        loop {
            self.skip_spaces();
            match self.peek() {
                None if close.is_none() => return Ok(out),
                None => return Err("a `{` is never closed".to_owned()),
                Some(c) if Some(c) == close => {
                    self.at += 1;
                    return Ok(out);
                }
                Some('}') => return Err("unexpected `}`".to_owned()),
                Some(_) => {
                    let base = self.atom()?;
                    out.push_str(&self.scripts(base)?);
                }
            }
        }
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// Attaches `_x`, `^y` or both to `base`.
    fn scripts(&mut self, base: String) -> Result<String, String> {
        let mut sub = None;
        let mut sup = None;
        loop {
            self.skip_spaces();
            match self.peek() {
                Some('_') if sub.is_none() => {
                    self.at += 1;
                    sub = Some(self.argument()?);
                }
                Some('^') if sup.is_none() => {
                    self.at += 1;
                    sup = Some(self.argument()?);
                }
                _ => break,
            }
        }
        Ok(match (sub, sup) {
            (None, None) => base,
            (Some(s), None) => format!("<msub>{base}{s}</msub>"),
            (None, Some(p)) => format!("<msup>{base}{p}</msup>"),
            (Some(s), Some(p)) => format!("<msubsup>{base}{s}{p}</msubsup>"),
        })
    }

    /// One atom wrapped so it is a single MathML child.
    fn argument(&mut self) -> Result<String, String> {
        self.skip_spaces();
        let atom = self.atom()?;
        Ok(format!("<mrow>{atom}</mrow>"))
    }

    /// A braced group's raw text (for `\text{…}`).
    fn raw_group(&mut self) -> Result<String, String> {
        self.skip_spaces();
        if self.peek() != Some('{') {
            return Err("expected `{`".to_owned());
        }
        self.at += 1;
        let start = self.at;
        while let Some(c) = self.peek() {
            if c == '}' {
                let text: String = self.chars[start..self.at].iter().collect();
                self.at += 1;
                return Ok(text);
            }
            self.at += 1;
        }
        Err("a `{` is never closed".to_owned())
    }

    fn atom(&mut self) -> Result<String, String> {
        let c = self.peek().ok_or("expected something after `^` or `_`")?;
        self.at += 1;
        match c {
            '{' => Ok(format!("<mrow>{}</mrow>", self.sequence(Some('}'))?)),
            '\\' => self.command(),
            '0'..='9' | '.' => {
                let start = self.at - 1;
                while self.peek().is_some_and(|d| d.is_ascii_digit() || d == '.') {
                    self.at += 1;
                }
                let number: String = self.chars[start..self.at].iter().collect();
                Ok(format!("<mn>{number}</mn>"))
            }
            c if c.is_alphabetic() => Ok(format!("<mi>{c}</mi>")),
            '-' => Ok("<mo>−</mo>".to_owned()),
            '\'' => Ok("<mo>′</mo>".to_owned()),
            '<' => Ok("<mo>&lt;</mo>".to_owned()),
            '>' => Ok("<mo>&gt;</mo>".to_owned()),
            // As in TeX, plain delimiters keep their size (only `\binom` grows its own):
            // MathML would otherwise stretch them to the height of a nearby fraction.
            '(' | ')' | '[' | ']' | '|' => Ok(format!("<mo stretchy=\"false\">{c}</mo>")),
            '+' | '=' | ',' | '/' | '!' | ':' | ';' | '*' => Ok(format!("<mo>{c}</mo>")),
            other => Err(format!("unsupported character `{other}`")),
        }
    }

    fn command(&mut self) -> Result<String, String> {
        let start = self.at;
        while self.peek().is_some_and(char::is_alphabetic) {
            self.at += 1;
        }
        if self.at == start {
            // A one-character command: `\,` `\;` `\{` `\}` `\|`.
            let c = self.peek().ok_or("a lone `\\` at the end")?;
            self.at += 1;
            return match c {
                ',' | ';' | ' ' => Ok("<mspace width=\"0.25em\"/>".to_owned()),
                '{' | '}' => Ok(format!("<mo stretchy=\"false\">{c}</mo>")),
                // `\|` is the double bar of a norm or of KL(p || q), as in TeX.
                '|' => Ok("<mo stretchy=\"false\">‖</mo>".to_owned()),
                other => Err(format!("unknown command `\\{other}`")),
            };
        }
        let name: String = self.chars[start..self.at].iter().collect();
        if let Some(symbol) = identifier(&name) {
            return Ok(format!("<mi>{symbol}</mi>"));
        }
        if let Some(symbol) = operator(&name) {
            return Ok(format!("<mo>{symbol}</mo>"));
        }
        match name.as_str() {
            "frac" => {
                let num = self.argument()?;
                let den = self.argument()?;
                Ok(format!("<mfrac>{num}{den}</mfrac>"))
            }
            "binom" => {
                let n = self.argument()?;
                let k = self.argument()?;
                Ok(format!(
                    "<mrow><mo>(</mo><mfrac linethickness=\"0\">{n}{k}</mfrac><mo>)</mo></mrow>"
                ))
            }
            "sqrt" => Ok(format!("<msqrt>{}</msqrt>", self.argument()?)),
            "hat" | "widehat" | "bar" | "tilde" => {
                let accent = match name.as_str() {
                    "hat" | "widehat" => "^",
                    "bar" => "¯",
                    _ => "~",
                };
                let base = self.argument()?;
                Ok(format!(
                    "<mover accent=\"true\">{base}<mo>{accent}</mo></mover>"
                ))
            }
            "text" => Ok(format!("<mtext>{}</mtext>", escape(&self.raw_group()?))),
            "mathrm" | "operatorname" | "mathbf" => {
                let text = escape(&self.raw_group()?);
                let variant = if name == "mathbf" { "bold" } else { "normal" };
                let tag = if text.chars().all(|c| c.is_ascii_digit()) {
                    "mn"
                } else {
                    "mi"
                };
                Ok(format!("<{tag} mathvariant=\"{variant}\">{text}</{tag}>"))
            }
            "mathbb" => {
                let letter = self.raw_group()?;
                let symbol = match letter.as_str() {
                    "E" => "𝔼",
                    "R" => "ℝ",
                    "P" => "ℙ",
                    other => return Err(format!("no blackboard letter `{other}`")),
                };
                Ok(format!("<mi>{symbol}</mi>"))
            }
            "quad" => Ok("<mspace width=\"1em\"/>".to_owned()),
            "left" | "right" => self.atom(),
            other => Err(format!("unknown command `\\{other}`")),
        }
    }
}

fn identifier(name: &str) -> Option<&'static str> {
    Some(match name {
        "alpha" => "α",
        "beta" => "β",
        "gamma" => "γ",
        "delta" => "δ",
        "epsilon" | "varepsilon" => "ε",
        "theta" => "θ",
        "lambda" => "λ",
        "mu" => "μ",
        "pi" => "π",
        "rho" => "ρ",
        "sigma" => "σ",
        "tau" => "τ",
        "phi" => "φ",
        "Phi" => "Φ",
        "Delta" => "Δ",
        "nabla" => "∇",
        "infty" => "∞",
        "ell" => "ℓ",
        "log" => "log",
        "exp" => "exp",
        "min" => "min",
        "max" => "max",
        "clip" => "clip",
        "std" => "std",
        "mean" => "mean",
        _ => return None,
    })
}

fn operator(name: &str) -> Option<&'static str> {
    Some(match name {
        "cdot" => "·",
        "times" => "×",
        "le" | "leq" => "≤",
        "ge" | "geq" => "≥",
        "ne" | "neq" => "≠",
        "approx" => "≈",
        "to" | "rightarrow" => "→",
        "in" => "∈",
        "sum" => "∑",
        "prod" => "∏",
        "mid" => "|",
        "Vert" => "‖",
        "ldots" | "dots" => "…",
        "pm" => "±",
        "propto" => "∝",
        "sim" => "∼",
        "langle" => "⟨",
        "rangle" => "⟩",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_and_scripts() {
        let math = to_mathml(r"\hat A_i = \frac{r_i - \mu}{\sigma}", true).unwrap();
        assert!(math.contains("display=\"block\""));
        assert!(math.contains("<mfrac>"));
        assert!(math.contains("<msub><mover accent=\"true\"><mrow><mi>A</mi></mrow>"));
        assert!(math.contains("<mi>μ</mi>"));
        assert!(!math.contains('\\'));
    }

    #[test]
    fn sub_and_superscript_together() {
        let math = to_mathml(r"\sum_{i=1}^{G} x", false).unwrap();
        assert!(math.contains("<msubsup><mo>∑</mo>"));
    }

    #[test]
    fn unknown_commands_and_bad_braces_are_errors() {
        assert!(to_mathml(r"\foo", false).is_err());
        assert!(to_mathml(r"{a", false).is_err());
        assert!(to_mathml(r"a}", false).is_err());
        assert!(to_mathml(r"a^", false).is_err());
    }

    #[test]
    fn delimiters_do_not_stretch_and_the_double_bar_is_double() {
        let math = to_mathml(r"\mathrm{KL}(p \,\|\, q) = (\frac{a}{b})", false).unwrap();
        assert!(math.contains("<mo stretchy=\"false\">‖</mo>"), "{math}");
        assert!(math.contains("<mo stretchy=\"false\">(</mo>"), "{math}");
        assert!(!math.contains("<mo>(</mo>"), "{math}");
        assert_eq!(
            to_mathml(r"\Vert", false).unwrap(),
            to_mathml(r"\|", false)
                .unwrap()
                .replace(" stretchy=\"false\"", "")
        );
    }

    #[test]
    fn paragraph_escapes_text_and_converts_math() {
        let html = paragraph_html("if $p < 1$ then <b>").unwrap();
        assert!(html.starts_with("if <math"));
        assert!(html.ends_with("then &lt;b&gt;"));
        assert!(paragraph_html("one $ dollar").is_err());
    }
}
