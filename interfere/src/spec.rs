//! The interference grammar (`CLASS:N[,KEY=VALUE...][@cpus=LIST][,nice=N]`)
//! is part of the run configuration (`interference.hogs`), defined in
//! `taillab_core::config::interfere`; this module re-exports it.

pub use taillab_core::config::interfere::{Class, InterfereSet, InterfereSpec, SPEC_FORM};
pub use taillab_core::config::CpuList;
