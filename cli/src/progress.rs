//! Progress lines on stderr: redrawn in place on a terminal, one plain line
//! per update when stderr is a file or a pipe (so logs hold no carriage-return
//! fragments).

use std::io::{IsTerminal, Write};

/// Prints a progress update.
pub fn line(msg: &str) {
    let mut e = std::io::stderr().lock();
    if e.is_terminal() {
        let _ = write!(e, "\r{msg}");
    } else {
        let _ = writeln!(e, "{msg}");
    }
    let _ = e.flush();
}

/// Ends a line of in-place updates (a no-op when stderr is not a terminal).
pub fn end_line(shown: bool) {
    if shown && std::io::stderr().is_terminal() {
        eprintln!();
    }
}
