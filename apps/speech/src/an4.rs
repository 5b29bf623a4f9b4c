//! The AN4-style set: prompts in the manner of CMU's AN4 census database
//! (spelled names, digit strings, a control word with letters and digits,
//! dates, short answers), spoken by text-to-speech with varied voices, rates
//! and pitches, with light pink noise, and the JSGF grammar that decodes them.
//!
//! Voices: the four flite voices that read letters well (`slt`, `rms`,
//! `awb`, `kal16`) and two Klatt-synthesizer variants of espeak-ng. On 25
//! prompts each against the grammar, flite's voices scored 15–28 % WER and
//! espeak-ng's Klatt variants 21 %, while espeak-ng's default formant voices
//! scored 41–62 % (the set these replace measured 64 %).

use std::path::Path;
use std::process::Command;

use rand::Rng;
use taillab_core::AppError;

use crate::data::{run, to_raw16k};

/// A text-to-speech voice: which program and which of its voices.
#[derive(Debug, Clone, Copy)]
pub enum Voice {
    /// `flite -voice NAME`; rate and pitch through `--setf`.
    Flite(&'static str),
    /// `espeak-ng -v NAME`; rate `-s`, pitch `-p`.
    Espeak(&'static str),
}

impl Voice {
    /// A short name for utterance ids and per-voice WER.
    pub fn name(self) -> String {
        match self {
            Voice::Flite(v) => format!("flite-{v}"),
            Voice::Espeak(v) => format!("espeak-{}", v.replace('+', "-")),
        }
    }
}

/// The voices the set is spoken in, drawn uniformly per prompt.
pub const VOICES: [Voice; 6] = [
    Voice::Flite("slt"),
    Voice::Flite("rms"),
    Voice::Flite("awb"),
    Voice::Flite("kal16"),
    Voice::Espeak("en-us+klatt2"),
    Voice::Espeak("en-us+klatt4"),
];

/// How one prompt is spoken: rate and pitch factors around the voice's
/// own (0.85–1.15), and the pink-noise amplitude (0.003–0.012 of full scale;
/// at 0.02 the WER of a clean voice rose from 16 % to 24 %).
#[derive(Debug, Clone, Copy)]
pub struct Delivery {
    /// The voice that speaks.
    pub voice: Voice,
    /// Speaking-rate factor; above 1 is faster.
    pub rate: f64,
    /// Pitch factor; above 1 is higher.
    pub pitch: f64,
    /// Pink-noise amplitude, as a fraction of full scale.
    pub noise: f64,
}

impl Delivery {
    /// Draws a voice, rate, pitch and noise level.
    pub fn draw(rng: &mut impl Rng) -> Self {
        Delivery {
            voice: VOICES[rng.gen_range(0..VOICES.len())],
            rate: rng.gen_range(0.85..1.15),
            pitch: rng.gen_range(0.85..1.15),
            noise: rng.gen_range(0.003..0.012),
        }
    }
}

/// Speaks `text` as `d` says into `raw` (16 kHz mono i16), via `tmp.wav`.
pub fn synthesize(text: &str, d: Delivery, tmp: &Path, raw: &Path) -> Result<(), AppError> {
    match d.voice {
        Voice::Flite(v) => run(
            Command::new("flite")
                .args(["-voice", v, "--setf"])
                .arg(format!("duration_stretch={:.3}", 1.0 / d.rate))
                .arg("--setf")
                // Around the voice's own mean: slt is a female voice.
                .arg(format!("int_f0_target_mean={:.0}", flite_f0(v) * d.pitch))
                .args(["-t", text, "-o"])
                .arg(tmp),
            "flite",
        )?,
        Voice::Espeak(v) => run(
            Command::new("espeak-ng")
                .args(["-v", v, "-s"])
                .arg(format!("{:.0}", 165.0 * d.rate))
                .arg("-p")
                .arg(format!("{:.0}", 50.0 * d.pitch))
                .arg("-w")
                .arg(tmp)
                .arg(text),
            "espeak-ng",
        )?,
    }
    to_raw16k(tmp, raw)?;
    add_noise(raw, d.noise)
}

/// A flite voice's usual mean pitch in Hz.
fn flite_f0(voice: &str) -> f64 {
    if voice == "slt" {
        170.0
    } else {
        105.0
    }
}

/// Mixes sox-generated pink noise into `raw`. `sox -R` seeds the generator
/// with a fixed number, so the same prompt gets the same noise everywhere.
fn add_noise(raw: &Path, amplitude: f64) -> Result<(), AppError> {
    let mut speech = read_raw(raw)?;
    let noise_file = raw.with_extension("noise");
    let secs = speech.len() as f64 / 16000.0;
    run(
        Command::new("sox")
            .args(["-R", "-n", "-r", "16000", "-c", "1", "-b", "16"])
            .args(["-e", "signed-integer", "-t", "raw"])
            .arg(&noise_file)
            .args(["synth", &format!("{secs:.4}"), "pinknoise", "vol"])
            .arg(format!("{amplitude:.4}")),
        "sox",
    )?;
    let noise = read_raw(&noise_file)?;
    std::fs::remove_file(&noise_file).map_err(|e| AppError::io(&noise_file, e))?;
    for (s, n) in speech.iter_mut().zip(noise) {
        *s = s.saturating_add(n);
    }
    let bytes: Vec<u8> = speech.iter().flat_map(|s| s.to_le_bytes()).collect();
    std::fs::write(raw, bytes).map_err(|e| AppError::io(raw, e))
}

fn read_raw(path: &Path) -> Result<Vec<i16>, AppError> {
    let bytes = std::fs::read(path).map_err(|e| AppError::io(path, e))?;
    Ok(bytes
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect())
}

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
pub fn grammar() -> String {
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

/// How the synthesizers should say a word: letters as their names (a bare
/// "A" is read as the article, "A," as the letter), everything else as
/// written.
pub fn speak(word: &str) -> String {
    if word.len() == 1 {
        format!("{},", word.to_uppercase())
    } else {
        word.to_string()
    }
}

/// One AN4-style prompt: its transcript words and the text given to espeak-ng.
pub fn prompt(rng: &mut impl Rng) -> (Vec<&'static str>, String) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn prompts_use_only_grammar_words() {
        let g = grammar();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for _ in 0..200 {
            let (words, spoken) = prompt(&mut rng);
            assert!(!words.is_empty() && !spoken.is_empty());
            for w in words {
                assert!(
                    g.contains(&format!(" {w} ")) || g.contains(&format!(" {w};")),
                    "{w}"
                );
            }
        }
    }

    #[test]
    fn deliveries_stay_in_range() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..100 {
            let d = Delivery::draw(&mut rng);
            assert!((0.85..1.15).contains(&d.rate) && (0.85..1.15).contains(&d.pitch));
            assert!((0.003..0.012).contains(&d.noise));
        }
    }
}
