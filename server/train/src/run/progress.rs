//! A one-line progress display on standard error (redrawn in place on a terminal,
//! one line per step otherwise).

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};

use arlbook_core::metrics::MetricsRow;

/// The progress display.
#[derive(Debug)]
pub struct Progress {
    terminal: bool,
    drawn: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    /// A display on standard error.
    pub fn new() -> Self {
        Self {
            terminal: std::io::stderr().is_terminal(),
            drawn: false,
        }
    }

    /// Shows one metrics row.
    pub fn show(&mut self, row: &MetricsRow) {
        let stage = row.stage.name();
        let step = row.step;
        let total = row.steps.unwrap_or(0);
        let width = 20;
        let filled = (step * width).checked_div(total).unwrap_or(0).min(width);
        let bar: String = "#".repeat(filled) + &".".repeat(width - filled);
        // Rows outside a stage's steps (the selection, the gate) have no bar.
        let mut line = if total > 0 {
            format!("{stage:<10} {step:>5}/{total:<5} [{bar}]")
        } else {
            format!("{stage:<10} {step:>5}")
        };
        for (value, label) in [
            (row.loss, "loss"),
            (row.success_rate, "success"),
            (row.val_success, "val"),
            (row.tf_tool_accuracy, "tf_tool"),
            (row.tf_line_accuracy, "tf_line"),
            (row.tf_text_exact, "tf_text"),
            (row.clip_fraction_high, "clip_hi"),
            (row.step_s, "s/step"),
        ] {
            if let Some(v) = value {
                let _ = write!(line, "  {label} {v:.3}");
            }
        }
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.drawn = true;
    }

    /// Ends the in-place line.
    pub fn finish(&mut self) {
        if self.terminal && self.drawn {
            eprintln!();
        }
        self.drawn = false;
    }

    /// Prints a message on its own line.
    pub fn note(&mut self, message: &str) {
        self.finish();
        eprintln!("{message}");
    }
}
