//! `taillab data prepare speech`: the data folder built from the recorded set
//! ([`crate::sources`]), the synthesized AN4-style set ([`crate::an4`]), the grammars and the
//! WER of every set ([`crate::score`]); the layout is in [`crate::data`].

use std::fmt::Write as _;
use std::path::Path;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::AppError;

use crate::data::{decoder_configs, prep_err, Row, Search, TESTDATA};
use crate::ffi::Decoder;
use crate::{an4, score, sources};

/// Builds the data folder: the recorded set, the synthesized AN4-style set,
/// the grammars, the manifest, and the WER of every set.
pub fn build(dir: &Path, an4_count: usize, seed: u64) -> Result<(), AppError> {
    let audio = dir.join("audio");
    std::fs::create_dir_all(&audio).map_err(|e| AppError::io(&audio, e))?;
    let dict = sources::dictionary()?;
    let mut rows = sources::recorded(dir, &dict)?;
    rows.extend(synthesize_an4(dir, an4_count, seed)?);
    write_grammars(dir, &rows)?;
    let mut manifest = String::from("id\tset\tsource\tsearch\taudio\ttranscript\n");
    for r in &rows {
        let search = r.search.name();
        let (id, set, source, audio, text) = (&r.id, r.set, &r.source, &r.audio, &r.transcript);
        writeln!(manifest, "{id}\t{set}\t{source}\t{search}\t{audio}\t{text}").ok();
    }
    let m = dir.join("utts.tsv");
    std::fs::write(&m, manifest).map_err(|e| AppError::io(&m, e))?;
    // Fail here, with the grammar named, rather than on the first worker.
    for cfg in decoder_configs(dir) {
        Decoder::new(&cfg).map_err(|e| prep_err(e.0))?;
    }
    score::write(dir)
}

/// The testdata grammars, the AN4 grammar and the recorded word list.
fn write_grammars(dir: &Path, rows: &[Row]) -> Result<(), AppError> {
    let testdata = Path::new(TESTDATA);
    for g in ["cards/cards.gram", "goforward.gram"] {
        let src = testdata.join(g);
        let dst = dir.join(Path::new(g).file_name().unwrap_or_default());
        std::fs::copy(&src, &dst).map_err(|e| AppError::io(&src, e))?;
    }
    let words: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.search == Search::Words)
        .map(|r| r.transcript.as_str())
        .collect();
    let list: Vec<&str> = words.into_iter().collect();
    let words_gram = format!(
        "#JSGF V1.0;\n\n// Every isolated word of the recorded set.\ngrammar words;\n\npublic <word> = {};\n",
        list.join(" | ")
    );
    for (file, text) in [("an4.gram", an4::grammar()), ("words.gram", words_gram)] {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| AppError::io(&path, e))?;
    }
    Ok(())
}

/// Speaks `count` AN4-style prompts, each in a voice, rate, pitch and noise
/// level drawn with `seed`.
fn synthesize_an4(dir: &Path, count: usize, seed: u64) -> Result<Vec<Row>, AppError> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let tmp = dir.join("tmp.wav");
    let mut rows = Vec::with_capacity(count);
    for i in 0..count {
        let (words, spoken) = an4::prompt(&mut rng);
        let d = an4::Delivery::draw(&mut rng);
        let r = Row {
            id: format!("an4-{i:04}"),
            set: "an4",
            source: d.voice.name(),
            search: Search::An4,
            audio: format!("audio/an4-{i:04}.raw"),
            transcript: words.join(" "),
        };
        an4::synthesize(&spoken, d, &tmp, &dir.join(&r.audio))?;
        rows.push(r);
    }
    let _ = std::fs::remove_file(&tmp);
    Ok(rows)
}
