//! Values of the measurement extras in section `record`: hardware and
//! software counters per worker thread (`record.counters`); the simulator
//! markers (`record.roi`) are [`crate::roi::RoiMode`].

crate::names_enum! {
    /// Performance counters of the worker threads over the measured phase.
    #[derive(Default)]
    pub enum CounterMode ("counter mode") {
        /// No counters.
        #[default]
        None = "none",
        /// Hardware counters (instructions, cycles, cache and branch misses) where the host has a PMU, else software counters with a note saying why.
        Auto = "auto",
        /// Software counters only: task clock, context switches, migrations, page faults.
        Software = "software",
        /// Hardware counters; a host without a PMU gets a warning and software counters instead.
        Hardware = "hardware",
    }
}

pub use crate::reqfile::RequestFormat;
