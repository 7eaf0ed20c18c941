//! Writing to stdout the way command-line tools should: a closed pipe
//! (`arlbook ... | head`) ends the program quietly instead of panicking.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes one line to stdout. On a closed pipe the reader has all it wants, so the
/// process exits with success; any other write error is reported and exits with 1.
pub fn write_line(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(err) = writeln!(out, "{args}").and_then(|()| out.flush()) {
        if err.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: writing to stdout: {err}");
        std::process::exit(1);
    }
}

/// `println!` that tolerates a closed pipe (see [`write_line`]).
macro_rules! outln {
    () => {
        $crate::output::write_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::write_line(format_args!($($arg)*))
    };
}

pub(crate) use outln;
