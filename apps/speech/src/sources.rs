//! The recorded utterances: every English recording with a transcript that
//! the Debian packages in `apt.txt` ship.
//!
//! | source | package | what | decoded with |
//! |---|---|---|---|
//! | `librivox` | pocketsphinx-testdata | read sentences | full LM |
//! | `cards`, `goforward` | pocketsphinx-testdata | commands | their grammars |
//! | `asterisk` | asterisk-core-sounds-en-g722 | telephone prompts, one speaker | full LM (one word: word list) |
//! | `klettres` | klettres-data | letters and short words, US and UK speakers | word list |
//! | `ktuberling` | ktuberling-data | object names | word list |
//!
//! A recording is kept only when every word of its transcript is in the
//! pronouncing dictionary (the decoder could never produce the others).

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;

use taillab_core::AppError;

use crate::data::{prep_err, to_raw16k, Row, Search, MODEL, TESTDATA};
use crate::g722;

const ASTERISK: &str = "/usr/share/asterisk/sounds/en_US_f_Allison";
const ASTERISK_TEXT: &str = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz";
const KLETTRES: &str = "/usr/share/klettres";
const KTUBERLING: &str = "/usr/share/ktuberling/sounds";

/// The pronouncing dictionary's words (alternates like `word(2)` folded).
pub fn dictionary() -> Result<BTreeSet<String>, AppError> {
    let path = format!("{MODEL}/cmudict-en-us.dict");
    let text = std::fs::read_to_string(&path).map_err(|e| AppError::io(&path, e))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| !w.contains('('))
        .map(str::to_string)
        .collect())
}

/// Every recorded utterance, its audio written under `dir/audio/`.
pub fn recorded(dir: &Path, dict: &BTreeSet<String>) -> Result<Vec<Row>, AppError> {
    let mut rows = testdata(dir)?;
    rows.extend(asterisk(dir, dict)?);
    rows.extend(klettres(dir, dict)?);
    rows.extend(ktuberling(dir, dict)?);
    Ok(rows)
}

fn row(source: &str, id: &str, search: Search, transcript: String) -> Row {
    Row {
        id: format!("{source}-{id}"),
        set: "recorded",
        source: source.to_string(),
        search,
        audio: format!("audio/{source}-{id}.raw"),
        transcript,
    }
}

/// pocketsphinx-testdata: transcription lines look like `<s> ten of clubs </s> (001)`.
fn testdata(dir: &Path) -> Result<Vec<Row>, AppError> {
    let testdata = Path::new(TESTDATA);
    if !testdata.join("librivox/transcription").exists() {
        return Err(prep_err(format!(
            "{TESTDATA} is missing; install Debian `pocketsphinx-testdata`"
        )));
    }
    let mut rows = Vec::new();
    for (sub, tfile, search) in [
        ("librivox", "transcription", Search::Lm),
        ("cards", "cards.transcription", Search::Cards),
    ] {
        let tfile = testdata.join(sub).join(tfile);
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
            let r = row(sub, id, search, words.join(" "));
            to_raw16k(
                &testdata.join(sub).join(format!("{id}.wav")),
                &dir.join(&r.audio),
            )?;
            rows.push(r);
        }
    }
    let r = row(
        "goforward",
        "1",
        Search::GoForward,
        "go forward ten meters".into(),
    );
    let gf = testdata.join("goforward.raw");
    std::fs::copy(&gf, dir.join(&r.audio)).map_err(|e| AppError::io(&gf, e))?;
    rows.push(r);
    Ok(rows)
}

/// Asterisk's prompt texts (`name: Text.`) in dictionary words, or None when
/// the prompt is a tone, a symbol, or has a word the dictionary lacks.
pub fn prompt_words(text: &str, dict: &BTreeSet<String>) -> Option<Vec<String>> {
    const SMALL: [&str; 11] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    if text.contains('[') {
        return None;
    }
    let clean: String = text
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '\'' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let words: Vec<String> = clean
        .split_whitespace()
        .map(|w| match w.parse::<usize>() {
            Ok(n) if n < SMALL.len() => SMALL[n].to_string(),
            _ => w.to_string(),
        })
        .collect();
    (!words.is_empty() && words.iter().all(|w| dict.contains(w))).then_some(words)
}

fn asterisk(dir: &Path, dict: &BTreeSet<String>) -> Result<Vec<Row>, AppError> {
    let gz = std::fs::read(ASTERISK_TEXT).map_err(|e| {
        prep_err(format!(
            "cannot read {ASTERISK_TEXT} ({e}); install Debian `asterisk-core-sounds-en` (the transcripts; only recommended by `asterisk-core-sounds-en-g722`, so `--no-install-recommends` leaves it out)"
        ))
    })?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .map_err(|e| AppError::io(ASTERISK_TEXT, e))?;
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with(';')) {
        let Some((name, said)) = line.split_once(':') else {
            continue;
        };
        let src = Path::new(ASTERISK).join(format!("{}.g722", name.trim()));
        let Some(words) = prompt_words(said, dict) else {
            continue;
        };
        if !src.exists() {
            continue;
        }
        let search = if words.len() == 1 {
            Search::Words
        } else {
            Search::Lm
        };
        let r = row(
            "asterisk",
            &name.trim().replace('/', "-"),
            search,
            words.join(" "),
        );
        let bits = std::fs::read(&src).map_err(|e| AppError::io(&src, e))?;
        let pcm = g722::decode(&bits).map_err(|e| prep_err(format!("{}: {e}", src.display())))?;
        let bytes: Vec<u8> = pcm.iter().flat_map(|s| s.to_le_bytes()).collect();
        let out = dir.join(&r.audio);
        std::fs::write(&out, bytes).map_err(|e| AppError::io(&out, e))?;
        rows.push(r);
    }
    if rows.is_empty() {
        return Err(prep_err(format!(
            "no G.722 prompts under {ASTERISK}; install Debian `asterisk-core-sounds-en-g722`"
        )));
    }
    Ok(rows)
}

/// `<sound name="NAME" file="FILE" />` entries of KLettres' and KTuberling's XML.
fn sound_entries(xml: &str) -> Vec<(String, String)> {
    xml.split("<sound ")
        .skip(1)
        .filter_map(|s| {
            let attr = |k: &str| {
                let start = s.find(&format!("{k}=\""))? + k.len() + 2;
                Some(s[start..start + s[start..].find('"')?].to_string())
            };
            Some((attr("name")?, attr("file")?))
        })
        .collect()
}

/// Isolated words from a sound-theme file; `word` maps a sound name to its
/// transcript.
fn word_list(
    dir: &Path,
    xml: &Path,
    base: &Path,
    source: &str,
    word: impl Fn(&str) -> String,
    dict: &BTreeSet<String>,
) -> Result<Vec<Row>, AppError> {
    let text = std::fs::read_to_string(xml).map_err(|e| {
        prep_err(format!(
            "cannot read {} ({e}); install Debian `{}-data`",
            xml.display(),
            source.split('-').next().unwrap_or(source)
        ))
    })?;
    let mut rows = Vec::new();
    for (name, file) in sound_entries(&text) {
        let w = word(&name);
        if !dict.contains(&w) {
            continue;
        }
        let id = file.trim_end_matches(".ogg").replace('/', "-");
        let r = row(source, &id, Search::Words, w);
        to_raw16k(&base.join(&file), &dir.join(&r.audio))?;
        rows.push(r);
    }
    Ok(rows)
}

fn klettres(dir: &Path, dict: &BTreeSet<String>) -> Result<Vec<Row>, AppError> {
    let mut rows = Vec::new();
    for lang in ["en", "en_GB"] {
        let xml = Path::new(KLETTRES).join(lang).join("sounds.xml");
        let lower = |n: &str| n.to_lowercase();
        rows.extend(word_list(
            dir,
            &xml,
            Path::new(KLETTRES),
            "klettres",
            lower,
            dict,
        )?);
    }
    Ok(rows)
}

fn ktuberling(dir: &Path, dict: &BTreeSet<String>) -> Result<Vec<Row>, AppError> {
    let xml = Path::new(KTUBERLING).join("en.soundtheme");
    // Theme objects are named `theme_object` ("egypt_camel"): the object is said.
    let object = |n: &str| n.rsplit('_').next().unwrap_or(n).to_lowercase();
    word_list(dir, &xml, Path::new(KTUBERLING), "ktuberling", object, dict)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_texts_become_dictionary_words() {
        let dict: BTreeSet<String> = ["press", "one", "to", "accept", "i'm", "sorry"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let w = |t| prompt_words(t, &dict);
        assert_eq!(
            w("Press 1 to accept."),
            Some(vec![
                "press".into(),
                "one".into(),
                "to".into(),
                "accept".into()
            ])
        );
        assert_eq!(w("I'm sorry,"), Some(vec!["i'm".into(), "sorry".into()]));
        assert_eq!(w("[beep tone]"), None);
        assert_eq!(w("Press 25"), None);
        assert_eq!(w(""), None);
    }

    #[test]
    fn sound_entries_parse() {
        let x = r#"<sound name="A" file="en/alpha/A.ogg" />
            <sound name="egypt_camel" file="en/egypt_camel.ogg"/>"#;
        assert_eq!(
            sound_entries(x),
            vec![
                ("A".into(), "en/alpha/A.ogg".into()),
                ("egypt_camel".into(), "en/egypt_camel.ogg".into())
            ]
        );
    }
}
