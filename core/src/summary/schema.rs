//! The JSON Schema of `summary.json`, generated from the types; reading a file against the
//! schemas it may carry; RFC 3339 time stamps.

use super::*;

/// The JSON Schema of `summary.json` ([`RUN_SCHEMA`]), generated from [`Summary`]:
/// what `docs/schema/run-2.json` holds and `taillab config schema run` prints.
/// It describes what a reader accepts (keys with defaults are optional); keys it
/// does not name are allowed, as readers ignore them.
pub fn run_schema() -> Value {
    let mut s = serde_json::to_value(schemars::schema_for!(Summary)).unwrap_or_default();
    if let Value::Object(m) = &mut s {
        m.insert(
            "$id".into(),
            Value::String("https://taillab.invalid/schema/run-2.json".into()),
        );
        m.insert(
            "description".into(),
            Value::String(format!(
                "summary.json of one taillab run, schema `{RUN_SCHEMA}` (also reads `taillab.run/1` \
                 files). Generated from the Rust types (core/src/summary.rs, core/src/sections/) \
                 by `taillab config schema run`; do not edit by hand."
            )),
        );
    }
    s
}

/// Reads a JSON result file whose `schema` field must be `want`.
pub fn read_with_schema<T: serde::de::DeserializeOwned>(
    path: &Path,
    want: &str,
) -> Result<T, ResultError> {
    read_with_schemas(path, &[want])
}

/// Reads a JSON result file whose `schema` field must be one of `want`. A value
/// of the wrong shape is an error naming its key (`environment.steal_pct: invalid
/// type: string "x", expected f64`).
pub fn read_with_schemas<T: serde::de::DeserializeOwned>(
    path: &Path,
    want: &[&str],
) -> Result<T, ResultError> {
    let read_err = |why: String| ResultError::Read {
        path: path.into(),
        why,
    };
    let txt = std::fs::read_to_string(path).map_err(|e| read_err(e.to_string()))?;
    let v: Value = serde_json::from_str(&txt).map_err(|e| read_err(e.to_string()))?;
    let found = v
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or("(none)")
        .to_string();
    if !want.contains(&found.as_str()) {
        return Err(ResultError::Schema {
            path: path.into(),
            found,
            want: want.join("` or `"),
        });
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let key = e.path().to_string();
        read_err(if key == "." {
            e.inner().to_string()
        } else {
            format!("{key}: {}", e.inner())
        })
    })
}

/// Formats a SystemTime as RFC 3339 UTC (no external date crate needed).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}
