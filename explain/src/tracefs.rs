//! The kernel's tracefs: where each tracepoint's id and record layout are read.
//!
//! Offsets are never hard-coded: every field the decoder reads is looked up by name in the
//! tracepoint's `format` file, so a kernel that moves a field (they have: `prev_state` grew
//! from `int` to `long`) is read right or refused with the field named.

use crate::error::ExplainError;
use std::path::{Path, PathBuf};

/// The usual mount points, the first where a kernel mounts it itself.
const PLACES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// A mounted tracefs.
#[derive(Debug, Clone)]
pub struct Tracefs {
    root: PathBuf,
}

/// One field of a tracepoint's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Its name (`prev_pid`).
    pub name: String,
    /// Bytes from the start of the raw record.
    pub offset: usize,
    /// Its size in bytes (of the whole array for `char x[16]`).
    pub size: usize,
    /// A signed integer.
    pub signed: bool,
    /// `__data_loc`: a u32 whose low half is the offset and high half the length of the data.
    pub data_loc: bool,
}

/// A tracepoint's id and fields, from its `format` file.
#[derive(Debug, Clone)]
pub struct Format {
    /// `sys:name`.
    pub name: String,
    /// The id perf_event_open takes (and the raw record's `common_type`).
    pub id: u64,
    fields: Vec<Field>,
    path: PathBuf,
}

impl Tracefs {
    /// The mounted tracefs; as root, mounts it at `/sys/kernel/tracing` when nothing is
    /// mounted (as the kernel does on most distributions; Debian's VMs do not).
    /// `TAILLAB_TRACEFS`, when set, names the mount point instead (a host that mounts it
    /// elsewhere; the tests' stand-ins): it is never mounted, only read.
    pub fn find() -> Result<Tracefs, ExplainError> {
        if let Some(dir) = std::env::var_os("TAILLAB_TRACEFS") {
            let t = Tracefs::at(&dir);
            if !t.mounted() {
                return Err(ExplainError::NoTracefs {
                    why: format!("TAILLAB_TRACEFS={} has no events folder", t.root.display()),
                });
            }
            return Ok(t);
        }
        if let Some(t) = PLACES.iter().map(Tracefs::at).find(Tracefs::mounted) {
            return Ok(t);
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(ExplainError::NoTracefs {
                why: format!("no events folder in {}", PLACES.join(" or ")),
            });
        }
        let t = Tracefs::at(PLACES[0]);
        mount_tracefs(&t.root)?;
        Ok(t)
    }

    /// The tracefs mounted at `root` (tests give a folder of their own).
    pub fn at(root: impl AsRef<Path>) -> Tracefs {
        Tracefs {
            root: root.as_ref().to_path_buf(),
        }
    }

    fn mounted(&self) -> bool {
        self.root.join("events").is_dir()
    }

    /// Where it is mounted.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether `sys:name` exists.
    pub fn has(&self, sys: &str, name: &str) -> bool {
        self.root.join("events").join(sys).join(name).is_dir()
    }

    /// The format of `sys:name`, or why it cannot be read.
    pub fn format(
        &self,
        sys: &str,
        name: &str,
        config: &'static str,
    ) -> Result<Format, ExplainError> {
        let dir = self.root.join("events").join(sys).join(name);
        let full = format!("{sys}:{name}");
        if !dir.is_dir() {
            return Err(ExplainError::MissingTracepoint {
                name: full,
                path: dir,
                config,
            });
        }
        let path = dir.join("format");
        let text = std::fs::read_to_string(&path).map_err(|source| ExplainError::Io {
            path: path.clone(),
            source,
        })?;
        Format::parse(&full, &text, path)
    }
}

fn mount_tracefs(at: &Path) -> Result<(), ExplainError> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let target = c(&at.to_string_lossy());
    let fs = c("tracefs");
    // SAFETY: every pointer is a NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            fs.as_ptr(),
            target.as_ptr(),
            fs.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(ExplainError::NoTracefs {
            why: format!("mounting it at {} failed: {e}", at.display()),
        });
    }
    Ok(())
}

impl Format {
    /// Parses a `format` file's text.
    pub fn parse(name: &str, text: &str, path: PathBuf) -> Result<Format, ExplainError> {
        let bad = |why: String| ExplainError::Format {
            name: name.to_string(),
            path: path.clone(),
            why,
        };
        let id = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("ID:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| bad("no `ID:` line".into()))?;
        let mut fields = Vec::new();
        for l in text.lines().map(str::trim) {
            let Some(rest) = l.strip_prefix("field:") else {
                continue;
            };
            fields.push(parse_field(rest).ok_or_else(|| bad(format!("unreadable line `{l}`")))?);
        }
        Ok(Format {
            name: name.to_string(),
            id,
            fields,
            path,
        })
    }

    /// The field `name`, which must be an integer of one of `sizes` bytes (or a
    /// `__data_loc` string when `sizes` is empty, or a char array of that size).
    pub fn field(&self, name: &str, sizes: &[usize]) -> Result<Field, ExplainError> {
        let f = self
            .fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| self.bad(format!("no field `{name}`")))?;
        let fits = if sizes.is_empty() {
            f.data_loc
        } else {
            !f.data_loc && sizes.contains(&f.size)
        };
        if !fits {
            return Err(self.bad(format!(
                "field `{name}` has size {} (expected {sizes:?}{})",
                f.size,
                if sizes.is_empty() {
                    ", a __data_loc string"
                } else {
                    ""
                }
            )));
        }
        Ok(f.clone())
    }

    fn bad(&self, why: String) -> ExplainError {
        ExplainError::Format {
            name: self.name.clone(),
            path: self.path.clone(),
            why,
        }
    }
}

/// `unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;` → a [`Field`].
fn parse_field(rest: &str) -> Option<Field> {
    let mut parts = rest.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut num = |key: &str| -> Option<usize> {
        parts
            .next()?
            .strip_prefix(key)?
            .trim()
            .strip_prefix(':')?
            .trim()
            .parse()
            .ok()
    };
    let offset = num("offset")?;
    let size = num("size")?;
    let signed = num("signed")? == 1;
    // The name is the declaration's last word, less any array suffix.
    let last = decl.split_whitespace().last()?;
    let name = last.split('[').next()?.to_string();
    Some(Field {
        name,
        offset,
        size,
        signed,
        data_loc: decl.starts_with("__data_loc"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\nprint fmt: \"...\"\n";

    #[test]
    fn a_format_file_gives_each_field_its_offset_and_size() {
        let f = Format::parse("sched:sched_switch", SWITCH, "x".into()).unwrap();
        assert_eq!(f.id, 372);
        let s = f.field("prev_state", &[4, 8]).unwrap();
        assert_eq!((s.offset, s.size, s.signed), (32, 8, true));
        let c = f.field("prev_comm", &[16]).unwrap();
        assert_eq!((c.offset, c.size), (8, 16));
        assert!(f.field("name", &[]).unwrap().data_loc);
        // A field of an unexpected size or a missing one is refused, naming it.
        let e = f.field("prev_pid", &[8]).unwrap_err().to_string();
        assert!(e.contains("prev_pid") && e.contains("size 4"), "{e}");
        let e = f.field("next_pid", &[4]).unwrap_err().to_string();
        assert!(e.contains("no field `next_pid`"), "{e}");
        let e = Format::parse("x:y", "format:\n", "p".into()).unwrap_err();
        assert!(e.to_string().contains("no `ID:` line"), "{e}");
    }

    #[test]
    fn a_missing_tracepoint_names_itself_and_the_kernel_option() {
        let dir = std::env::temp_dir().join(format!("taillab-tracefs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("events/sched/sched_switch")).unwrap();
        std::fs::write(dir.join("events/sched/sched_switch/format"), SWITCH).unwrap();
        let t = Tracefs::at(&dir);
        assert!(t.mounted() && t.has("sched", "sched_switch"));
        assert_eq!(t.format("sched", "sched_switch", "X").unwrap().id, 372);
        let e = t
            .format("exceptions", "page_fault_user", "CONFIG_X86")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("exceptions:page_fault_user") && e.contains("CONFIG_X86"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
