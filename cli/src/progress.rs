//! Progress lines on stderr: redrawn in place on a terminal, one plain line
//! per update when stderr is a file or a pipe (so logs hold no carriage-return
//! fragments).
//!
//! Progress bars go through [`bar`]: on a terminal an indicatif bar, on
//! anything else the same bar drawn through [`PlainLines`], which turns
//! indicatif's redraws into whole lines — a line only when the text changed,
//! at most one per `gap`, and never a cursor move or `\r`. A text whose only
//! change is its clock (`[00:01:05]`, ticking while a run's measured phase
//! goes on) is written at most once per [`HEARTBEAT`]: a log that says the
//! same every second hides the step that did change.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

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

/// Least time between two plain lines that differ only in their clock.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// `line` with its clock readings (a word of digits and colons, bracketed or
/// not) blanked, so two lines of the same step compare equal.
fn unclocked(line: &str) -> String {
    line.split(' ')
        .map(|w| {
            let t = w.trim_matches(['[', ']']);
            let clock = t.contains(':') && t.chars().all(|c| c.is_ascii_digit() || c == ':');
            if clock {
                "#"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// How often a bar writes a plain line when stderr is not a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Least time between two lines.
    pub gap: Duration,
    /// How long a text must stand before it is written: a step set by
    /// several calls (position, then message) is written once, complete.
    pub settle: Duration,
}

/// A progress bar of `len` steps on stderr: `term` is its template on a
/// terminal, `plain` (no spinner, no bar) the template of its plain lines
/// elsewhere, written at `pace`.
pub fn bar(len: u64, term: &str, plain: &str, pace: Pace) -> indicatif::ProgressBar {
    let tty = std::io::stderr().is_terminal();
    let b = if tty {
        indicatif::ProgressBar::new(len)
    } else {
        let target = indicatif::ProgressDrawTarget::term_like(Box::new(PlainLines::new(pace)));
        indicatif::ProgressBar::with_draw_target(Some(len), target)
    };
    let template = if tty { term } else { plain };
    b.set_style(indicatif::ProgressStyle::with_template(template).expect("valid template"));
    if !tty && !pace.settle.is_zero() {
        // Redraws with no change let a settled step be written without waiting for the next one.
        b.enable_steady_tick(pace.settle);
    }
    b
}

/// An indicatif target that writes whole lines to stderr: the lines a bar
/// prints above itself at once, its own (last) line paced by [`Pace`], and
/// the last text it showed when it is cleared.
#[derive(Debug)]
pub struct PlainLines {
    pace: Pace,
    st: Mutex<PlainState>,
}

#[derive(Debug, Default)]
struct PlainState {
    /// What this redraw wrote so far.
    frame: String,
    /// The bar's latest text and since when it stands.
    pending: Option<(String, Instant)>,
    /// The bar text last written, and when.
    written: Option<(String, Instant)>,
}

impl PlainLines {
    /// A target writing at `pace`.
    pub fn new(pace: Pace) -> PlainLines {
        PlainLines {
            pace,
            st: Mutex::new(PlainState::default()),
        }
    }

    /// The lines to write for one finished redraw `frame`, at `now`.
    fn lines_for(&self, st: &mut PlainState, frame: &str, now: Instant) -> Vec<String> {
        let mut lines: Vec<String> = frame
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        let Some(bar) = lines.pop() else {
            // Cleared: the last step shown is the bar's final word.
            let last = st.pending.take().map(|(p, _)| p);
            let unwritten = last.filter(|p| {
                st.written
                    .as_ref()
                    .is_none_or(|(w, _)| unclocked(w) != unclocked(p))
            });
            return unwritten.into_iter().collect();
        };
        if st.pending.as_ref().is_none_or(|(p, _)| *p != bar) {
            st.pending = Some((bar, now));
        }
        let (p, since) = st.pending.clone().expect("set above");
        let due = st.written.as_ref().is_none_or(|(w, at)| {
            let gap = if unclocked(w) == unclocked(&p) {
                HEARTBEAT.max(self.pace.gap)
            } else {
                self.pace.gap
            };
            *w != p && now - *at >= gap
        });
        if due && now - since >= self.pace.settle {
            st.written = Some((p.clone(), now));
            lines.push(p);
        }
        lines
    }
}

impl indicatif::TermLike for PlainLines {
    fn width(&self) -> u16 {
        // Wide enough that indicatif never wraps a line.
        1000
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        st.frame.push_str(s);
        st.frame.push('\n');
        Ok(())
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.st
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .frame
            .push_str(&s.replace('\r', ""));
        Ok(())
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut st = self.st.lock().unwrap_or_else(|e| e.into_inner());
        let frame = std::mem::take(&mut st.frame);
        let lines = self.lines_for(&mut st, &frame, Instant::now());
        let mut e = std::io::stderr().lock();
        for l in lines {
            writeln!(e, "{l}")?;
        }
        e.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(p: &PlainLines, frame: &str, at: Instant) -> Vec<String> {
        let mut st = p.st.lock().unwrap();
        p.lines_for(&mut st, frame, at)
    }

    #[test]
    fn a_step_set_in_two_calls_is_written_once_complete() {
        let p = PlainLines::new(Pace {
            gap: Duration::ZERO,
            settle: Duration::from_millis(100),
        });
        let t = Instant::now();
        assert!(feed(&p, "1/4 runs point a", t).is_empty());
        // The message follows the position a moment later: only the settled text is written.
        assert!(feed(&p, "2/4 runs point a", t + Duration::from_millis(200)).is_empty());
        assert!(feed(&p, "2/4 runs point b", t + Duration::from_millis(201)).is_empty());
        assert_eq!(
            feed(&p, "2/4 runs point b", t + Duration::from_millis(400)),
            ["2/4 runs point b"]
        );
        assert!(
            feed(&p, "2/4 runs point b", t + Duration::from_millis(600)).is_empty(),
            "no repeats"
        );
        assert!(feed(&p, "3/4 runs point b", t + Duration::from_millis(700)).is_empty());
        assert_eq!(
            feed(&p, "", t + Duration::from_millis(710)),
            ["3/4 runs point b"],
            "cleared: its last step"
        );
    }

    /// A sweep's step that takes a while: its clock ticks every second, the line is
    /// written when the step changes and otherwise once per HEARTBEAT.
    #[test]
    fn a_line_whose_clock_alone_moves_is_written_every_heartbeat() {
        let p = PlainLines::new(Pace {
            gap: Duration::ZERO,
            settle: Duration::ZERO,
        });
        let t = Instant::now();
        let at = |s: u64| t + Duration::from_secs(s);
        let step = |s: u64, pos: u32| format!("[00:00:{s:02}] {pos}/5 runs point a");
        assert_eq!(feed(&p, &step(0, 1), at(0)), [step(0, 1)]);
        for s in 1..10 {
            assert!(feed(&p, &step(s, 1), at(s)).is_empty(), "{s} s");
        }
        assert_eq!(feed(&p, &step(10, 1), at(10)), [step(10, 1)]);
        assert_eq!(
            feed(&p, &step(11, 2), at(11)),
            [step(11, 2)],
            "a new step at once"
        );
        assert!(feed(&p, &step(12, 2), at(12)).is_empty());
        assert!(
            feed(&p, "", at(13)).is_empty(),
            "cleared: its last step was written"
        );
        assert_eq!(unclocked("run  45% [01:02:03] eta 3s"), "run  45% # eta 3s");
    }

    #[test]
    fn bar_lines_are_paced_and_printed_lines_are_not() {
        let p = PlainLines::new(Pace {
            gap: Duration::from_secs(2),
            settle: Duration::ZERO,
        });
        let t = Instant::now();
        assert_eq!(feed(&p, "1%", t), ["1%"]);
        assert!(feed(&p, "2%", t + Duration::from_secs(1)).is_empty());
        assert_eq!(
            feed(&p, "note\n3%  ", t + Duration::from_millis(1500)),
            ["note"]
        );
        assert_eq!(feed(&p, "4%", t + Duration::from_secs(2)), ["4%"]);
        assert!(
            feed(&p, "", t + Duration::from_millis(2100)).is_empty(),
            "already written"
        );
    }
}
