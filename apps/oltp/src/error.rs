//! Errors of the TPC-C apps. They become [`taillab_core::AppError`] at the API edge.

use taillab_core::AppError;

/// What can go wrong preparing, serving or checking TPC-C; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OltpError {
    /// SQLite failed (a bug or a damaged database; busy errors become [`OltpError::Busy`]).
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A request that does not decode or is out of range (wrong client or version).
    #[error("malformed TPC-C request: {0} (requests must come from the oltp client of the same taillab version)")]
    BadRequest(String),
    /// A response that does not decode (wrong server or version).
    #[error("malformed TPC-C response: {0}")]
    BadResponse(String),
    #[error(
        "request names warehouse {got} but the database has {have} (give the client and the server the same --set warehouses=)"
    )]
    /// A request names a warehouse the database does not have: client and server
    /// disagree on `warehouses`.
    NoSuchWarehouse {
        /// The largest warehouse id the request names.
        got: u32,
        /// Warehouses in the server's database.
        have: u32,
    },
    /// SQLite kept reporting the database busy or locked; the value is the attempts made.
    #[error("transaction still blocked by other writers after {0} attempts (fewer workers, or --set lock=mutex)")]
    Busy(u32),
    #[error("i/o error on {path}: {source}")]
    /// Reading, copying or removing a database file or scratch folder failed.
    Io {
        /// The file or folder.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl From<OltpError> for AppError {
    fn from(e: OltpError) -> Self {
        match e {
            OltpError::BadRequest(_) | OltpError::NoSuchWarehouse { .. } => {
                AppError::Request(e.to_string())
            }
            OltpError::Io { path, source } => AppError::Io { path, source },
            other => AppError::Engine {
                engine: "SQLite (TPC-C)".into(),
                why: other.to_string(),
            },
        }
    }
}
