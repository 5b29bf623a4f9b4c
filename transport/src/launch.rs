//! Launcher templates: how a server or client command line is wrapped
//! (`ssh HOST {cmdq}`, `ip netns exec ns{i} {cmd}`, a Slurm step) before a
//! shell runs it.

use crate::TransportError;

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
