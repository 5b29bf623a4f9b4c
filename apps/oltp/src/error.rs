//! Errors of the TPC-C apps. They become [`taillab_core::AppError`] at the API edge.

use taillab_core::AppError;

#[derive(Debug, thiserror::Error)]
pub enum OltpError {
    #[error("SQLite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("malformed TPC-C request: {0} (requests must come from the oltp client of the same taillab version)")]
    BadRequest(String),
    #[error("malformed TPC-C response: {0}")]
    BadResponse(String),
    #[error(
        "request names warehouse {got} but the database has {have} (give the client and the server the same --set warehouses=)"
    )]
    NoSuchWarehouse { got: u32, have: u32 },
    #[error("transaction still blocked by other writers after {0} attempts (fewer workers, or --set lock=mutex)")]
    Busy(u32),
    #[error("i/o error on {path}: {source}")]
    Io {
        path: std::path::PathBuf,
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
