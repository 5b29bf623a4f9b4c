//! The speech app's input sets, built by `taillab data prepare speech`.
//!
//! - `an4` ([`crate::an4`]): AN4-style prompts spoken by flite and espeak-ng
//!   voices with varied rate and pitch and light noise, decoded with the
//!   AN4 grammar.
//! - `recorded` ([`crate::sources`]): every English recording with a
//!   transcript in the Debian packages of `apt.txt`: read sentences and
//!   telephone prompts decoded with the full en-us LM, commands with their
//!   grammars, isolated words with a word-list grammar.
//!
//! Layout of the data folder: `utts.tsv` (id, set, source, search, audio
//! file, transcript), `audio/*.raw` (16 kHz little-endian i16), the grammars,
//! and `wer.json`, the word error rate of every set and source measured by
//! decoding each utterance once at prepare time ([`crate::score`]).
//!
//! This module holds what the sets have in common (their rows, searches and utterances, the
//! external tools, the decoder configurations); [`crate::prepare`] builds the folder from the
//! sets' own modules, which use this one: nothing here depends on them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use taillab_core::AppError;

use crate::ffi::{Decoder, DecoderConfig};

/// The app's name, also the name of its data folder.
pub const APP: &str = "speech";
/// Bumped whenever the data layout or the synthesized set changes.
pub const DATA_VERSION: &str = "speech-v4";

/// Where Debian `pocketsphinx-testdata` puts its recordings and grammars.
pub const TESTDATA: &str = "/usr/share/pocketsphinx/test/data";
/// The en-us acoustic model, dictionary and LM (Debian `pocketsphinx-en-us`).
pub const MODEL: &str = "/usr/share/pocketsphinx/model/en-us";

/// The decoding searches a request can ask for. The id travels in byte 0 of
/// each request, so the client decides which grammar an utterance needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// The full en-us trigram LM (large vocabulary, ~1 s per 3 s of audio).
    Lm = 0,
    /// The AN4 prompt grammar (synthesized set).
    An4 = 1,
    /// `cards.gram` from pocketsphinx-testdata.
    Cards = 2,
    /// `goforward.gram` from pocketsphinx-testdata.
    GoForward = 3,
    /// One word of the recorded word list (`words.gram`, written at prepare).
    Words = 4,
}

impl Search {
    /// Every search, in id order.
    pub const ALL: [Search; 5] = [
        Search::Lm,
        Search::An4,
        Search::Cards,
        Search::GoForward,
        Search::Words,
    ];

    /// The name in `utts.tsv` and reports (`lm`, `an4`, `cards`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Search::Lm => "lm",
            Search::An4 => "an4",
            Search::Cards => "cards",
            Search::GoForward => "goforward",
            Search::Words => "words",
        }
    }

    /// The search [`Search::name`] gives `s`; None for an unknown name.
    pub fn from_name(s: &str) -> Option<Search> {
        Search::ALL.into_iter().find(|x| x.name() == s)
    }

    /// The search whose id (request byte 0) is `id`; None above 4.
    pub fn from_id(id: u8) -> Option<Search> {
        Search::ALL.into_iter().find(|x| *x as u8 == id)
    }

    /// Name of this search inside the decoder.
    pub fn decoder_name(self) -> &'static str {
        match self {
            Search::Lm => Decoder::LM_SEARCH,
            other => other.name(),
        }
    }

    /// Grammar file inside the data folder (None for the LM).
    fn grammar_file(self) -> Option<&'static str> {
        match self {
            Search::Lm => None,
            Search::An4 => Some("an4.gram"),
            Search::Cards => Some("cards.gram"),
            Search::GoForward => Some("goforward.gram"),
            Search::Words => Some("words.gram"),
        }
    }
}

/// One utterance of an input set.
#[derive(Debug, Clone)]
pub struct Utterance {
    /// Unique id: `an4-NNNN` when synthesized, `SOURCE-NAME` when recorded.
    pub id: String,
    /// The input set: `recorded` or `an4`.
    pub set: String,
    /// Where it comes from (`asterisk`, `flite-slt`, ...), for per-source WER.
    pub source: String,
    /// The search that decodes it.
    pub search: Search,
    /// The words spoken, the reference for the WER.
    pub transcript: String,
    /// The audio: 16 kHz mono samples.
    pub samples: Vec<i16>,
}

/// The two decoders each worker owns.
///
/// The LM decoder also holds the recorded set's grammars. It evaluates the
/// best 32 of each codebook's 128 Gaussians per frame (`-topn 32`, default
/// 4): on 30 telephone prompts that took the full-LM WER from 28.9 % to
/// 22.5 % and doubled the decoding time (64 and 128 bought nothing more).
///
/// The AN4 grammar gets its own decoder because it needs a much lower word
/// insertion probability (`-wip 1e-5`): with the default 0.65 the decoder
/// inserted short letters ("a", "e") all over synthesized speech (WER 171 %
/// on espeak-ng's voices, 22 % against 16 % on flite's), while the same
/// setting raised the LibriVox WER from 28 % to 37 %, and the flag is per
/// decoder, not per search.
pub fn decoder_configs(dir: &Path) -> [DecoderConfig; 2] {
    let grammar = |s: Search| {
        let f = s.grammar_file().unwrap_or_default();
        (
            s.decoder_name().to_string(),
            dir.join(f).display().to_string(),
        )
    };
    let base = DecoderConfig {
        hmm: format!("{MODEL}/en-us"),
        dict: format!("{MODEL}/cmudict-en-us.dict"),
        lm: Some(format!("{MODEL}/en-us.lm.bin")),
        grammars: vec![
            grammar(Search::Cards),
            grammar(Search::GoForward),
            grammar(Search::Words),
        ],
        extra: vec![("-topn".into(), "32".into())],
    };
    let an4 = DecoderConfig {
        lm: None,
        grammars: vec![grammar(Search::An4)],
        extra: vec![("-wip".into(), "1e-5".into())],
        ..base.clone()
    };
    [base, an4]
}

/// Which of [`decoder_configs`] decodes `search`.
pub fn decoder_index(search: Search) -> usize {
    usize::from(search == Search::An4)
}

/// A [`AppError::Prepare`] for this app saying `why`.
pub fn prep_err(why: impl Into<String>) -> AppError {
    AppError::Prepare {
        app: APP.into(),
        why: why.into(),
    }
}

/// Loads the utterances of `set` (`recorded`, `an4` or `all`).
pub fn load(dir: &Path, set: &str) -> Result<Vec<Utterance>, AppError> {
    let manifest = dir.join("utts.tsv");
    let text = std::fs::read_to_string(&manifest).map_err(|e| AppError::DataMissing {
        app: APP.into(),
        why: format!("cannot read {}: {e}", manifest.display()),
    })?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || AppError::DataMissing {
            app: APP.into(),
            why: format!("{} line {} is malformed", manifest.display(), n + 1),
        };
        if f.len() != 6 {
            return Err(bad());
        }
        if set != "all" && f[1] != set {
            continue;
        }
        let search = Search::from_name(f[3]).ok_or_else(bad)?;
        let path = dir.join(f[4]);
        let bytes = std::fs::read(&path).map_err(|e| AppError::io(&path, e))?;
        let samples = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        out.push(Utterance {
            id: f[0].into(),
            set: f[1].into(),
            source: f[2].into(),
            search,
            transcript: f[5].into(),
            samples,
        });
    }
    if out.is_empty() {
        return Err(AppError::DataMissing {
            app: APP.into(),
            why: format!("no utterances of set `{set}` in {}", manifest.display()),
        });
    }
    Ok(out)
}

/// Runs `cmd`, failing with its stderr and a hint about the package it needs.
pub fn run(cmd: &mut Command, package: &str) -> Result<(), AppError> {
    let out = cmd.stdin(Stdio::null()).output().map_err(|e| {
        prep_err(format!(
            "cannot run {cmd:?}: {e} (install Debian `{package}`)"
        ))
    })?;
    if !out.status.success() {
        return Err(prep_err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Converts any audio file sox reads to 16 kHz mono signed 16-bit raw.
/// `-R` seeds the dither that resampling adds with a fixed number, so the
/// same input gives the same samples on every run.
pub fn to_raw16k(input: &Path, output: &Path) -> Result<(), AppError> {
    run(
        Command::new("sox")
            .arg("-R")
            .arg(input)
            .args([
                "-r",
                "16000",
                "-c",
                "1",
                "-b",
                "16",
                "-e",
                "signed-integer",
                "-t",
                "raw",
            ])
            .arg(output),
        "sox",
    )
}

/// One line of `utts.tsv`.
#[derive(Debug, Clone)]
pub struct Row {
    /// Unique id: `an4-NNNN` when synthesized, `SOURCE-NAME` when recorded.
    pub id: String,
    /// The input set: `recorded` or `an4`.
    pub set: &'static str,
    /// Where it comes from (`asterisk`, `flite-slt`, ...).
    pub source: String,
    /// The search that decodes it.
    pub search: Search,
    /// Path of the raw audio, relative to the data folder.
    pub audio: String,
    /// The words spoken, the reference for the WER.
    pub transcript: String,
}

/// Word error rate: word-level edit distance over the reference length.
pub fn wer(reference: &str, hypothesis: &str) -> (usize, usize) {
    let r: Vec<&str> = reference.split_whitespace().collect();
    let h: Vec<&str> = hypothesis.split_whitespace().collect();
    let mut prev: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut cur = vec![i + 1; h.len() + 1];
        for (j, hw) in h.iter().enumerate() {
            let sub = prev[j] + usize::from(rw != hw);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    (prev[h.len()], r.len())
}

/// Path of the data folder a [`taillab_core::DataCtx`] gives this app.
pub fn dir(data: &taillab_core::DataCtx) -> PathBuf {
    data.app_dir(APP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wer_counts_edits() {
        assert_eq!(wer("a b c", "a b c"), (0, 3));
        assert_eq!(wer("a b c", "a x c"), (1, 3));
        assert_eq!(wer("a b c", "a c"), (1, 3));
        assert_eq!(wer("a b", "a b c d"), (2, 2));
        assert_eq!(wer("", ""), (0, 0));
    }
}
