//! A resident Apertium pipeline: the stages of a `.mode` file run as
//! long-lived processes in null-flush mode.
//!
//! Why not `apertium -z` or a process per request: starting the eleven stage
//! processes costs about 0.2 s here (their transducers load at start), three
//! orders of magnitude more than translating a sentence, so a process per
//! request would measure `fork`+`exec`+loading, not translation. With `-z`
//! every stage flushes its output when it reads a NUL, so one sentence
//! followed by a NUL comes out the far end as one translation followed by a
//! NUL. `apertium -z` and the `apertium-destxt` deformatter swallow the NUL
//! (see docs/hosts.md), so we escape the text ourselves and talk to the first
//! stage directly.
//!
//! A stage that dies shows up as end-of-file or a broken pipe; a stage that
//! hangs shows up as the read timeout. Either way the request fails with an
//! error that names the stage, and the owner builds a fresh pipeline.

use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Errors of the pipeline. Each says what went wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("cannot read the Apertium mode file {path}: {source} (install apertium-eng-spa, see apps/translate/apt.txt)")]
    /// The `.mode` file could not be read (usually: the language pair is not installed).
    ModeFile {
        /// The mode file's path.
        path: String,
        /// Why reading it failed.
        source: std::io::Error,
    },
    #[error("the Apertium mode file {path} is not a pipeline of commands: {why}")]
    /// The `.mode` file is not a plain `prog args | prog args` pipeline.
    ModeSyntax {
        /// The mode file's path.
        path: String,
        /// What [`parse_mode`] could not take.
        why: String,
    },
    #[error("cannot start Apertium stage `{program}`: {source} (install apertium and apertium-eng-spa, see apps/translate/apt.txt)")]
    /// A stage's program could not be started.
    Spawn {
        /// The stage's program as the mode file names it.
        program: String,
        /// The error `spawn` returned.
        source: std::io::Error,
    },
    #[error("the text contains a NUL byte, which Apertium's null-flush mode uses as the sentence separator; remove it")]
    /// The request text contains a NUL byte, the pipeline's sentence separator.
    NulInText,
    #[error("Apertium pipeline broke while writing the sentence ({source}); {status}; the pipeline is being restarted")]
    /// Writing the sentence to the first stage failed: a stage has died.
    Write {
        /// The write error (usually a broken pipe).
        source: std::io::Error,
        /// Which stages have exited and how.
        status: String,
    },
    #[error("Apertium pipeline ended its output early; {status}; the pipeline is being restarted")]
    /// The last stage closed its output, or a stage died, before the answer was complete.
    Eof {
        /// Which stages have exited and how.
        status: String,
    },
    #[error("Apertium pipeline gave no answer within {timeout_ms} ms; {status}; the pipeline is being restarted (raise --set timeout_ms if sentences are very long)")]
    /// No complete answer arrived in time (app key `timeout_ms`).
    Timeout {
        /// The limit that passed, in ms.
        timeout_ms: u64,
        /// Which stages have exited and how ("all stages still running" for a hung stage).
        status: String,
    },
    #[error("reading from the Apertium pipeline failed: {0}")]
    /// Reading or polling the last stage's stdout failed.
    Read(std::io::Error),
    #[error("Apertium produced output that is not UTF-8")]
    /// The translation's bytes are not valid UTF-8.
    NotUtf8,
}

/// One stage of a mode file: a program and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// The executable, as named in the mode file (a path or a name looked up in `PATH`).
    pub program: String,
    /// Its arguments, starting with the `-z` we add, placeholders filled in.
    pub args: Vec<String>,
}

/// Reads a `.mode` file and returns its stages ready for null-flush use.
///
/// The file is a shell pipeline `prog args | prog args | ...` with single
/// quoted paths and two placeholders the `apertium` script fills in: `$1`
/// (the generator's mode: `-g` marks unknown words with `*`, as `apertium`
/// does by default) and `$2` (extra tagger options, empty by default).
/// `-z` is added right after each program name.
pub fn parse_mode_file(path: &Path) -> Result<Vec<Stage>, PipelineError> {
    let text = std::fs::read_to_string(path).map_err(|source| PipelineError::ModeFile {
        path: path.display().to_string(),
        source,
    })?;
    parse_mode(&text).map_err(|why| PipelineError::ModeSyntax {
        path: path.display().to_string(),
        why,
    })
}

/// Parses the text of a mode file (see [`parse_mode_file`]).
pub fn parse_mode(text: &str) -> Result<Vec<Stage>, String> {
    let mut stages = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    let finish = |words: &mut Vec<String>, stages: &mut Vec<Stage>| -> Result<(), String> {
        let mut it = std::mem::take(words).into_iter();
        let program = it.next().ok_or("empty stage between two `|`")?;
        let mut args = vec!["-z".to_string()];
        for a in it {
            match a.as_str() {
                "$1" => args.push("-g".into()),
                "$2" => {}
                _ => args.push(a),
            }
        }
        stages.push(Stage { program, args });
        Ok(())
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(x) => cur.push(x),
                        None => return Err(format!("unclosed quote {c}")),
                    }
                }
            }
            '|' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                finish(&mut words, &mut stages)?;
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            ';' | '&' | '>' | '<' | '`' => {
                return Err(format!("unsupported shell syntax `{c}`"));
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    finish(&mut words, &mut stages)?;
    Ok(stages)
}

/// Escapes text for the Apertium stream format, as the text deformatter
/// would: these characters delimit lexical units and blanks in the stream.
pub fn escape(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match c {
            '\\' | '[' | ']' | '^' | '$' | '/' | '<' | '>' | '@' | '{' | '}' => {
                out.push(b'\\');
                out.push(c as u8);
            }
            // Line breaks would be kept as blanks; a request is one sentence.
            '\n' | '\r' => out.push(b' '),
            c => {
                let mut b = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            }
        }
    }
}

/// Undoes [`escape`] on the generator's output and trims the blank we added.
pub fn unescape(raw: &[u8]) -> Result<String, PipelineError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut it = raw.iter().copied();
    while let Some(b) = it.next() {
        if b == b'\\' {
            if let Some(n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(b);
        }
    }
    let s = String::from_utf8(out).map_err(|_| PipelineError::NotUtf8)?;
    Ok(s.trim().to_string())
}

/// A running pipeline: the stage processes, our end of the first stage's
/// stdin and of the last stage's stdout.
pub struct Pipeline {
    stages: Vec<Stage>,
    children: Vec<Child>,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Bytes read past the NUL of the previous answer (none in practice:
    /// one sentence in flight at a time).
    buf: Vec<u8>,
    msg: Vec<u8>,
    timeout: Duration,
}

impl Pipeline {
    /// Starts every stage, each reading the previous one's stdout.
    pub fn spawn(stages: &[Stage], timeout: Duration) -> Result<Self, PipelineError> {
        let mut children: Vec<Child> = Vec::with_capacity(stages.len());
        let mut prev: Option<ChildStdout> = None;
        let mut first_in = None;
        for (i, st) in stages.iter().enumerate() {
            let stdin = match prev.take() {
                Some(out) => Stdio::from(out),
                None => Stdio::piped(),
            };
            // stderr is discarded: a stage's warnings would otherwise fill a
            // pipe nobody reads and stall it; failures are reported from the
            // exit status instead.
            let spawned = Command::new(&st.program)
                .args(&st.args)
                .stdin(stdin)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn();
            let mut child = match spawned {
                Ok(c) => c,
                Err(source) => {
                    kill_all(&mut children);
                    return Err(PipelineError::Spawn {
                        program: st.program.clone(),
                        source,
                    });
                }
            };
            if i == 0 {
                first_in = child.stdin.take();
            }
            prev = child.stdout.take();
            children.push(child);
        }
        let (Some(stdin), Some(stdout)) = (first_in, prev) else {
            kill_all(&mut children);
            return Err(PipelineError::Spawn {
                program: "(empty pipeline)".into(),
                source: std::io::Error::other("the mode file has no stages"),
            });
        };
        Ok(Pipeline {
            stages: stages.to_vec(),
            children,
            stdin,
            stdout,
            buf: Vec::with_capacity(4096),
            msg: Vec::with_capacity(1024),
            timeout,
        })
    }

    /// Process ids of the stages, first to last (tests kill one).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|c| c.id()).collect()
    }

    /// Translates one sentence. After an error the pipeline is unusable and
    /// must be dropped (its state mid-stream is unknown).
    pub fn translate(&mut self, text: &str) -> Result<String, PipelineError> {
        if text.as_bytes().contains(&0) {
            return Err(PipelineError::NulInText);
        }
        self.msg.clear();
        escape(text, &mut self.msg);
        // The blank before the NUL: without it the tagger holds back the
        // last token and the final full stop is lost.
        self.msg.extend_from_slice(b" \0");
        if let Err(source) = self
            .stdin
            .write_all(&self.msg)
            .and_then(|_| self.stdin.flush())
        {
            return Err(PipelineError::Write {
                source,
                status: self.status(),
            });
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == 0) {
                let out = unescape(&self.buf[..pos]);
                self.buf.drain(..=pos);
                // When a stage dies, the stages after it flush on end of
                // input and pass a NUL on, which looks like an (empty or
                // partial) answer. So every answer is checked: all stages
                // must still run (waitpid with WNOHANG, about 1 us each). An
                // empty answer to real text gets a moment for the death to
                // become visible before it is believed.
                let mut dead = self.any_dead();
                if !dead && !text.trim().is_empty() && out.as_ref().is_ok_and(|o| o.is_empty()) {
                    std::thread::sleep(Duration::from_millis(20));
                    dead = self.any_dead();
                }
                if dead {
                    return Err(PipelineError::Eof {
                        status: self.status(),
                    });
                }
                return out;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !wait_readable(self.stdout.as_raw_fd(), left)? {
                return Err(PipelineError::Timeout {
                    timeout_ms: self.timeout.as_millis() as u64,
                    status: self.status(),
                });
            }
            let mut chunk = [0u8; 4096];
            match self.stdout.read(&mut chunk) {
                Ok(0) => {
                    return Err(PipelineError::Eof {
                        status: self.status(),
                    })
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(PipelineError::Read(e)),
            }
        }
    }

    /// True when a stage has exited.
    fn any_dead(&mut self) -> bool {
        self.children
            .iter_mut()
            .any(|c| !matches!(c.try_wait(), Ok(None)))
    }

    /// Which stages have exited and how, for error messages.
    fn status(&mut self) -> String {
        // A killed stage's neighbours exit a moment later; give them that
        // moment so the message lists the whole picture.
        std::thread::sleep(Duration::from_millis(20));
        let mut dead = Vec::new();
        for (i, c) in self.children.iter_mut().enumerate() {
            if let Ok(Some(st)) = c.try_wait() {
                dead.push(format!(
                    "stage {} `{}` exited ({st})",
                    i + 1,
                    self.stages[i].program
                ));
            }
        }
        if dead.is_empty() {
            "all stages still running".into()
        } else {
            dead.join(", ")
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        kill_all(&mut self.children);
    }
}

fn kill_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
    }
    for c in children.iter_mut() {
        let _ = c.wait();
    }
}

/// Waits until `fd` is readable (or closed) or `timeout` passes.
fn wait_readable(fd: i32, timeout: Duration) -> Result<bool, PipelineError> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
    loop {
        // SAFETY: one valid pollfd, the count says so.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r >= 0 {
            return Ok(r > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(PipelineError::Read(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_mode_line() {
        let st =
            parse_mode("lt-proc 'a b.bin' | apertium-tagger -g $2 'x.prob' | lt-proc $1 'g.bin'\n")
                .unwrap();
        assert_eq!(st.len(), 3);
        assert_eq!(st[0].program, "lt-proc");
        assert_eq!(st[0].args, vec!["-z", "a b.bin"]);
        assert_eq!(st[1].args, vec!["-z", "-g", "x.prob"]);
        assert_eq!(st[2].args, vec!["-z", "-g", "g.bin"]);
        assert!(parse_mode("a | | b").is_err());
        assert!(parse_mode("a 'x").is_err());
        assert!(parse_mode("a > out").is_err());
    }

    #[test]
    fn escape_roundtrip() {
        let mut v = Vec::new();
        escape("a [b] $5 <c> ^d/e @f {g} \\h ñ", &mut v);
        assert_eq!(
            String::from_utf8(v.clone()).unwrap(),
            "a \\[b\\] \\$5 \\<c\\> \\^d\\/e \\@f \\{g\\} \\\\h ñ"
        );
        assert_eq!(unescape(&v).unwrap(), "a [b] $5 <c> ^d/e @f {g} \\h ñ");
    }
}
