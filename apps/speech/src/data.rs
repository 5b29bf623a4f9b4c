//! The speech app's input sets, built by `taillab data prepare speech`.
//!
//! - `recorded`: the recorded utterances of Debian `pocketsphinx-testdata`
//!   that come with transcripts: 5 LibriVox read-speech sentences (decoded
//!   with the full en-us LM), 5 "cards" utterances (decoded with their JSGF
//!   grammar) and "go forward ten meters" (its grammar).
//! - `an4`: an AN4-style set synthesized with `espeak-ng` and resampled with
//!   `sox` to 16 kHz mono 16-bit: spelled names, digit strings, control words
//!   with letters and digits, dates and years, in several voices and speeds,
//!   decoded with a word-loop JSGF grammar over the AN4-like vocabulary. The
//!   full LM is not used for it: it turns synthesized speech into unrelated
//!   words ("seven three alpha" → "sadly three also"), while a small grammar
//!   decodes it well and fast (see docs/hosts.md).
//!
//! Layout of the data folder: `utts.tsv` (id, set, search, audio file,
//! transcript), `audio/*.raw` (little-endian i16 samples) and the grammars.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::AppError;

use crate::ffi::{Decoder, DecoderConfig};

pub const APP: &str = "speech";
/// Bumped whenever the data layout or the synthesized set changes.
pub const DATA_VERSION: &str = "speech-v3";

const TESTDATA: &str = "/usr/share/pocketsphinx/test/data";
const MODEL: &str = "/usr/share/pocketsphinx/model/en-us";

/// The decoding searches a request can ask for. The id travels in byte 0 of
/// each request, so the client decides which grammar an utterance needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// The full en-us trigram LM (large vocabulary, ~1 s per 3 s of audio).
    Lm = 0,
    /// Word-loop grammar over the AN4-like vocabulary (synthesized set).
    An4 = 1,
    /// `cards.gram` from pocketsphinx-testdata.
    Cards = 2,
    /// `goforward.gram` from pocketsphinx-testdata.
    GoForward = 3,
}

impl Search {
    pub const ALL: [Search; 4] = [Search::Lm, Search::An4, Search::Cards, Search::GoForward];

    pub fn name(self) -> &'static str {
        match self {
            Search::Lm => "lm",
            Search::An4 => "an4",
            Search::Cards => "cards",
            Search::GoForward => "goforward",
        }
    }

    pub fn from_name(s: &str) -> Option<Search> {
        Search::ALL.into_iter().find(|x| x.name() == s)
    }

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
        }
    }
}

/// One utterance of an input set.
#[derive(Debug, Clone)]
pub struct Utterance {
    pub id: String,
    pub set: String,
    pub search: Search,
    pub transcript: String,
    pub samples: Vec<i16>,
}

/// The two decoders each worker owns. The LM decoder also holds the
/// recorded set's grammars; the AN4 grammar gets its own decoder because it
/// needs a much lower word insertion probability (`-wip 1e-5`): with the
/// default 0.65 the decoder inserted short letters ("a", "e") all over the
/// synthesized speech (WER 171 % on the 200 utterances), while the same
/// setting on the LM raised the LibriVox WER from 28 % to 37 %, and the
/// flag is per decoder, not per search.
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
        grammars: vec![grammar(Search::Cards), grammar(Search::GoForward)],
        extra: Vec::new(),
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

fn prep_err(why: impl Into<String>) -> AppError {
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
        if f.len() != 5 {
            return Err(bad());
        }
        if set != "all" && f[1] != set {
            continue;
        }
        let search = Search::from_name(f[2]).ok_or_else(bad)?;
        let path = dir.join(f[3]);
        let bytes = std::fs::read(&path).map_err(|e| AppError::io(&path, e))?;
        let samples = bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect();
        out.push(Utterance {
            id: f[0].into(),
            set: f[1].into(),
            search,
            transcript: f[4].into(),
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
fn run(cmd: &mut Command, package: &str) -> Result<(), AppError> {
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
fn to_raw16k(input: &Path, output: &Path) -> Result<(), AppError> {
    run(
        Command::new("sox")
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

/// Builds the data folder: copies the recorded set, synthesizes the AN4-style
/// set, writes the grammars and the manifest.
pub fn build(dir: &Path, an4_count: usize, seed: u64) -> Result<(), AppError> {
    let testdata = Path::new(TESTDATA);
    if !testdata.join("librivox/transcription").exists() {
        return Err(prep_err(format!(
            "{TESTDATA} is missing; install Debian `pocketsphinx-testdata`"
        )));
    }
    let audio = dir.join("audio");
    std::fs::create_dir_all(&audio).map_err(|e| AppError::io(&audio, e))?;
    let mut manifest = String::from("id\tset\tsearch\taudio\ttranscript\n");

    // Recorded: every utterance with a transcript. Transcription lines look
    // like `<s> ten of clubs </s> (001)`.
    for (sub, search) in [("librivox", Search::Lm), ("cards", Search::Cards)] {
        let tfile = testdata.join(sub).join(if sub == "cards" {
            "cards.transcription"
        } else {
            "transcription"
        });
        let text = std::fs::read_to_string(&tfile).map_err(|e| AppError::io(&tfile, e))?;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (words, id) = line.rsplit_once('(').ok_or_else(|| {
                prep_err(format!("unexpected line in {}: {line}", tfile.display()))
            })?;
            let id = id.trim_end_matches(')').trim();
            let words: Vec<&str> = words
                .split_whitespace()
                .filter(|w| *w != "<s>" && *w != "</s>")
                .collect();
            let raw = format!("audio/{sub}-{id}.raw");
            to_raw16k(
                &testdata.join(sub).join(format!("{id}.wav")),
                &dir.join(&raw),
            )?;
            writeln!(
                manifest,
                "{sub}-{id}\trecorded\t{}\t{raw}\t{}",
                search.name(),
                words.join(" ")
            )
            .ok();
        }
    }
    let gf = testdata.join("goforward.raw");
    std::fs::copy(&gf, audio.join("goforward.raw")).map_err(|e| AppError::io(&gf, e))?;
    manifest
        .push_str("goforward\trecorded\tgoforward\taudio/goforward.raw\tgo forward ten meters\n");
    for g in ["cards/cards.gram", "goforward.gram"] {
        let src = testdata.join(g);
        let dst = dir.join(Path::new(g).file_name().unwrap_or_default());
        std::fs::copy(&src, &dst).map_err(|e| AppError::io(&src, e))?;
    }

    // Synthesized AN4-style set.
    std::fs::write(dir.join("an4.gram"), an4_grammar()).map_err(|e| AppError::io(dir, e))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for i in 0..an4_count {
        let (words, spoken) = an4_prompt(&mut rng);
        let voice = VOICES[rng.gen_range(0..VOICES.len())];
        let speed = SPEEDS[rng.gen_range(0..SPEEDS.len())];
        let wav = dir.join(format!("tmp-{i}.wav"));
        run(
            Command::new("espeak-ng")
                .args(["-v", voice, "-s", &speed.to_string(), "-w"])
                .arg(&wav)
                .arg(&spoken),
            "espeak-ng",
        )?;
        let raw = format!("audio/an4-{i:04}.raw");
        to_raw16k(&wav, &dir.join(&raw))?;
        std::fs::remove_file(&wav).map_err(|e| AppError::io(&wav, e))?;
        writeln!(
            manifest,
            "an4-{i:04}-{voice}-s{speed}\tan4\tan4\t{raw}\t{}",
            words.join(" ")
        )
        .ok();
    }
    let m = dir.join("utts.tsv");
    std::fs::write(&m, manifest).map_err(|e| AppError::io(&m, e))?;

    // Fail here, with the grammar named, rather than on the first worker.
    for cfg in decoder_configs(dir) {
        Decoder::new(&cfg).map_err(|e| prep_err(e.0))?;
    }
    Ok(())
}

/// espeak-ng voices (with variants for pitch and timbre) used for the AN4 set.
const VOICES: [&str; 6] = [
    "en-us",
    "en-us+f3",
    "en-gb",
    "en-gb+m3",
    "en-gb-scotland",
    "en-029+f2",
];
/// Speaking rates in words per minute (espeak's default is 175).
const SPEEDS: [u32; 3] = [135, 165, 195];

const LETTERS: [&str; 26] = [
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
    "t", "u", "v", "w", "x", "y", "z",
];
const DIGITS: [&str; 10] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];
const TEENS: [&str; 10] = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const CONTROL: [&str; 10] = [
    "enter", "erase", "rubout", "repeat", "help", "go", "no", "yes", "start", "stop",
];
/// Names and places to spell, in the spirit of AN4's census prompts.
const SPELLED: [&str; 16] = [
    "pittsburgh",
    "carnegie",
    "mellon",
    "smith",
    "john",
    "mary",
    "robert",
    "linda",
    "fifth",
    "forbes",
    "murray",
    "walnut",
    "ohio",
    "penn",
    "shady",
    "negley",
];

/// The JSGF grammar of the AN4-style prompts: one rule per prompt kind, so a
/// spelled name can only contain letters and a date has a date's shape. A
/// single loop over all 90 words let the decoder insert short letters
/// ("a", "e") everywhere in synthesized speech (WER above 100 %).
fn an4_grammar() -> String {
    let alt = |l: &[&str]| l.join(" | ");
    let nz = &DIGITS[1..];
    format!(
        "#JSGF V1.0;\n\n// AN4-style prompts: spelled names, digit strings, commands, dates.\n\
         grammar an4;\n\n\
         public <utt> = <spelled> | <digits> | <command> | <date> | <answer>;\n\
         <spelled> = <letter> <letter>*;\n\
         <digits> = <digit> <digit>*;\n\
         <command> = <control> <ld> <ld>*;\n<ld> = <letter> | <digit>;\n\
         <date> = <month> <day> nineteen <tens> [<nonzero>];\n\
         <day> = <nonzero> | <teen> | <tens> [<nonzero>];\n\
         <answer> = <control> [<control>];\n\
         <letter> = {};\n<digit> = {} | oh;\n<nonzero> = {};\n<teen> = {};\n\
         <tens> = {};\n<month> = {};\n<control> = {};\n",
        alt(&LETTERS),
        alt(&DIGITS),
        alt(nz),
        alt(&TEENS),
        alt(&TENS),
        alt(&MONTHS),
        alt(&CONTROL)
    )
}

/// How espeak-ng should say a word: letters as their names (a bare "A" is
/// read as the article, "A," as the letter), everything else as written.
fn speak(word: &str) -> String {
    if word.len() == 1 {
        format!("{},", word.to_uppercase())
    } else {
        word.to_string()
    }
}

/// One AN4-style prompt: its transcript words and the text given to espeak-ng.
fn an4_prompt(rng: &mut impl Rng) -> (Vec<&'static str>, String) {
    let mut w: Vec<&'static str> = Vec::new();
    match rng.gen_range(0..5) {
        // A spelled name or place.
        0 => {
            let name = SPELLED[rng.gen_range(0..SPELLED.len())];
            for c in name.bytes() {
                w.push(LETTERS[(c - b'a') as usize]);
            }
        }
        // A digit string: zip code or phone number, "oh" for some zeros.
        1 => {
            let n = if rng.gen_bool(0.5) { 5 } else { 7 };
            for _ in 0..n {
                let d = rng.gen_range(0..10);
                w.push(if d == 0 && rng.gen_bool(0.5) {
                    "oh"
                } else {
                    DIGITS[d]
                });
            }
        }
        // A control word followed by letters and digits ("erase c q q f seven").
        2 => {
            w.push(CONTROL[rng.gen_range(0..CONTROL.len())]);
            for _ in 0..rng.gen_range(2..6) {
                if rng.gen_bool(0.6) {
                    w.push(LETTERS[rng.gen_range(0..26)]);
                } else {
                    w.push(DIGITS[rng.gen_range(0..10)]);
                }
            }
        }
        // A birth date: month, day, year ("june twenty six nineteen sixty").
        3 => {
            w.push(MONTHS[rng.gen_range(0..12)]);
            match rng.gen_range(1..32) {
                d @ 1..=9 => w.push(DIGITS[d]),
                d @ 10..=19 => w.push(TEENS[d - 10]),
                d => {
                    w.push(TENS[d / 10 - 2]);
                    if d % 10 != 0 {
                        w.push(DIGITS[d % 10]);
                    }
                }
            }
            w.push("nineteen");
            w.push(TENS[rng.gen_range(1..8)]);
            let y = rng.gen_range(0..10);
            if y != 0 {
                w.push(DIGITS[y]);
            }
        }
        // Short answers and commands.
        _ => {
            for _ in 0..rng.gen_range(1..3) {
                w.push(CONTROL[rng.gen_range(0..CONTROL.len())]);
            }
        }
    }
    let spoken = w.iter().map(|x| speak(x)).collect::<Vec<_>>().join(" ");
    (w, spoken)
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

    #[test]
    fn prompts_use_only_grammar_words() {
        let g = an4_grammar();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..200 {
            let (words, spoken) = an4_prompt(&mut rng);
            assert!(!words.is_empty() && !spoken.is_empty());
            for w in words {
                assert!(
                    g.contains(&format!(" {w} ")) || g.contains(&format!(" {w};")),
                    "{w}"
                );
            }
        }
    }
}
