//! Where the documents come from: three Debian packages of English text, or
//! any folder of text files the user points us at.
//!
//! Each reader streams [`Doc`]s into a callback so the whole corpus never sits
//! in memory twice (GCIDE alone is 40 MB of text once decompressed).

use std::io::Read;
use std::path::{Path, PathBuf};

use taillab_core::AppError;

/// Installed by `dict-gcide`: the dictd database (a dictzip file, which is
/// plain gzip to a reader that does not seek).
pub const GCIDE_DICT: &str = "/usr/share/dictd/gcide.dict.dz";
/// Installed by `dict-gcide`: the headword index of [`GCIDE_DICT`] (word,
/// offset and length of each entry).
pub const GCIDE_INDEX: &str = "/usr/share/dictd/gcide.index";
/// Installed by `wordnet-base`.
pub const WORDNET_DIR: &str = "/usr/share/wordnet";
/// Installed by `linux-doc-6.1`: the kernel's reST sources, gzipped.
pub const LINUX_DOC_DIR: &str = "/usr/share/doc/linux-doc-6.1/Documentation";

/// One document to index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// Where it came from: a [`Source::name`], or `custom` for a user corpus.
    pub source: &'static str,
    /// Headword, synset words, file path or `line N`; stored, returned with hits, not searched.
    pub title: String,
    /// The searched text (for the Debian sources it starts with the title text).
    pub body: String,
}

/// A Debian source of documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// GCIDE (Webster 1913) dictionary entries, one document per headword.
    Gcide,
    /// WordNet synsets, one document per synset (words and gloss).
    Wordnet,
    /// The Linux kernel's reST documentation, one document per file.
    LinuxDoc,
}

impl Source {
    /// Every source, in index order (the default `sources`).
    pub const ALL: [Source; 3] = [Source::Gcide, Source::Wordnet, Source::LinuxDoc];

    /// The name the `sources` key takes (`gcide`, `wordnet`, `linux-doc`).
    pub fn name(self) -> &'static str {
        match self {
            Source::Gcide => "gcide",
            Source::Wordnet => "wordnet",
            Source::LinuxDoc => "linux-doc",
        }
    }

    /// The Debian package that installs it (named in the error when it is missing).
    pub fn package(self) -> &'static str {
        match self {
            Source::Gcide => "dict-gcide",
            Source::Wordnet => "wordnet-base",
            Source::LinuxDoc => "linux-doc-6.1",
        }
    }

    /// The source named `s` (see [`Source::name`]); `None` for any other string.
    pub fn parse(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Streams this source's documents, at most `max` of them (0: all).
    pub fn read(self, max: usize, sink: &mut dyn FnMut(Doc)) -> Result<usize, AppError> {
        match self {
            Source::Gcide => read_gcide(max, sink),
            Source::Wordnet => read_wordnet(max, sink),
            Source::LinuxDoc => read_linux_doc(max, sink),
        }
    }

    fn missing(self, path: &str) -> AppError {
        AppError::Prepare {
            app: "search".into(),
            why: format!(
                "{path} not found: install the Debian package {} (`apt-get install {}`, or \
                 scripts/setup.sh), or pick other sources with --set sources=",
                self.package(),
                self.package()
            ),
        }
    }
}

fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> AppError {
    let path = path.into();
    move |e| AppError::io(path, e)
}

fn gunzip(path: &Path) -> Result<Vec<u8>, AppError> {
    let f = std::fs::File::open(path).map_err(io_err(path))?;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f))
        .read_to_end(&mut out)
        .map_err(io_err(path))?;
    Ok(out)
}

/// dictd's index encodes offsets and lengths as base-64 numbers, most
/// significant digit first.
fn dictd_b64(s: &str) -> Option<usize> {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    s.bytes().try_fold(0usize, |acc, c| {
        Some(acc * 64 + A.iter().position(|&a| a == c)?)
    })
}

/// One document per GCIDE entry. Several headwords can point at one entry
/// (variant spellings); it is indexed once, titled by its first headword.
fn read_gcide(max: usize, sink: &mut dyn FnMut(Doc)) -> Result<usize, AppError> {
    if !Path::new(GCIDE_INDEX).exists() {
        return Err(Source::Gcide.missing(GCIDE_INDEX));
    }
    let index = std::fs::read_to_string(GCIDE_INDEX).map_err(io_err(GCIDE_INDEX))?;
    let dict = gunzip(Path::new(GCIDE_DICT))?;
    let mut seen = std::collections::HashSet::new();
    let mut n = 0;
    for line in index.lines() {
        let mut f = line.split('\t');
        let (Some(word), Some(off), Some(len)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        // The 00-database-* entries describe the database, not English.
        if word.starts_with("00-database") || word.starts_with("00database") {
            continue;
        }
        let (Some(off), Some(len)) = (dictd_b64(off), dictd_b64(len)) else {
            continue;
        };
        if off + len > dict.len() || !seen.insert(off) {
            continue;
        }
        let body = String::from_utf8_lossy(&dict[off..off + len]).into_owned();
        sink(Doc {
            source: "gcide",
            title: word.to_string(),
            body,
        });
        n += 1;
        if n == max {
            break;
        }
    }
    Ok(n)
}

/// One document per WordNet synset: its words as the title, its gloss (the
/// definition and the quoted example sentences) as the body.
fn read_wordnet(max: usize, sink: &mut dyn FnMut(Doc)) -> Result<usize, AppError> {
    let mut n = 0;
    for pos in ["noun", "verb", "adj", "adv"] {
        let path = Path::new(WORDNET_DIR).join(format!("data.{pos}"));
        if !path.exists() {
            return Err(Source::Wordnet.missing(&path.display().to_string()));
        }
        let text = std::fs::read_to_string(&path).map_err(io_err(&path))?;
        // Licence header lines start with two spaces; synset lines with
        // their 8-digit offset.
        for line in text
            .lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        {
            let Some((head, gloss)) = line.split_once(" | ") else {
                continue;
            };
            let f: Vec<&str> = head.split(' ').collect();
            let Some(count) = f.get(3).and_then(|c| usize::from_str_radix(c, 16).ok()) else {
                continue;
            };
            let words: Vec<String> = (0..count)
                .filter_map(|i| f.get(4 + 2 * i))
                .map(|w| w.replace('_', " "))
                .collect();
            let title = words.join(", ");
            let body = format!("{title}: {}", gloss.trim());
            sink(Doc {
                source: "wordnet",
                title,
                body,
            });
            n += 1;
            if n == max {
                return Ok(n);
            }
        }
    }
    Ok(n)
}

/// Files under `dir` (recursively) in a stable order.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), AppError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.is_file() {
            out.push(p);
        }
    }
    Ok(())
}

/// One document per reST file of the kernel documentation, titled by its path.
fn read_linux_doc(max: usize, sink: &mut dyn FnMut(Doc)) -> Result<usize, AppError> {
    let root = Path::new(LINUX_DOC_DIR);
    if !root.exists() {
        return Err(Source::LinuxDoc.missing(LINUX_DOC_DIR));
    }
    let mut files = Vec::new();
    walk(root, &mut files)?;
    let mut n = 0;
    for p in files
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".rst.gz"))
    {
        let body = String::from_utf8_lossy(&gunzip(p)?).into_owned();
        let rel = p.strip_prefix(root).unwrap_or(p).to_string_lossy();
        let title = rel.trim_end_matches(".gz").to_string();
        sink(Doc {
            source: "linux-doc",
            title,
            body,
        });
        n += 1;
        if n == max {
            break;
        }
    }
    Ok(n)
}

/// A user corpus: a folder of text files (each file a document, `.gz` files
/// decompressed, files that are not UTF-8 skipped) or one text file (each
/// non-empty line a document).
pub fn read_custom(path: &Path, max: usize, sink: &mut dyn FnMut(Doc)) -> Result<usize, AppError> {
    let mut n = 0;
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(io_err(path))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            sink(Doc {
                source: "custom",
                title: format!("line {}", i + 1),
                body: line.into(),
            });
            n += 1;
            if n == max {
                break;
            }
        }
        return Ok(n);
    }
    if !path.is_dir() {
        return Err(AppError::BadParam {
            key: "corpus".into(),
            value: path.display().to_string(),
            expected: "`debian` or the path of an existing folder of text files or text file"
                .into(),
        });
    }
    let mut files = Vec::new();
    walk(path, &mut files)?;
    for p in files {
        let bytes = if p.extension().is_some_and(|e| e == "gz") {
            gunzip(&p)?
        } else {
            std::fs::read(&p).map_err(io_err(&p))?
        };
        let Ok(body) = String::from_utf8(bytes) else {
            continue;
        };
        let title = p
            .strip_prefix(path)
            .unwrap_or(&p)
            .to_string_lossy()
            .into_owned();
        sink(Doc {
            source: "custom",
            title,
            body,
        });
        n += 1;
        if n == max {
            break;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictd_numbers() {
        assert_eq!(dictd_b64("A"), Some(0));
        assert_eq!(dictd_b64("BA"), Some(64));
        assert_eq!(dictd_b64("Fz"), Some(5 * 64 + 51));
        assert_eq!(dictd_b64("*"), None);
    }

    #[test]
    fn custom_file_is_one_doc_per_line() {
        let p = std::env::temp_dir().join(format!("taillab-corpus-{}.txt", std::process::id()));
        std::fs::write(&p, "alpha beta\n\n gamma \n").unwrap();
        let mut docs = Vec::new();
        assert_eq!(read_custom(&p, 0, &mut |d| docs.push(d)).unwrap(), 2);
        assert_eq!(docs[1].title, "line 3");
        std::fs::remove_file(&p).unwrap();
        let e = read_custom(Path::new("/nonexistent/x"), 0, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("corpus"), "{e}");
    }
}
