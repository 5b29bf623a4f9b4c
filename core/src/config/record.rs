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
