//! The events counted, by name, and how each is asked of `perf_event_open`.

use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::Builder;

/// One counted event. Names are the keys in `summary.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Event {
    /// Retired instructions.
    Instructions,
    /// Core cycles while the thread ran.
    Cycles,
    /// L1 instruction-cache read misses.
    L1iMisses,
    /// L1 data-cache read misses.
    L1dMisses,
    /// Last-level-cache read misses.
    LlcMisses,
    /// Mispredicted branches.
    BranchMisses,
    /// CPU time of the thread, ns.
    TaskClock,
    /// Context switches of the thread.
    ContextSwitches,
    /// Moves of the thread to another CPU.
    CpuMigrations,
    /// Page faults of the thread.
    PageFaults,
}

impl Event {
    /// The hardware events (need a PMU).
    pub const HARDWARE: [Event; 6] = [
        Event::Instructions,
        Event::Cycles,
        Event::L1iMisses,
        Event::L1dMisses,
        Event::LlcMisses,
        Event::BranchMisses,
    ];
    /// The software events (the kernel counts them; always available).
    pub const SOFTWARE: [Event; 4] = [
        Event::TaskClock,
        Event::ContextSwitches,
        Event::CpuMigrations,
        Event::PageFaults,
    ];

    /// The key in `summary.json`.
    pub fn name(self) -> &'static str {
        match self {
            Event::Instructions => "instructions",
            Event::Cycles => "cycles",
            Event::L1iMisses => "l1i_misses",
            Event::L1dMisses => "l1d_misses",
            Event::LlcMisses => "llc_misses",
            Event::BranchMisses => "branch_misses",
            Event::TaskClock => "task_clock_ns",
            Event::ContextSwitches => "context_switches",
            Event::CpuMigrations => "cpu_migrations",
            Event::PageFaults => "page_faults",
        }
    }

    /// Whether it needs a hardware PMU.
    pub fn is_hardware(self) -> bool {
        Event::HARDWARE.contains(&self)
    }

    /// A builder for this event (disabled, user mode only: the caller sets
    /// the target, the mode and enables it).
    pub(crate) fn builder(self) -> Builder<'static> {
        let cache = |which| Cache {
            which,
            operation: CacheOp::READ,
            result: CacheResult::MISS,
        };
        match self {
            Event::Instructions => Builder::new(Hardware::INSTRUCTIONS),
            Event::Cycles => Builder::new(Hardware::CPU_CYCLES),
            Event::L1iMisses => Builder::new(cache(CacheId::L1I)),
            Event::L1dMisses => Builder::new(cache(CacheId::L1D)),
            Event::LlcMisses => Builder::new(cache(CacheId::LL)),
            Event::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
            Event::TaskClock => Builder::new(Software::TASK_CLOCK),
            Event::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
            Event::CpuMigrations => Builder::new(Software::CPU_MIGRATIONS),
            Event::PageFaults => Builder::new(Software::PAGE_FAULTS),
        }
    }
}
