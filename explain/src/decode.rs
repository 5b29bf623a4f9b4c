//! Raw perf records → compact [`Event`]s, with every field read at the offset its
//! tracepoint's `format` file gives ([`crate::tracefs`]).

use crate::error::ExplainError;
use crate::tracefs::{Field, Format, Tracefs};
use std::collections::HashMap;

/// What one event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `sched:sched_switch`: `tid` (prev) leaves the CPU in state `b`, `a` (next) takes it.
    Switch,
    /// `sched:sched_waking`: `tid` (the CPU's current task) wakes `a`, bound for CPU `b`.
    Waking,
    /// `irq:irq_handler_entry` of interrupt `a`.
    IrqEntry,
    /// `irq:irq_handler_exit` of interrupt `a`.
    IrqExit,
    /// `irq:softirq_entry` of vector `a` (`NET_RX` is 3).
    SoftirqEntry,
    /// `irq:softirq_exit` of vector `a`.
    SoftirqExit,
    /// A system vector's entry (`a`: its index in [`VECTORS`]: the local timer, IPIs).
    VectorEntry,
    /// A system vector's exit.
    VectorExit,
    /// `exceptions:page_fault_user` taken by `tid`.
    Fault,
    /// The kernel dropped `a` records on this CPU before this time (PERF_RECORD_LOST).
    Lost,
}

/// One decoded event: 24 bytes, so a run's events stay in memory until the join.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// CLOCK_MONOTONIC, ns: the clock of the harness's stamps.
    pub ts: u64,
    /// The task the event is about (see [`Kind`]).
    pub tid: u32,
    /// What happened.
    pub kind: Kind,
    /// First argument (see [`Kind`]).
    pub a: u32,
    /// Second argument (see [`Kind`]).
    pub b: u32,
}

/// `prev_state` bit the kernel sets for a task switched out while runnable (`R+`:
/// TASK_REPORT_MAX); the low byte is the state it reports (0: running).
pub const PREEMPTED: u32 = 0x100;

/// The state bits of a blocked task, as `prev_state` reports them (S, D, T, t, X, Z, P, I).
pub const STATE_MASK: u32 = 0xff;

/// The softirq vectors' names, by number (the kernel's `softirq_to_name`).
pub const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

/// The system vectors traced where the kernel has them (x86's `irq_vectors`), with names.
pub const VECTORS: [(&str, &str); 6] = [
    ("local_timer", "local timer"),
    ("reschedule", "reschedule IPI"),
    ("call_function", "function-call IPI"),
    ("call_function_single", "function-call IPI (single)"),
    ("irq_work", "irq work"),
    ("x86_platform_ipi", "platform IPI"),
];

/// One tracepoint the tracer opens.
#[derive(Debug, Clone)]
pub struct Tracepoint {
    /// Its format.
    pub format: Format,
    /// What its records become.
    pub kind: Kind,
    /// Its index in [`VECTORS`] (system vectors only).
    pub vector: u32,
    /// The CPUs it is opened on: the traced ones, or every CPU with a filter (wake-ups).
    pub everywhere: bool,
}

/// The tracepoints the join needs, with the kernel option that provides each.
const REQUIRED: [(&str, &str, Kind, &str); 7] = [
    ("sched", "sched_switch", Kind::Switch, "CONFIG_TRACEPOINTS"),
    ("sched", "sched_waking", Kind::Waking, "CONFIG_TRACEPOINTS"),
    (
        "irq",
        "irq_handler_entry",
        Kind::IrqEntry,
        "CONFIG_TRACEPOINTS",
    ),
    (
        "irq",
        "irq_handler_exit",
        Kind::IrqExit,
        "CONFIG_TRACEPOINTS",
    ),
    (
        "irq",
        "softirq_entry",
        Kind::SoftirqEntry,
        "CONFIG_TRACEPOINTS",
    ),
    (
        "irq",
        "softirq_exit",
        Kind::SoftirqExit,
        "CONFIG_TRACEPOINTS",
    ),
    (
        "exceptions",
        "page_fault_user",
        Kind::Fault,
        "x86 (exceptions:page_fault_user is x86's)",
    ),
];

/// The tracepoints of this kernel the tracer opens: every required one (an error names the
/// first missing) and the system vectors it has; the second list names those it lacks.
pub fn tracepoints(fs: &Tracefs) -> Result<(Vec<Tracepoint>, Vec<String>), ExplainError> {
    let mut out = Vec::new();
    for (sys, name, kind, config) in REQUIRED {
        out.push(Tracepoint {
            format: fs.format(sys, name, config)?,
            kind,
            vector: 0,
            everywhere: kind == Kind::Waking,
        });
    }
    let mut missing = Vec::new();
    for (i, (v, _)) in VECTORS.iter().enumerate() {
        for (suffix, kind) in [("entry", Kind::VectorEntry), ("exit", Kind::VectorExit)] {
            let name = format!("{v}_{suffix}");
            if !fs.has("irq_vectors", &name) {
                missing.push(format!("irq_vectors:{name}"));
                continue;
            }
            out.push(Tracepoint {
                format: fs.format("irq_vectors", &name, "x86")?,
                kind,
                vector: i as u32,
                everywhere: false,
            });
        }
    }
    Ok((out, missing))
}

/// How to read one tracepoint's raw record.
#[derive(Debug, Clone)]
struct Layout {
    kind: Kind,
    vector: u32,
    a: Option<Field>,
    b: Option<Field>,
    /// Comm fields: (pid field, comm field) pairs (switch: prev and next; waking: the wakee).
    comms: Vec<(Field, Field)>,
    /// The irq name (`__data_loc`).
    name: Option<Field>,
}

/// Decodes raw records into events and keeps the names they carry.
#[derive(Debug, Default)]
pub struct Decoder {
    by_id: HashMap<u16, Layout>,
    /// Task names by tid, as the switches and wake-ups gave them.
    pub comms: HashMap<u32, String>,
    /// Interrupt names by number.
    pub irqs: HashMap<u32, String>,
    /// Each sampled task's process (tid → tgid), as the samples' pid field gives it.
    pub tgids: HashMap<u32, u32>,
}

impl Decoder {
    /// A decoder for `tps`, each field checked against its format.
    pub fn new(tps: &[Tracepoint]) -> Result<Decoder, ExplainError> {
        let mut d = Decoder::default();
        for tp in tps {
            let f = &tp.format;
            let int = |n: &str| f.field(n, &[1, 2, 4, 8]).map(Some);
            let comm = |p: &str, c: &str| -> Result<(Field, Field), ExplainError> {
                Ok((f.field(p, &[4])?, f.field(c, &[16])?))
            };
            let none = || Ok::<_, ExplainError>(None);
            let (a, b, comms, name) = match tp.kind {
                Kind::Switch => (
                    int("next_pid")?,
                    int("prev_state")?,
                    vec![
                        comm("prev_pid", "prev_comm")?,
                        comm("next_pid", "next_comm")?,
                    ],
                    None,
                ),
                Kind::Waking => (
                    int("pid")?,
                    int("target_cpu")?,
                    vec![comm("pid", "comm")?],
                    None,
                ),
                Kind::IrqEntry => (int("irq")?, none()?, vec![], Some(f.field("name", &[])?)),
                Kind::IrqExit => (int("irq")?, none()?, vec![], None),
                Kind::SoftirqEntry | Kind::SoftirqExit => (int("vec")?, none()?, vec![], None),
                Kind::VectorEntry | Kind::VectorExit | Kind::Fault | Kind::Lost => {
                    (None, None, vec![], None)
                }
            };
            d.by_id.insert(
                tp.format.id as u16,
                Layout {
                    kind: tp.kind,
                    vector: tp.vector,
                    a,
                    b,
                    comms,
                    name,
                },
            );
        }
        Ok(d)
    }

    /// One PERF_RECORD_SAMPLE's body (sample_type TID | TIME | RAW) → its event, or `None`
    /// for a record that is not one of ours.
    pub fn sample(&mut self, body: &[u8]) -> Option<Event> {
        let tid = u32_at(body, 4)?;
        self.tgids.entry(tid).or_insert(u32_at(body, 0)?);
        let ts = u64_at(body, 8)?;
        let size = u32_at(body, 16)? as usize;
        let raw = body.get(20..20 + size)?;
        let l = self
            .by_id
            .get(&u16::from_le_bytes([*raw.first()?, *raw.get(1)?]))?;
        let get = |f: &Option<Field>| f.as_ref().and_then(|f| int_at(raw, f)).unwrap_or(0);
        let mut e = Event {
            ts,
            tid,
            kind: l.kind,
            a: get(&l.a) as u32,
            b: get(&l.b) as u32,
        };
        match l.kind {
            Kind::Switch => {
                let state = get(&l.b) as u64;
                e.tid = l
                    .comms
                    .first()
                    .and_then(|(p, _)| int_at(raw, p))
                    .unwrap_or(0) as u32;
                e.b = (state as u32 & STATE_MASK) | if state & !0xff != 0 { PREEMPTED } else { 0 };
            }
            Kind::VectorEntry | Kind::VectorExit => e.a = l.vector,
            _ => {}
        }
        for (p, c) in &l.comms {
            // The latest name wins: a new thread is seen under its parent's name until it
            // names itself (`taillab-wrk-N`).
            let pid = int_at(raw, p).unwrap_or(0) as u32;
            if let Some(bytes) = raw.get(c.offset..c.offset + c.size) {
                let name = &bytes[..bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len())];
                if self.comms.get(&pid).is_none_or(|n| n.as_bytes() != name) {
                    self.comms.insert(pid, c_str(bytes));
                }
            }
        }
        if let Some(nf) = &l.name {
            if let std::collections::hash_map::Entry::Vacant(v) = self.irqs.entry(e.a) {
                if let Some(n) = data_loc(raw, nf) {
                    v.insert(n);
                }
            }
        }
        Some(e)
    }
}

/// A PERF_RECORD_LOST's body with sample_id_all (id, lost, pid, tid, time) → its event.
pub fn lost(body: &[u8]) -> Option<Event> {
    let n = u64_at(body, 8)?;
    let ts = u64_at(body, 24).unwrap_or(0);
    Some(Event {
        ts,
        tid: 0,
        kind: Kind::Lost,
        a: n.min(u32::MAX as u64) as u32,
        b: 0,
    })
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// An integer field, sign-extended when signed (as i64 bits).
fn int_at(raw: &[u8], f: &Field) -> Option<i64> {
    let b = raw.get(f.offset..f.offset + f.size)?;
    let mut v = [0u8; 8];
    v[..f.size].copy_from_slice(b);
    let u = u64::from_le_bytes(v);
    let shift = 64 - 8 * f.size as u32;
    Some(if f.signed && shift > 0 {
        ((u << shift) as i64) >> shift
    } else {
        u as i64
    })
}

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn data_loc(raw: &[u8], f: &Field) -> Option<String> {
    let loc = u32_at(raw, f.offset)?;
    let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
    raw.get(off..off + len).map(c_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(name: &str, offset: usize, size: usize, signed: bool) -> String {
        format!(
            "\tfield:int {name};\toffset:{offset};\tsize:{size};\tsigned:{};\n",
            signed as u8
        )
    }

    /// A sample body as the kernel writes it: pid, tid, time, raw size, raw bytes.
    fn body(tid: u32, ts: u64, raw: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(tid.to_le_bytes());
        b.extend(tid.to_le_bytes());
        b.extend(ts.to_le_bytes());
        b.extend((raw.len() as u32).to_le_bytes());
        b.extend(raw);
        b
    }

    #[test]
    fn fields_are_read_where_the_format_says_and_names_are_kept() {
        // A switch whose fields sit elsewhere than today's kernel puts them.
        let text = format!(
            "ID: 7\nformat:\n{}\tfield:char prev_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n{}{}\tfield:char next_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n{}",
            field("common_type", 0, 2, false),
            field("prev_pid", 24, 4, true),
            field("prev_state", 28, 4, true),
            field("next_pid", 56, 4, true),
        );
        let tp = Tracepoint {
            format: Format::parse("sched:sched_switch", &text, "f".into()).unwrap(),
            kind: Kind::Switch,
            vector: 0,
            everywhere: false,
        };
        let mut d = Decoder::new(&[tp]).unwrap();
        let mut raw = vec![0u8; 60];
        raw[0..2].copy_from_slice(&7u16.to_le_bytes());
        raw[8..13].copy_from_slice(b"hog\0\0");
        raw[24..28].copy_from_slice(&41i32.to_le_bytes());
        raw[28..32].copy_from_slice(&0x100i32.to_le_bytes()); // R+: preempted
        raw[40..48].copy_from_slice(b"worker\0\0");
        raw[56..60].copy_from_slice(&42i32.to_le_bytes());
        let e = d.sample(&body(41, 1_000, &raw)).unwrap();
        assert_eq!(
            e,
            Event {
                ts: 1_000,
                tid: 41,
                kind: Kind::Switch,
                a: 42,
                b: PREEMPTED
            }
        );
        assert_eq!(d.comms[&41], "worker");
        assert_eq!(d.comms[&42], "hog");
        // Another tracepoint's id is not ours.
        raw[0..2].copy_from_slice(&8u16.to_le_bytes());
        assert!(d.sample(&body(41, 1_000, &raw)).is_none());
        assert!(d.sample(&[1, 2, 3]).is_none());
    }
}
