//! Launcher templates: how a server or client command line is wrapped
//! (`ssh HOST {cmdq}`, `ip netns exec ns{i} {cmd}`, a Slurm step) before a
//! shell runs it.

use crate::TransportError;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// Quotes `s` for a POSIX shell.
pub fn sh_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Fills a launcher template: `{cmd}` the quoted command, `{cmdq}` the
/// quoted command quoted once more (for `ssh HOST {cmdq}`, whose remote
/// shell unquotes again), `{i}` the client number.
pub fn expand(template: &str, argv: &[String], i: usize) -> Result<String, TransportError> {
    if !template.contains("{cmd}") && !template.contains("{cmdq}") {
        return Err(TransportError::Invalid(format!(
            "launcher `{template}` has no {{cmd}} or {{cmdq}} placeholder for the command"
        )));
    }
    let cmd: Vec<String> = argv.iter().map(|a| sh_quote(a)).collect();
    let cmd = cmd.join(" ");
    Ok(template.replace("{cmdq}", &sh_quote(&cmd)).replace("{cmd}", &cmd).replace("{i}", &i.to_string()))
}

/// Starts a filled launcher line under `sh -c` with piped stdin and stdout;
/// `what` names it in the error.
pub fn spawn(what: &str, line: &str) -> Result<Child, TransportError> {
    // `exec` so the launcher (or taillab itself) is our direct child.
    Command::new("sh")
        .arg("-c")
        .arg(format!("exec {line}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| TransportError::Io { what: format!("starting the {what} (`{line}`)"), source: e })
}

/// Forwards a child's stdout lines into a channel (so reads can time out).
pub fn lines_of(child: &mut Child, tag: usize, tx: mpsc::Sender<(usize, Option<String>)>) {
    let out = child.stdout.take().expect("stdout is piped");
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            match l {
                Ok(l) => {
                    if tx.send((tag, Some(l))).is_err() {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = tx.send((tag, None));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn quoting_survives_a_shell() {
        let argv = vec!["/bin/echo".to_string(), "a b".into(), "it's".into(), "x=1".into()];
        let line = expand("{cmd}", &argv, 0).unwrap();
        let o = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "a b it's x=1\n");
        // {cmdq} is unquoted twice: once by the local shell, once remotely.
        let line = expand("sh -c {cmdq}", &argv, 0).unwrap();
        let o = Command::new("sh").arg("-c").arg(&line).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "a b it's x=1\n");
        assert!(expand("ssh host", &argv, 0).is_err());
        assert_eq!(expand("ip netns exec ns{i} {cmd}", &argv[..1], 3).unwrap(), "ip netns exec ns3 /bin/echo");
    }
}
