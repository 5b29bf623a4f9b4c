//! A run's per-request records on disk (`record.save_requests`): `requests.csv` or
//! `requests.parquet` (`record.format`), the same columns either way.
//!
//! Columns, in this order: [`BASE_COLUMNS`] (id, worker, the six stamps, measured, the two
//! user-space reads), then `ideal_completed` when the run has an ideal, then the request's
//! anatomy when it was explained (`record.explain`: [`crate::sections::anatomy::COLUMNS`]),
//! then the process that
//! sent the row ([`Sender`]): `client` in a run with several TCP clients, `leaf` in a fan-out's
//! (one row per leaf's answer). Stamps are ns on the harness's monotonic clock.
//!
//! Parquet is written with the file API of the `parquet` crate (no Arrow): every column a
//! 64-bit integer, delta-encoded (ids and stamps grow by small steps, so a request takes a
//! few bytes a column), uncompressed, in row groups of [`ROW_GROUP`] requests. Only the row
//! group being filled is held (its columns, 8 bytes a value), so the writer's memory does not
//! grow with the run: 10 M records cost it the same ~30 MB as 300 k (bench/records). pandas
//! (pyarrow) reads every column as int64, the dtype it gives requests.csv.

use crate::collector::Stamps;
use crate::sections::anatomy::{AnatomyRow, COLUMNS as ANATOMY_COLUMNS};
use parquet::basic::{Compression, Encoding};
use parquet::data_type::Int64Type;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

crate::names_enum! {
    /// The file a run's per-request records go to (`record.save_requests`).
    #[derive(Default)]
    pub enum RequestFormat ("records format") {
        /// `requests.csv`: a line of text per request.
        #[default]
        Csv = "csv",
        /// `requests.parquet`: the same columns as 64-bit integers, delta-encoded, written in row groups (bounded memory, a few bytes a value, read by pandas in seconds).
        Parquet = "parquet",
    }
}

crate::names_enum! {
    /// Who the last column of a run split across client processes names (its name is the column's).
    pub enum Sender ("records sender column") {
        /// The client that sent the request (several clients share the run's rate).
        Client = "client",
        /// The fan-out leaf that answered it (each leaf's client sends every request).
        Leaf = "leaf",
    }
}

/// The columns every records file has, in order.
pub const BASE_COLUMNS: [&str; 11] = [
    "id",
    "worker",
    "intended",
    "sent",
    "enqueued",
    "started",
    "finished",
    "completed",
    "measured",
    "enqueued_user",
    "completed_user",
];

/// Requests in one Parquet row group: the most the writer holds at once.
pub const ROW_GROUP: usize = 1 << 18;

/// One request's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The request's index in the schedule (several clients: in merged intended order).
    pub id: u64,
    /// The worker that served it.
    pub worker: u64,
    /// Its stamps.
    pub stamps: Stamps,
    /// In the measured phase.
    pub measured: bool,
    /// When the run's ideal completed it (the `ideal_completed` column).
    pub ideal_completed: Option<u64>,
    /// The client or fan-out leaf it came from (the [`Sender`] column), numbered from 0.
    pub sender: Option<u64>,
    /// Its anatomy (the `x_*` columns), when the run was explained.
    pub anatomy: Option<AnatomyRow>,
}

impl Row {
    /// A row from the [`BASE_COLUMNS`] values, in their order.
    pub fn from_base(v: &[u64; 11]) -> Row {
        Row {
            id: v[0],
            worker: v[1],
            stamps: Stamps {
                intended: v[2],
                sent: v[3],
                enqueued: v[4],
                started: v[5],
                finished: v[6],
                completed: v[7],
                enqueued_user: v[9],
                completed_user: v[10],
            },
            measured: v[8] == 1,
            ideal_completed: None,
            sender: None,
            anatomy: None,
        }
    }

    /// The [`BASE_COLUMNS`] values, in their order.
    pub fn base(&self) -> [u64; 11] {
        let s = &self.stamps;
        [
            self.id,
            self.worker,
            s.intended,
            s.sent,
            s.enqueued,
            s.started,
            s.finished,
            s.completed,
            self.measured as u64,
            s.enqueued_user,
            s.completed_user,
        ]
    }
}

/// The optional columns a file has.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extra {
    /// `ideal_completed`.
    pub ideal: bool,
    /// The anatomy columns (`x_*`).
    pub anatomy: bool,
    /// `client` or `leaf`.
    pub sender: Option<Sender>,
}

impl Extra {
    /// Every column's name, in file order.
    pub fn columns(self) -> Vec<&'static str> {
        let mut c = BASE_COLUMNS.to_vec();
        if self.ideal {
            c.push("ideal_completed");
        }
        if self.anatomy {
            c.extend(ANATOMY_COLUMNS);
        }
        if let Some(s) = self.sender {
            c.push(s.name());
        }
        c
    }

    /// A row's values, in file order (a missing optional value is 0).
    fn values(self, r: &Row) -> impl Iterator<Item = u64> {
        let ideal = self.ideal.then(|| r.ideal_completed.unwrap_or(0));
        let anatomy = self
            .anatomy
            .then(|| r.anatomy.unwrap_or_default())
            .into_iter()
            .flatten();
        let sender = self.sender.map(|_| r.sender.unwrap_or(0));
        r.base()
            .into_iter()
            .chain(ideal)
            .chain(anatomy)
            .chain(sender)
    }
}

/// The file name of each format.
pub fn file_name(f: RequestFormat) -> &'static str {
    match f {
        RequestFormat::Csv => "requests.csv",
        RequestFormat::Parquet => "requests.parquet",
    }
}

/// The records file of a run folder, whichever format it was written in.
pub fn find(run_dir: &Path) -> Option<PathBuf> {
    [RequestFormat::Parquet, RequestFormat::Csv]
        .into_iter()
        .map(|f| run_dir.join(file_name(f)))
        .find(|p| p.exists())
}

fn pq(e: parquet::errors::ParquetError) -> std::io::Error {
    std::io::Error::other(e)
}

/// Writes rows, one at a time, in either format.
pub enum RowWriter {
    /// `requests.csv`.
    Csv(BufWriter<std::fs::File>, Extra),
    /// `requests.parquet`.
    Parquet(Box<ParquetRows>),
}

impl RowWriter {
    /// Creates `dir/requests.<format>` with the columns of `extra`.
    pub fn create(dir: &Path, format: RequestFormat, extra: Extra) -> std::io::Result<RowWriter> {
        Self::with_row_group(dir, format, extra, ROW_GROUP)
    }

    /// [`RowWriter::create`] with Parquet row groups of `group` rows.
    pub fn with_row_group(
        dir: &Path,
        format: RequestFormat,
        extra: Extra,
        group: usize,
    ) -> std::io::Result<RowWriter> {
        let f = std::fs::File::create(dir.join(file_name(format)))?;
        Ok(match format {
            RequestFormat::Csv => {
                let mut w = BufWriter::new(f);
                writeln!(w, "{}", extra.columns().join(","))?;
                RowWriter::Csv(w, extra)
            }
            RequestFormat::Parquet => {
                RowWriter::Parquet(Box::new(ParquetRows::new(f, extra, group.max(1))?))
            }
        })
    }

    /// Adds one row.
    #[inline]
    pub fn push(&mut self, r: &Row) -> std::io::Result<()> {
        match self {
            RowWriter::Csv(w, extra) => {
                let mut first = true;
                for v in extra.values(r) {
                    if !first {
                        w.write_all(b",")?;
                    }
                    first = false;
                    write!(w, "{v}")?;
                }
                w.write_all(b"\n")
            }
            RowWriter::Parquet(p) => p.push(r),
        }
    }

    /// Writes what is buffered and closes the file.
    pub fn finish(self) -> std::io::Result<()> {
        match self {
            RowWriter::Csv(mut w, _) => w.flush(),
            RowWriter::Parquet(p) => p.finish(),
        }
    }
}

/// A Parquet file written one row group at a time (see the module docs).
pub struct ParquetRows {
    w: SerializedFileWriter<BufWriter<std::fs::File>>,
    extra: Extra,
    cols: Vec<Vec<i64>>,
    group: usize,
}

impl ParquetRows {
    fn new(f: std::fs::File, extra: Extra, group: usize) -> std::io::Result<ParquetRows> {
        let names = extra.columns();
        let fields: String = names
            .iter()
            .map(|n| format!("REQUIRED INT64 {n}; "))
            .collect();
        let schema =
            parquet::schema::parser::parse_message_type(&format!("message requests {{ {fields}}}"))
                .map_err(pq)?;
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_encoding(Encoding::DELTA_BINARY_PACKED)
            .set_compression(Compression::UNCOMPRESSED)
            .set_created_by(format!("taillab {}", env!("CARGO_PKG_VERSION")))
            .build();
        let w = SerializedFileWriter::new(BufWriter::new(f), Arc::new(schema), Arc::new(props))
            .map_err(pq)?;
        Ok(ParquetRows {
            w,
            extra,
            cols: names.iter().map(|_| Vec::with_capacity(group)).collect(),
            group,
        })
    }

    fn push(&mut self, r: &Row) -> std::io::Result<()> {
        for (c, v) in self.cols.iter_mut().zip(self.extra.values(r)) {
            c.push(v as i64);
        }
        if self.cols[0].len() >= self.group {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> std::io::Result<()> {
        if self.cols[0].is_empty() {
            return Ok(());
        }
        let mut rg = self.w.next_row_group().map_err(pq)?;
        for c in &mut self.cols {
            let mut col = rg
                .next_column()
                .map_err(pq)?
                .expect("one column writer per schema column");
            col.typed::<Int64Type>()
                .write_batch(c, None, None)
                .map_err(pq)?;
            col.close().map_err(pq)?;
            c.clear();
        }
        rg.close().map_err(pq)?;
        Ok(())
    }

    fn finish(mut self) -> std::io::Result<()> {
        self.flush()?;
        self.w.close().map_err(pq)?;
        Ok(())
    }
}

/// A records file of either format read back row by row; a Parquet file one row group at a
/// time, so a replay of a file larger than memory holds only that.
pub struct Rows {
    path: PathBuf,
    extra: Extra,
    src: Source,
}

enum Source {
    Csv {
        lines: std::io::Lines<std::io::BufReader<std::fs::File>>,
        line: usize,
    },
    Parquet {
        file: SerializedFileReader<std::fs::File>,
        next_group: usize,
        cols: Vec<std::vec::IntoIter<i64>>,
    },
}

impl Rows {
    /// Opens `path` (`requests.csv` or `requests.parquet`) and checks its columns.
    pub fn open(path: &Path) -> std::io::Result<Rows> {
        let parquet = path.extension().is_some_and(|e| e == "parquet");
        let (names, src) = if parquet {
            let file = SerializedFileReader::new(std::fs::File::open(path)?).map_err(pq)?;
            let names: Vec<String> = file
                .metadata()
                .file_metadata()
                .schema_descr()
                .columns()
                .iter()
                .map(|c| c.name().to_string())
                .collect();
            let src = Source::Parquet {
                file,
                next_group: 0,
                cols: Vec::new(),
            };
            (names, src)
        } else {
            use std::io::BufRead;
            let mut lines = std::io::BufReader::new(std::fs::File::open(path)?).lines();
            let head = lines.next().transpose()?.unwrap_or_default();
            let names = head.split(',').map(|n| n.trim().to_string()).collect();
            (names, Source::Csv { lines, line: 1 })
        };
        let extra = Extra {
            ideal: names.iter().any(|n| n == "ideal_completed"),
            anatomy: names.iter().any(|n| n == ANATOMY_COLUMNS[0]),
            sender: names.last().and_then(|n| n.parse().ok()),
        };
        if names != extra.columns() {
            return Err(invalid(
                path,
                format!("columns {names:?}: not a taillab records file"),
            ));
        }
        Ok(Rows {
            path: path.to_path_buf(),
            extra,
            src,
        })
    }

    /// The optional columns the file has.
    pub fn extra(&self) -> Extra {
        self.extra
    }

    /// The next row's values, in file order.
    fn values(&mut self) -> Option<std::io::Result<Vec<u64>>> {
        match &mut self.src {
            Source::Csv { lines, line } => {
                let l = match lines.next()? {
                    Ok(l) => l,
                    Err(e) => return Some(Err(e)),
                };
                *line += 1;
                let v: Result<Vec<u64>, _> = l.split(',').map(|x| x.trim().parse()).collect();
                Some(v.map_err(|_| {
                    invalid(
                        &self.path,
                        format!("line {line}: expected integer stamps (a truncated or hand-edited file?)"),
                    )
                }))
            }
            Source::Parquet {
                file,
                next_group,
                cols,
            } => {
                while cols.first().is_none_or(|c| c.len() == 0) {
                    if *next_group == file.num_row_groups() {
                        return None;
                    }
                    match read_group(file, *next_group) {
                        Ok(g) => *cols = g.into_iter().map(Vec::into_iter).collect(),
                        Err(e) => return Some(Err(e)),
                    }
                    *next_group += 1;
                }
                Some(Ok(cols
                    .iter_mut()
                    .map(|c| c.next().unwrap_or(0) as u64)
                    .collect()))
            }
        }
    }
}

impl Iterator for Rows {
    type Item = std::io::Result<Row>;
    fn next(&mut self) -> Option<Self::Item> {
        let v = match self.values()? {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        if v.len() != self.extra.columns().len() {
            return Some(Err(invalid(
                &self.path,
                "a row with a missing or extra column".into(),
            )));
        }
        let mut r = Row::from_base(v[..11].try_into().expect("11 base columns"));
        let mut rest = v[11..].iter().copied();
        if self.extra.ideal {
            r.ideal_completed = rest.next();
        }
        if self.extra.anatomy {
            let mut a = AnatomyRow::default();
            for (x, v) in a.iter_mut().zip(rest.by_ref()) {
                *x = v;
            }
            r.anatomy = Some(a);
        }
        if self.extra.sender.is_some() {
            r.sender = rest.next();
        }
        Some(Ok(r))
    }
}

fn invalid(path: &Path, why: String) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {why}", path.display()),
    )
}

/// Every column of row group `g`.
fn read_group(
    file: &SerializedFileReader<std::fs::File>,
    g: usize,
) -> std::io::Result<Vec<Vec<i64>>> {
    use parquet::column::reader::ColumnReader;
    let rg = file.get_row_group(g).map_err(pq)?;
    let n = rg.metadata().num_rows() as usize;
    let mut out = Vec::new();
    for j in 0..rg.num_columns() {
        let ColumnReader::Int64ColumnReader(mut cr) = rg.get_column_reader(j).map_err(pq)? else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("column {j} is not INT64: not a taillab records file"),
            ));
        };
        let mut vals = Vec::with_capacity(n);
        while vals.len() < n {
            let (recs, _, _) = cr
                .read_records(n - vals.len(), None, None, &mut vals)
                .map_err(pq)?;
            if recs == 0 {
                break;
            }
        }
        out.push(vals);
    }
    Ok(out)
}

/// A whole records file of either format: its optional columns and its rows.
pub fn read_all(path: &Path) -> std::io::Result<(Extra, Vec<Row>)> {
    let rows = Rows::open(path)?;
    let extra = rows.extra();
    Ok((extra, rows.collect::<Result<_, _>>()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: u64, extra: Extra) -> Vec<Row> {
        (0..n)
            .map(|i| {
                let t = 1_000_000_000_000 + i * 7_919 + (i * i) % 13;
                Row {
                    id: i,
                    worker: i % 3,
                    stamps: Stamps {
                        intended: t,
                        sent: t + 5,
                        enqueued: t + 9,
                        started: t + 9 + i % 50,
                        finished: t + 200 + i % 977,
                        completed: t + 210 + i % 977,
                        enqueued_user: t + 11,
                        completed_user: t + 215 + i % 977,
                    },
                    measured: i >= 10,
                    ideal_completed: extra.ideal.then_some(t + 190 + i % 31),
                    sender: extra.sender.map(|_| i % 2),
                    anatomy: extra
                        .anatomy
                        .then(|| std::array::from_fn(|k| i * 13 + k as u64)),
                }
            })
            .collect()
    }

    #[test]
    fn both_formats_read_back_what_was_written_over_several_row_groups() {
        let dir = std::env::temp_dir().join(format!("taillab-reqfile-{}", std::process::id()));
        for extra in [
            Extra::default(),
            Extra {
                ideal: true,
                ..Extra::default()
            },
            Extra {
                sender: Some(Sender::Client),
                ..Extra::default()
            },
            Extra {
                ideal: true,
                anatomy: true,
                sender: Some(Sender::Leaf),
            },
            Extra {
                anatomy: true,
                ..Extra::default()
            },
        ] {
            let want = rows(2_500, extra);
            for f in [RequestFormat::Csv, RequestFormat::Parquet] {
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                // Row groups of 1 000: two full ones and a partial one.
                let mut w = RowWriter::with_row_group(&dir, f, extra, 1_000).unwrap();
                for r in &want {
                    w.push(r).unwrap();
                }
                w.finish().unwrap();
                let path = find(&dir).expect("a records file");
                assert_eq!(path, dir.join(file_name(f)));
                let (e, got) = read_all(&path).unwrap();
                assert_eq!((e, got.len()), (extra, want.len()), "{f}");
                assert_eq!(got, want, "{f} {extra:?}");
            }
        }
        // Nothing but taillab's columns reads.
        std::fs::write(dir.join("requests.csv"), "a,b\n1,2\n").unwrap();
        let e = read_all(&dir.join("requests.csv")).unwrap_err();
        assert!(e.to_string().contains("not a taillab records file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_csv_is_the_header_and_lines_it_always_was() {
        let dir = std::env::temp_dir().join(format!("taillab-reqcsv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let extra = Extra {
            ideal: true,
            ..Extra::default()
        };
        let r = rows(12, extra)[11];
        let mut w = RowWriter::create(&dir, RequestFormat::Csv, extra).unwrap();
        w.push(&r).unwrap();
        w.finish().unwrap();
        let mut old = Vec::new();
        crate::summary::write_request_row(&mut old, r.id, r.worker as usize, r.measured, &r.stamps)
            .unwrap();
        let want = format!(
            "{},ideal_completed\n{},{}\n",
            crate::summary::REQUESTS_CSV_HEADER,
            String::from_utf8(old).unwrap(),
            r.ideal_completed.unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("requests.csv")).unwrap(),
            want
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
