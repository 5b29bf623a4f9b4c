//! The errors that many modules share: a value that does not parse
//! ([`ValueError`]: every grammar — durations, distributions, arrival
//! processes, configuration values — reports through it) and settings that
//! contradict each other ([`Invalid`]). Each module's own failures have their
//! own enum next to the code ([`crate::config::ConfigError`],
//! [`crate::RunError`], [`crate::ideal::IdealError`], …); callers decide on
//! the variant, never on the message.

/// A value that does not parse: the text as written, and a message that says
/// what was expected and how to write it (`` `20x` is not a duration like 30s,
/// 500ms or 200us``).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why}")]
pub struct ValueError {
    /// The text as written.
    pub text: String,
    /// What is wrong: the expected form and the fix (the message shown).
    pub why: String,
}

impl ValueError {
    /// `text` does not parse, for the reason `why`.
    pub fn new(text: impl Into<String>, why: impl Into<String>) -> Self {
        ValueError {
            text: text.into(),
            why: why.into(),
        }
    }

    /// Runs a parser of `text` whose failures are messages, as a [`ValueError`].
    pub(crate) fn wrap<T>(
        text: &str,
        parse: impl FnOnce() -> Result<T, String>,
    ) -> Result<T, ValueError> {
        parse().map_err(|why| ValueError::new(text, why))
    }
}

/// Settings that contradict each other or are out of range; the message names
/// the flag to change and its allowed values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// The message, for the private parsers whose failures are still messages
/// (a grammar built from smaller ones passes their errors on with `?`).
impl From<ValueError> for String {
    fn from(e: ValueError) -> String {
        e.why
    }
}
