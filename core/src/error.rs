//! The errors that many modules share: a value that does not parse
//! ([`ValueError`]: every grammar — durations, distributions, arrival
//! processes, configuration values — reports through it) and settings that
//! contradict each other ([`Invalid`]). Each module's own failures have their
//! own enum next to the code ([`crate::config::ConfigError`],
//! [`crate::RunError`], [`crate::ideal::IdealError`], …); callers decide on
//! the variant, never on the message.

/// A value that does not parse, in parts: what was given, what is wrong
/// with it, the form expected and the fix. Callers decide on these fields
/// (a setting adds its own form where the parser named none:
/// [`ValueError::or_expected`]); the message is built from them:
/// `` `20x` is not a duration like 30s`` when the text simply is not the
/// form, else `{problem}; {fix} (expected {form})` with the parts there are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    /// The text as written.
    pub given: String,
    /// What is wrong, when more than "not the expected form"
    /// (`` `-1s` must be a finite, non-negative duration``); empty when
    /// `given` simply is not `expected`.
    pub problem: String,
    /// The form expected (`a duration like 30s, 500ms or 200us`), when the
    /// parser names one.
    pub expected: Option<String>,
    /// How to write it, or what to do instead (`use ns, us, ms or s`).
    pub fix: Option<String>,
}

impl ValueError {
    /// `given` does not parse, for the reason `problem` (a whole sentence).
    pub fn new(given: impl Into<String>, problem: impl Into<String>) -> Self {
        ValueError {
            given: given.into(),
            problem: problem.into(),
            expected: None,
            fix: None,
        }
    }

    /// `given` is not `expected` (`` `two` is not a whole number like 2``).
    pub fn not(given: impl Into<String>, expected: impl Into<String>) -> Self {
        ValueError {
            expected: Some(expected.into()),
            ..ValueError::new(given, "")
        }
    }

    /// With the form expected.
    pub fn expecting(self, expected: impl Into<String>) -> Self {
        ValueError {
            expected: Some(expected.into()),
            ..self
        }
    }

    /// With the fix: how to write it, or what to do instead.
    pub fn with_fix(self, fix: impl Into<String>) -> Self {
        ValueError {
            fix: Some(fix.into()),
            ..self
        }
    }

    /// With `form` as the form expected where the parser named none (a
    /// setting's form, for a parser shared by several settings).
    pub fn or_expected(self, form: &str) -> Self {
        match self.expected {
            Some(_) => self,
            None => self.expecting(form),
        }
    }

    /// Runs a parser of `text` whose failures are messages, as a [`ValueError`]
    /// whose problem is the message.
    pub(crate) fn wrap<T>(
        text: &str,
        parse: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, ValueError> {
        parse().map_err(|why| ValueError::new(text, why))
    }
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.problem.as_str(), &self.expected) {
            ("", Some(form)) => write!(f, "`{}` is not {form}", self.given)?,
            ("", None) => write!(f, "`{}` is not a valid value", self.given)?,
            (problem, _) => f.write_str(problem)?,
        }
        if let Some(fix) = &self.fix {
            write!(f, "; {fix}")?;
        }
        match (self.problem.as_str(), &self.expected) {
            ("", _) | (_, None) => Ok(()),
            (_, Some(form)) => write!(f, " (expected {form})"),
        }
    }
}

impl std::error::Error for ValueError {}

/// Settings that contradict each other or are out of range; the message names
/// the flag to change and its allowed values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// The message, for the private parsers whose failures are still messages
/// (a grammar built from smaller ones passes their errors on with `?`).
impl From<ValueError> for String {
    fn from(e: ValueError) -> String {
        e.to_string()
    }
}
