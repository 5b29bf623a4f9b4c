//! Region-of-interest markers for architectural simulators.
//!
//! A simulator runs a whole process, but only the measured phase of a run is
//! worth simulating in detail: loading an app's data and warming up take far
//! longer than the requests that are measured. Simulators take *magic
//! instructions* in the simulated program as signals. With `record.roi`
//! (`--roi zsim|gem5`) an integrated run issues them where the measured phase
//! starts (the first measured request is claimed), where it ends (the last
//! worker finished), and, for zsim, once per completed measured request. How
//! to run taillab under each simulator is in docs/simulators.md.
//!
//! # zsim: harmless anywhere
//! zsim's magic operation is `xchg rcx, rcx` with the operation's code in
//! `rcx` (region begin 1025, region end 1026, heartbeat 1028; zsim's
//! `misc/hooks/zsim_hooks.h`). The instrumentation recognises the
//! instruction; on a real CPU exchanging a register with itself changes
//! nothing, so the markers cost a `mov` and an `xchg` and the run is the same
//! run. That is why `--roi zsim` runs anywhere.
//!
//! # gem5: traps outside gem5
//! gem5's x86 pseudo-instructions ("m5ops") are the bytes `0F 04` followed
//! by a 16-bit function code (`work_begin` 0x5a, `work_end` 0x5b,
//! `reset_stats` 0x40, `dump_stats` 0x41; gem5's
//! `include/gem5/asm/generic/m5ops.h` and `util/m5/src/abi/x86/m5op.S`),
//! arguments in `rdi` and `rsi`. `0F 04` is not an instruction of any real
//! x86 CPU: executed on hardware (or under KVM) it raises an invalid-opcode
//! fault and the kernel kills the process with SIGILL. So [`check`] refuses
//! `--roi gem5` unless the CPU identifies as gem5's (CPUID brand string
//! `Fake M5 x86_64 CPU`, or vendor `M5 Simulator` in older gem5) or
//! `record.roi_force` is set (a gem5 build with another CPUID string).
//!
//! # Cost when off
//! Every hook is an inlined comparison of the run's [`RoiMode`] with
//! `None`; the marker code itself sits in separate never-inlined functions.

use std::sync::atomic::{AtomicU64, Ordering};

crate::names_enum! {
    /// Simulator markers around the measured phase.
    #[derive(Default)]
    pub enum RoiMode ("ROI marker kind") {
        /// No markers.
        #[default]
        None = "none",
        /// zsim's magic `xchg rcx, rcx` (no-ops on real hardware).
        Zsim = "zsim",
        /// gem5's m5ops (trap outside gem5).
        Gem5 = "gem5",
    }
}

/// zsim's magic-operation codes (`rcx` at `xchg rcx, rcx`).
pub mod zsim_op {
    /// Start of the region of interest: zsim leaves fast-forwarding.
    pub const ROI_BEGIN: u64 = 1025;
    /// End of the region of interest.
    pub const ROI_END: u64 = 1026;
    /// One unit of work done (zsim can stop after a number of them).
    pub const HEARTBEAT: u64 = 1028;
}

/// gem5's m5op function codes (the 16-bit word after `0F 04`).
pub mod gem5_op {
    /// `m5_reset_stats(delay, period)`.
    pub const RESET_STATS: u16 = 0x40;
    /// `m5_dump_stats(delay, period)`.
    pub const DUMP_STATS: u16 = 0x41;
    /// `m5_work_begin(workid, threadid)`.
    pub const WORK_BEGIN: u16 = 0x5a;
    /// `m5_work_end(workid, threadid)`.
    pub const WORK_END: u16 = 0x5b;
}

/// Why markers cannot be issued here.
#[derive(Debug, thiserror::Error)]
pub enum RoiError {
    /// gem5 markers on a CPU that is not gem5's.
    #[error("record.roi = gem5 issues gem5's m5op instructions (0F 04), which a real CPU rejects with SIGILL, and this CPU ({cpu}) is not gem5's; run taillab inside gem5, use --roi zsim (harmless on hardware), or pass --roi-force if your gem5 reports another CPUID string")]
    NotInGem5 {
        /// The CPU's brand string.
        cpu: String,
    },
    /// Markers exist for x86-64 only.
    #[error("record.roi = {0} needs an x86-64 build (zsim and gem5's x86 markers are x86 instructions); use --roi none")]
    NotX86(RoiMode),
}

/// Checks that `mode`'s markers can be issued on this CPU (see the module
/// docs): zsim anywhere on x86-64, gem5 only inside gem5 or when `force`d.
pub fn check(mode: RoiMode, force: bool) -> Result<(), RoiError> {
    match mode {
        RoiMode::None => Ok(()),
        _ if !cfg!(target_arch = "x86_64") => Err(RoiError::NotX86(mode)),
        RoiMode::Zsim => Ok(()),
        RoiMode::Gem5 if force || in_gem5() => Ok(()),
        RoiMode::Gem5 => Err(RoiError::NotInGem5 { cpu: cpu_brand() }),
    }
}

/// Whether the CPU identifies as gem5's simulated x86 CPU.
pub fn in_gem5() -> bool {
    is_gem5_cpuid(&cpu_vendor(), &cpu_brand())
}

/// gem5's x86 CPUID answers: brand `Fake M5 x86_64 CPU`; vendor
/// `M5 Simulator` in versions before the vendor string was configurable.
fn is_gem5_cpuid(vendor: &str, brand: &str) -> bool {
    vendor == "M5 Simulator" || brand.contains("Fake M5")
}

#[cfg(target_arch = "x86_64")]
fn cpuid_text(leaves: &[u32], order: fn(std::arch::x86_64::CpuidResult) -> [u32; 4]) -> String {
    let mut bytes = Vec::new();
    for &leaf in leaves {
        // CPUID exists on every x86-64 CPU; the caller checks leaf support.
        let r = std::arch::x86_64::__cpuid(leaf);
        for w in order(r) {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
    }
    String::from_utf8_lossy(&bytes)
        .trim_matches(char::from(0))
        .trim()
        .to_string()
}

/// CPUID vendor string (leaf 0: ebx, edx, ecx).
fn cpu_vendor() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        cpuid_text(&[0], |r| [r.ebx, r.edx, r.ecx, 0])
    }
    #[cfg(not(target_arch = "x86_64"))]
    String::new()
}

/// CPUID brand string (leaves 0x8000_0002..=4), or `unknown CPU`.
fn cpu_brand() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        // Leaf 0x8000_0000 (the highest extended leaf) exists on every x86-64 CPU.
        let max = std::arch::x86_64::__cpuid(0x8000_0000).eax;
        if max >= 0x8000_0004 {
            let s = cpuid_text(&[0x8000_0002, 0x8000_0003, 0x8000_0004], |r| {
                [r.eax, r.ebx, r.ecx, r.edx]
            });
            if !s.is_empty() {
                return s;
            }
        }
    }
    "unknown CPU".into()
}

/// Markers issued by this process so far (`begin`, `end`, `heartbeat`):
/// what the tests count, and what a run can report.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct RoiCounts {
    /// Region begins.
    pub begin: u64,
    /// Region ends.
    pub end: u64,
    /// Heartbeats (zsim only).
    pub heartbeat: u64,
}

impl RoiCounts {
    /// Markers issued since `before` (an earlier [`emitted`]): one run's,
    /// in a process that runs several.
    pub fn since(self, before: RoiCounts) -> RoiCounts {
        RoiCounts {
            begin: self.begin - before.begin,
            end: self.end - before.end,
            heartbeat: self.heartbeat - before.heartbeat,
        }
    }
}

static EMITTED: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// How many markers this process has issued.
pub fn emitted() -> RoiCounts {
    let n = |i: usize| EMITTED[i].load(Ordering::Relaxed);
    RoiCounts {
        begin: n(0),
        end: n(1),
        heartbeat: n(2),
    }
}

/// The measured phase begins.
#[inline(always)]
pub fn begin(mode: RoiMode) {
    if mode != RoiMode::None {
        emit_begin(mode);
    }
}

/// The measured phase is over.
#[inline(always)]
pub fn end(mode: RoiMode) {
    if mode != RoiMode::None {
        emit_end(mode);
    }
}

/// A measured request completed.
#[inline(always)]
pub fn heartbeat(mode: RoiMode) {
    if mode == RoiMode::Zsim {
        EMITTED[2].fetch_add(1, Ordering::Relaxed);
        zsim_heartbeat();
    }
}

#[cold]
#[inline(never)]
fn emit_begin(mode: RoiMode) {
    EMITTED[0].fetch_add(1, Ordering::Relaxed);
    match mode {
        RoiMode::Zsim => zsim_roi_begin(),
        // Statistics from here on only, and a work item gem5 can count.
        RoiMode::Gem5 => {
            gem5_reset_stats();
            gem5_work_begin();
        }
        RoiMode::None => {}
    }
}

#[cold]
#[inline(never)]
fn emit_end(mode: RoiMode) {
    EMITTED[1].fetch_add(1, Ordering::Relaxed);
    match mode {
        RoiMode::Zsim => zsim_roi_end(),
        RoiMode::Gem5 => {
            gem5_work_end();
            gem5_dump_stats();
        }
        RoiMode::None => {}
    }
}

/// One zsim magic op. A macro rather than a function argument so that the
/// code is an immediate: `mov ecx, CODE; xchg rcx, rcx`, as in zsim's hooks
/// (and as the disassembly test looks for). The asm may touch memory, like
/// zsim's compiler barrier, so nothing moves across a marker.
macro_rules! zsim_magic {
    ($name:ident, $code:expr, $doc:literal) => {
        #[doc = $doc]
        #[inline(never)]
        pub fn $name() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: exchanging rcx with itself changes no state; rcx is declared clobbered.
            unsafe {
                std::arch::asm!("xchg rcx, rcx", inout("rcx") $code => _, options(nostack, preserves_flags));
            }
        }
    };
}

zsim_magic!(
    zsim_roi_begin,
    zsim_op::ROI_BEGIN,
    "zsim: region of interest begins (code 1025)."
);
zsim_magic!(
    zsim_roi_end,
    zsim_op::ROI_END,
    "zsim: region of interest ends (code 1026)."
);
zsim_magic!(
    zsim_heartbeat,
    zsim_op::HEARTBEAT,
    "zsim: heartbeat (code 1028)."
);

/// One gem5 m5op with both arguments 0 (`rdi`, `rsi`); the result comes
/// back in `rax`. Private: reached only through a checked [`RoiMode::Gem5`],
/// since the bytes trap on real hardware.
macro_rules! gem5_op {
    ($name:ident, $bytes:literal) => {
        #[inline(never)]
        fn $name() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: only reached after `check` (gem5's CPU or forced); the
            // op reads rdi/rsi and writes rax, all declared.
            unsafe {
                std::arch::asm!(
                    concat!(".byte 0x0f, 0x04, ", $bytes),
                    inout("rdi") 0u64 => _,
                    inout("rsi") 0u64 => _,
                    lateout("rax") _,
                    options(nostack),
                );
            }
        }
    };
}

gem5_op!(gem5_reset_stats, "0x40, 0x00");
gem5_op!(gem5_dump_stats, "0x41, 0x00");
gem5_op!(gem5_work_begin, "0x5a, 0x00");
gem5_op!(gem5_work_end, "0x5b, 0x00");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zsim_passes_the_check_and_gem5_is_refused_on_this_cpu() {
        assert!(check(RoiMode::Zsim, false).is_ok());
        assert!(check(RoiMode::None, false).is_ok());
        if !in_gem5() {
            let e = check(RoiMode::Gem5, false).unwrap_err().to_string();
            assert!(e.contains("SIGILL") && e.contains("--roi-force"), "{e}");
            assert!(check(RoiMode::Gem5, true).is_ok());
        }
    }

    #[test]
    fn gem5_is_recognised_by_its_cpuid_strings() {
        assert!(is_gem5_cpuid("HygonGenuine", "Fake M5 x86_64 CPU"));
        assert!(is_gem5_cpuid("M5 Simulator", ""));
        assert!(!is_gem5_cpuid("GenuineIntel", &cpu_brand_of_test()));
    }

    fn cpu_brand_of_test() -> String {
        "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz".into()
    }

    #[test]
    fn zsim_markers_run_on_real_hardware() {
        // The instructions themselves, executed here: harmless no-ops.
        zsim_roi_begin();
        zsim_heartbeat();
        zsim_roi_end();
        assert!(!cpu_brand().is_empty());
    }
}
