//! The English input set: short sentences from text the setup installs.
//!
//! TailBench's moses used a subtitle corpus: short, conversational lines. The
//! closest text Debian ships is WordNet's usage examples (`"I can breathe
//! better when the air is clean"`, 48 k of them, everyday phrasing) and the
//! quotations of GCIDE (Webster 1913: literary prose and verse with their
//! authors, longer). Both are extracted at prepare time into one file with
//! the source of each line, so a run can use either or both.

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

/// Where WordNet's database files are (Debian `wordnet-base`).
pub const WORDNET_DIR: &str = "/usr/share/wordnet";
/// GCIDE in dictd's dictzip format (Debian `dict-gcide`).
pub const GCIDE_DICT: &str = "/usr/share/dictd/gcide.dict.dz";

/// Which pool a sentence came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// WordNet's usage examples: everyday phrasing, short.
    Wordnet,
    /// GCIDE (Webster 1913) quotations: literary prose and verse, longer.
    Gcide,
}

impl Source {
    /// The name written before each sentence in the prepared file, as the `corpus` key spells it.
    pub fn tag(self) -> &'static str {
        match self {
            Source::Wordnet => "wordnet",
            Source::Gcide => "gcide",
        }
    }
}

/// A sentence is kept when it is plain text Apertium can take as is: ASCII
/// letters, digits and ordinary punctuation (GCIDE's markup for accents and
/// cross references uses brackets, braces and backslashes), 3 to 40 words.
fn acceptable(s: &str) -> bool {
    let words = s.split_whitespace().count();
    (3..=40).contains(&words)
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || " .,;:!?'\"-()".contains(c))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !s.contains(". .")
}

/// Makes a fragment a sentence: a capital first letter and a final stop,
/// as a subtitle line would have.
fn as_sentence(s: &str) -> String {
    let mut out: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(first) = out.chars().next() {
        let up = first.to_ascii_uppercase();
        out.replace_range(..first.len_utf8(), &up.to_string());
    }
    if !out.ends_with(['.', '!', '?']) {
        out.push('.');
    }
    out
}

/// WordNet usage examples: the double-quoted parts of each synset's gloss
/// (after the `|` in the `data.*` files).
pub fn wordnet_examples(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for pos in ["noun", "verb", "adj", "adv"] {
        let bytes = std::fs::read(dir.join(format!("data.{pos}")))?;
        let text = String::from_utf8_lossy(&bytes);
        for line in text.lines() {
            // Lines starting with two spaces are the licence header.
            if line.starts_with("  ") {
                continue;
            }
            let Some((_, gloss)) = line.split_once(" | ") else {
                continue;
            };
            let mut parts = gloss.split('"');
            parts.next();
            while let (Some(quoted), _) = (parts.next(), parts.next()) {
                let q = quoted.trim();
                if acceptable(q) {
                    out.push(as_sentence(q));
                }
            }
        }
    }
    Ok(out)
}

/// GCIDE quotations: the deeper-indented blocks that end with an attribution
/// `--Author.`, without the attribution.
pub fn gcide_quotations(dict_dz: &Path) -> std::io::Result<Vec<String>> {
    let f = std::fs::File::open(dict_dz)?;
    let mut bytes = Vec::new();
    // dictzip is gzip with an index in the header's extra field.
    flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f)).read_to_end(&mut bytes)?;
    // A few entries are Latin-1; their sentences are dropped by the ASCII filter.
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    let mut block = String::new();
    let mut flush = |block: &mut String| {
        if let Some(at) = block.rfind(" --") {
            let attribution = &block[at + 3..];
            if attribution.starts_with(|c: char| c.is_ascii_uppercase()) {
                let q = block[..at].trim();
                if acceptable(q) && q.ends_with(['.', '!', '?']) {
                    out.push(as_sentence(q));
                }
            }
        }
        block.clear();
    };
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent >= 9 && !t.is_empty() && !t.starts_with('[') {
            block.push(' ');
            block.push_str(t);
        } else {
            flush(&mut block);
        }
    }
    flush(&mut block);
    Ok(out)
}

/// Both pools, deduplicated, in file order (deterministic).
pub fn extract(wordnet_dir: &Path, gcide: &Path) -> std::io::Result<Vec<(Source, String)>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for s in wordnet_examples(wordnet_dir)? {
        if seen.insert(s.clone()) {
            out.push((Source::Wordnet, s));
        }
    }
    for s in gcide_quotations(gcide)? {
        if seen.insert(s.clone()) {
            out.push((Source::Gcide, s));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_become_sentences() {
        assert_eq!(as_sentence("he ate  the cake"), "He ate the cake.");
        assert_eq!(as_sentence("where is it?"), "Where is it?");
        assert!(acceptable("he ate the cake"));
        assert!(!acceptable("too short"));
        assert!(!acceptable("the [ae]ther was {bright}"));
        assert!(!acceptable("The . . . tellers of news"));
    }
}
