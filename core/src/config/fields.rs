//! The sections of a run's configuration, each field declared once: its
//! type, default, help (the doc comment) and where it appears (which
//! commands take it as a flag). Flags, TOML keys, `--grid` axes and the
//! resolved `config.toml` are all generated from these declarations.

use super::interfere::InterfereSet;
use super::record::{CounterMode, RequestFormat};
use super::tuning::{DmaLatency, NumaNode, ProfileMode, RtRuntime, ThpMode};
use super::value::{CpuList, Dur, Items, Names, Size};
use crate::arrival::ArrivalSpec;
use crate::clock::WaitMode;
use crate::dist::Dist;
use crate::queue::{Discipline, Dispatch};
use crate::roi::RoiMode;
use crate::spec::ShaperMode;

/// Commands a field is a flag of (bit set).
pub mod view {
    /// `taillab run`.
    pub const RUN: u8 = 1;
    /// `taillab sweep` (a value with `|` there is an axis).
    pub const SWEEP: u8 = 2;
    /// `taillab serve`.
    pub const SERVE: u8 = 4;
    /// `taillab load`.
    pub const LOAD: u8 = 8;
    /// `run` and `sweep`: what an experiment sets.
    pub const EXP: u8 = RUN | SWEEP;
    /// Every command.
    pub const ALL: u8 = RUN | SWEEP | SERVE | LOAD;
}

/// How a field appears besides its TOML key.
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    /// Flag name without `--`; empty: the field name with `-` for `_`.
    pub flag: &'static str,
    /// Commands taking the flag ([`view`] bits).
    pub views: u8,
    /// Setting this field unsets these (same section): the other half of an
    /// either/or pair such as `requests` / `duration`.
    pub clears: &'static [&'static str],
    /// A switch that sets the field to `false` (`--no-monitor`).
    pub negate: bool,
    /// Other accepted flag names.
    pub aliases: &'static [&'static str],
}

impl Opts {
    /// A flag named after the field in `views`.
    pub const fn on(views: u8) -> Opts {
        Opts {
            flag: "",
            views,
            clears: &[],
            negate: false,
            aliases: &[],
        }
    }
    /// Named `flag` instead.
    pub const fn flag(self, flag: &'static str) -> Opts {
        Opts { flag, ..self }
    }
    /// Unsets `keys` when set.
    pub const fn clears(self, keys: &'static [&'static str]) -> Opts {
        Opts {
            clears: keys,
            ..self
        }
    }
    /// A `--no-…` switch.
    pub const fn negated(self) -> Opts {
        Opts {
            negate: true,
            ..self
        }
    }
    /// Also accepted under these names.
    pub const fn aliases(self, aliases: &'static [&'static str]) -> Opts {
        Opts { aliases, ..self }
    }
}

/// One field's description, generated from its declaration.
#[derive(Clone, Copy)]
pub struct Field {
    /// Section key (`harness`).
    pub section: &'static str,
    /// Field key (`threads`).
    pub name: &'static str,
    /// The doc comment.
    pub doc: &'static str,
    /// The written form of values.
    pub form: &'static str,
    /// Allowed names, for enumerations.
    pub possible: Option<&'static [&'static str]>,
    /// A switch (boolean) flag.
    pub switch: bool,
    /// May be given several times.
    pub repeated: bool,
    /// The value is a list.
    pub list: bool,
    /// In a sweep, `a,b` means two axis values.
    pub comma_axis: bool,
    /// A number: in a sweep, `FROM:TO:STEP` is a range of axis values.
    pub number: bool,
    /// Flag and views.
    pub opts: Opts,
    /// Checks a text value.
    pub check: fn(&str) -> Result<(), crate::error::ValueError>,
    /// The default's text form.
    pub default: fn() -> String,
}

impl Field {
    /// `section.name`.
    pub fn key(&self) -> String {
        format!("{}.{}", self.section, self.name)
    }
    /// The flag name without `--`.
    pub fn flag(&self) -> String {
        if self.opts.flag.is_empty() {
            self.name.replace('_', "-")
        } else {
            self.opts.flag.to_string()
        }
    }
    /// The first paragraph of the doc comment, on one line.
    pub fn help(&self) -> String {
        self.doc
            .split("\n\n")
            .next()
            .unwrap_or("")
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
    }
    /// Whether command `v` ([`view`] bit) takes this field's flag.
    pub fn in_view(&self, v: u8) -> bool {
        self.opts.views & v != 0
    }
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Field({})", self.key())
    }
}

use view::*;

crate::names_enum! {
    /// Where client, harness and app run.
    pub enum Topology ("topology") {
        /// One process: client, harness and app share memory, no syscalls on the hot path.
        Integrated = "integrated",
        /// A `taillab serve` process and client processes on this host, over TCP on 127.0.0.1.
        Loopback = "loopback",
        /// Server and clients started through launcher templates (ssh, ip netns exec, …).
        Networked = "networked",
    }
}

crate::names_enum! {
    /// How a networked run starts its server and clients.
    pub enum Launcher ("launcher") {
        /// Through the shell templates `server_launcher` and `client_launcher`.
        Templates = "templates",
        /// As `srun` steps on the nodes of a Slurm allocation (the job's own, or one taken with `salloc`).
        Slurm = "slurm",
    }
}

crate::names_enum! {
    /// Who reads a TCP client's responses.
    pub enum Receive ("receive mode") {
        /// One receiver thread per connection, blocked in `read`.
        Threads = "threads",
        /// The sender itself, reading without blocking whenever it would wait
        /// for the next send time: one thread in all, nothing to wake up.
        Sender = "sender",
    }
}

crate::names_enum! {
    /// Which connection a TCP client's request goes out on.
    pub enum Spread ("connection spread") {
        /// The requests due at one wake-up of a sender go out together, in one write, on the
        /// next of its connections in turn; when one request is due at a time (every load a
        /// client holds easily) that is request i on connection i mod K.
        Wakeup = "wakeup",
        /// Request i on connection i mod K, always: a burst of due requests is split over the
        /// connections, one write each.
        Request = "request",
    }
}

crate::names_enum! {
    /// Where a TCP run's receive stamps come from.
    pub enum Stamping ("stamp source") {
        /// The kernel's receive stamps (SO_TIMESTAMPING: hardware where the NIC gives them, else software), user-space stamps where a socket gives none.
        Kernel = "kernel",
        /// User-space stamps only, taken after each read (the receiver's delay is then inside sojourn).
        User = "user",
    }
}

section! {
    /// The offered load: rate, arrival process, seed, how long to measure and warm up.
    Load "load" {
        /// Offered load in requests per second.
        qps: Option<f64> = None, Opts::on(EXP | LOAD);
        /// Arrival process of the open-loop schedule.
        arrival: ArrivalSpec = ArrivalSpec::Poisson, Opts::on(EXP | LOAD);
        /// Base seed: arrivals, request contents and per-run seeds derive their own streams from it.
        seed: u64 = 1, Opts::on(ALL);
        /// Measured requests (the run ends after them); or give `duration`.
        requests: Option<u64> = None, Opts::on(EXP | LOAD).clears(&["duration"]);
        /// Measured time (the schedule's span after warmup); or give `requests`.
        duration: Option<Dur> = None, Opts::on(EXP | LOAD).clears(&["requests"]);
        /// Warmup length in requests (not measured); or give `warmup`.
        warmup_requests: Option<u64> = None, Opts::on(EXP | LOAD).clears(&["warmup"]);
        /// Warmup length in time (not measured); or give `warmup_requests`.
        warmup: Option<Dur> = None, Opts::on(EXP | LOAD).clears(&["warmup_requests"]).aliases(&["warmup-seconds"]);
        /// How long to wait for stragglers after the schedule's expected end.
        drain_timeout: Dur = Dur(10_000_000_000), Opts::on(EXP | LOAD);
    }
}

section! {
    /// The server side: workers, how they wait and take work, where they run.
    Harness "harness" {
        /// Worker threads serving the requests.
        threads: usize = 1, Opts::on(ALL);
        /// How integrated runs release requests: inline (workers claim arrivals; FIFO) or thread (a shaper thread feeds a real queue).
        shaper: ShaperMode = ShaperMode::Inline, Opts::on(EXP);
        /// How workers (and clients' senders) wait: spin, block, or hybrid (sleep, then spin the last `spin_margin`).
        wait: WaitMode = WaitMode::Hybrid, Opts::on(ALL);
        /// Hybrid waits spin this long before a deadline.
        spin_margin: Dur = Dur(crate::spec::DEFAULT_SPIN_MARGIN_NS), Opts::on(ALL);
        /// Order in which a queue is served (the TCP client records it for the run's ideal).
        discipline: Discipline = Discipline::Fifo, Opts::on(EXP | SERVE | LOAD);
        /// How requests reach workers: shared (one queue, M/G/n) or per-worker queues (a random worker, or per-worker:round-robin; over TCP each worker owns whole connections); none: shared in integrated runs, chosen from the host for TCP (config::auto).
        dispatch: Option<Dispatch> = None, Opts::on(EXP | SERVE | LOAD);
        /// Pin workers to these CPUs, round-robin.
        cpus: CpuList = CpuList::default(), Opts::on(EXP | SERVE);
        /// Run workers under SCHED_FIFO at this priority (1..=99; needs root); 0 = normal scheduling.
        rt_priority: u32 = 0, Opts::on(EXP | SERVE);
        /// Run workers under normal (CFS) scheduling at this nice value, -20..=19 (below 0 needs root); not with `rt_priority`. Tales of the Tail's "strictly higher priority without FIFO order" is nearest at -20.
        nice: Option<i32> = None, Opts::on(EXP | SERVE);
        /// Helper threads of integrated inline runs: they generate requests ahead and record the served ones on CPUs no worker uses, so a worker's own cost per request is a claim and a push; none: one per 4 workers on the CPUs the workers leave free (none when workers are unpinned); 0: workers do it themselves while idle.
        helpers: Option<usize> = None, Opts::on(EXP);
        /// Producers of an integrated inline run's schedule: each draws the run's one arrival stream and makes every m-th request (its payload, its phase bookkeeping), so generating the schedule scales with workers; workers claim the requests in arrival order as before. Several need one shared FIFO queue, the inline shaper, no fan-out and no live numbers; each holds its own copy of a trace. none: 1 (one producer).
        producers: Option<usize> = None, Opts::on(EXP);
    }
}

section! {
    /// Where the parts run and how they talk over TCP.
    Net "net" {
        /// Where client, harness and app run: integrated (one process), loopback (server and client processes on this host) or networked (through launchers).
        topology: Topology = Topology::Integrated, Opts::on(EXP).aliases(&["config", "configs"]);
        /// Client processes (loopback/networked); the rate is split evenly, each stream with its own seed.
        clients: usize = 1, Opts::on(EXP);
        /// TCP connections per client; requests go round-robin over them (HTTP/2 and gRPC: each carries many concurrent streams).
        connections: usize = 1, Opts::on(EXP | LOAD);
        /// Server listen address; port 0 lets the kernel pick (`taillab serve` defaults to 127.0.0.1:7878).
        listen: String = "127.0.0.1:0".into(), Opts::on(EXP | SERVE);
        /// An already running server at HOST:PORT (external apps such as memcached, http and grpc need one).
        target: Option<String> = None, Opts::on(EXP | LOAD);
        /// How to start the server (networked): a shell template with {cmd} or {cmdq}, e.g. `ip netns exec NS {cmd}`.
        server_launcher: String = "{cmd}".into(), Opts::on(EXP);
        /// How to start client i (networked): once for all clients or once per client; {i} is the client number.
        client_launcher: Items = Items::default(), Opts::on(EXP);
        /// Path of the taillab binary on the hosts the launchers reach (default: this binary).
        remote_taillab: Option<String> = None, Opts::on(EXP);
        /// How networked runs start server and clients: templates (server_launcher, client_launcher) or slurm (srun on the nodes of a Slurm allocation; docs/cluster.md).
        launcher: Launcher = Launcher::Templates, Opts::on(EXP);
        /// Slurm nodes for the server (slurm launcher): 1, or 0 to put it on the first client node; a fan-out's N leaves go on S ≤ N nodes (leaf j on node j mod S; 0: on its client's node).
        server_nodes: usize = 1, Opts::on(EXP);
        /// Slurm nodes for the clients (slurm launcher); client i runs on client node i mod K.
        client_nodes: usize = 1, Opts::on(EXP);
        /// Extra salloc argument when the slurm launcher takes its own allocation, e.g. --salloc-args=--partition=debug (repeatable).
        salloc_args: Items = Items::default(), Opts::on(EXP);
        /// Declare the server dead after this long without a response while requests are outstanding.
        dead_after: Dur = Dur(4_000_000_000), Opts::on(EXP | LOAD);
        /// Pin each client's threads to these CPUs (the sender first, receiver threads next).
        client_cpus: CpuList = CpuList::default(), Opts::on(EXP | LOAD);
        /// Who reads responses in a client: sender (polls while it waits: one thread) or threads; none: chosen at start (config::auto). HTTP/2 and gRPC runs have one thread that drives and reads every connection.
        receive: Option<Receive> = None, Opts::on(EXP | LOAD);
        /// How a TCP client's sender waits for send times: spin or hybrid; none: harness.wait if spin, else chosen at start (config::auto).
        client_wait: Option<WaitMode> = None, Opts::on(EXP | LOAD);
        /// How a TCP server's workers wait for work: spin, block or hybrid; none: harness.wait if spin or block, else chosen at start (config::auto).
        server_wait: Option<WaitMode> = None, Opts::on(EXP | SERVE);
        /// Receive stamps of TCP runs: kernel (SO_TIMESTAMPING, user-space where a socket gives none) or user.
        stamps: Stamping = Stamping::Kernel, Opts::on(EXP | SERVE | LOAD);
        /// Most connections `taillab serve` holds open at once; beyond it new ones are closed at accept and counted as refused (1..=1000000).
        max_connections: usize = 1024, Opts::on(EXP | SERVE);
        /// Largest frame payload accepted; bigger frames drop the connection.
        max_frame: Size = Size(16 << 20), Opts::on(EXP | SERVE | LOAD);
        /// Most due requests a late client sender coalesces into one write.
        max_batch: usize = 64, Opts::on(EXP | LOAD);
        /// Sender threads in each client process (1..=256): each owns connections c with c mod senders = its number, its share of the schedule (independent Poisson streams at rate/senders, other processes dealt in order), its own receive path and histograms; pinned one per CPU of client_cpus.
        senders: usize = 1, Opts::on(EXP | LOAD);
        /// Which connection a request goes out on: wakeup (the requests due at one wake-up together, on the next connection in turn) or request (request i on connection i mod K).
        spread: Spread = Spread::Wakeup, Opts::on(EXP | LOAD);
        /// The other load testers' method, for comparison only (0: off, the default): at most this many requests in flight per connection; a request due while its connection is full waits, untimed, and its latency is counted from its actual send — coordinated omission, labelled so in the results.
        max_in_flight: usize = 0, Opts::on(EXP | LOAD);
        /// Simulated one-way network delay per direction in integrated runs (a distribution).
        delay: Option<Dist> = None, Opts::on(EXP).flag("net-delay");
        /// Label for summary.json's `config` of a `taillab load` (default: loopback for 127.x targets, else networked).
        label: Option<String> = None, Opts::on(LOAD).flag("config-label");
        /// Which stream of the app's requests a `taillab load` sends (0: the run's own); a fan-out's leaf j is given stream j, so its leaves get different requests — synth: different service draws — at the same instants.
        request_stream: u64 = 0, Opts::on(LOAD);
    }
}

section! {
    /// What each run keeps beyond its histograms.
    Record "record" {
        /// Also write every request's stamps to requests.csv (or requests.parquet: record.format).
        save_requests: bool = false, Opts::on(EXP | LOAD);
        /// The file of per-request records: csv (requests.csv) or parquet (requests.parquet: streamed in row groups, several times smaller, loaded by pandas in seconds); docs/records.md.
        format: RequestFormat = RequestFormat::Csv, Opts::on(EXP | LOAD).flag("record-format");
        /// Memory cap for per-request records, for the whole run (beyond it, histograms only; a loopback run's coordinator holds about twice this).
        max_record_mem: Size = Size(64 << 20), Opts::on(EXP | LOAD);
        /// Length of one interval histogram.
        interval: Dur = Dur(1_000_000_000), Opts::on(EXP | LOAD);
        /// Profile the workers during the measured phase: off, or perf (a folded-stack file and a flame graph in the run folder).
        profile: ProfileMode = ProfileMode::Off, Opts::on(EXP);
        /// Performance counters per worker thread over the measured phase, in summary.json (IPC, MPKI): none, auto, software or hardware (a host without a PMU falls back to software counters and says why).
        counters: CounterMode = CounterMode::None, Opts::on(EXP);
        /// Simulator markers around the measured phase of an integrated run: none, zsim (no-ops on real hardware) or gem5 (m5ops: refused outside gem5 unless roi_force); see docs/simulators.md.
        roi: RoiMode = RoiMode::None, Opts::on(EXP);
        /// Issue gem5 markers even though the CPU does not identify as gem5's (they crash a real CPU with SIGILL).
        roi_force: bool = false, Opts::on(EXP);
        /// Explain every request from the kernel's events: switches, wake-ups, interrupts and page faults on the measured threads' CPUs, joined with its stamps into a partition of its sojourn (the `anatomy` section, `x_*` record columns, `taillab explain RUN`; needs root and tracefs; docs/explain.md).
        explain: bool = false, Opts::on(EXP | SERVE);
    }
}

/// The environment monitor's period and limits, declared once: the `[monitor]` defaults, the
/// monitor crate's `Thresholds::default()` and `SamplerConfig::default()`, and the Slurm node
/// monitor's flags all read these. Why these values: monitor/src/summary.rs.
pub mod monitor_defaults {
    /// Sampling period (ns).
    pub const PERIOD_NS: u64 = 100_000_000;
    /// Mean hypervisor steal over the measured phase, % of one CPU.
    pub const MAX_STEAL_PCT: f64 = 1.0;
    /// Mean CPU use of other processes over the measured phase, % of one CPU.
    pub const MAX_FOREIGN_PCT: f64 = 5.0;
    /// Involuntary context switches per second of any worker thread.
    pub const MAX_WORKER_PREEMPTIONS_PER_S: f64 = 20.0;
    /// Run-queue wait of any worker thread, % of the measured phase.
    pub const MAX_WORKER_RUNQ_WAIT_PCT: f64 = 1.0;
}

section! {
    /// The environment monitor and the limits of the self-checks.
    Monitor "monitor" {
        /// Sample the environment (steal, other processes' CPU, own resource use) during runs.
        enabled: bool = true, Opts::on(EXP | LOAD).flag("no-monitor").negated();
        /// Sampling period of the environment monitor (10ms..60s).
        period: Dur = Dur(monitor_defaults::PERIOD_NS), Opts::on(EXP | LOAD).flag("monitor-period");
        /// Mean hypervisor steal over the measured phase (% of one CPU) above which a run is disturbed.
        max_steal: f64 = monitor_defaults::MAX_STEAL_PCT, Opts::on(EXP | LOAD);
        /// Mean CPU use of other processes (% of one CPU) above which a run is disturbed.
        max_foreign: f64 = monitor_defaults::MAX_FOREIGN_PCT, Opts::on(EXP | LOAD);
        /// Involuntary context switches per second of any worker thread above which a run is disturbed (unless the app's own helper processes explain them).
        max_worker_preemptions: f64 = monitor_defaults::MAX_WORKER_PREEMPTIONS_PER_S, Opts::on(EXP | LOAD);
        /// Run-queue wait of any worker thread (% of the measured phase) above which a run is disturbed (unless the app's own helper processes explain it).
        max_worker_runq_wait: f64 = monitor_defaults::MAX_WORKER_RUNQ_WAIT_PCT, Opts::on(EXP | LOAD);
        /// Send-lag p99 above this fails the send-lag check.
        max_send_lag: Dur = Dur(50_000), Opts::on(EXP | LOAD);
        /// An integrated run whose longest dispatch gap (a request due and a worker free, yet nothing started: the VM's CPU taken away) exceeds the larger of this and the service p50 is disturbed.
        max_stall: Dur = Dur(10_000_000), Opts::on(EXP | LOAD);
        /// A TCP client's recv-lag p99 above the larger of this and `max_recv_lag_ratio` × sojourn p50 fails the client check.
        max_recv_lag: Dur = Dur(250_000), Opts::on(EXP | LOAD);
        /// The relative part of the client check's limit (a fraction of sojourn p50).
        max_recv_lag_ratio: f64 = 0.5, Opts::on(EXP | LOAD);
        /// Serve the run's live numbers as OpenMetrics text on HOST:PORT (GET /metrics) while it runs: rate, in-flight, each phase's last interval p50/p99 (warmup and measured), send lag, steal, other processes' CPU (docs/metrics.md). Client i of a loopback or networked run listens on PORT+i.
        metrics_listen: Option<String> = None, Opts::on(EXP | LOAD);
        /// Let monitor.metrics_listen be an address other than loopback (anyone who reaches it can read the run's metrics).
        metrics_public: bool = false, Opts::on(EXP | LOAD);
    }
}

section! {
    /// Repeating a point with fresh seeds until its confidence interval is tight.
    Ci "ci" {
        /// Repeat until the 95 % CI half-width of each metric is within this fraction of its estimate (e.g. 0.01); none: one run.
        target: Option<f64> = None, Opts::on(EXP).flag("ci");
        /// Fewest runs per point with a CI target.
        min_runs: usize = 3, Opts::on(EXP);
        /// Most runs per point with a CI target (the report says when the target was not met).
        max_runs: usize = 20, Opts::on(EXP);
        /// Metrics the CI target applies to (none: sojourn.mean,sojourn.p95,sojourn.p99).
        metrics: Names = Names::default(), Opts::on(EXP).flag("ci-metrics");
        /// Discard a run whose environment check failed and redo it with the same seed, at most this many times per run.
        redo_disturbed: usize = 0, Opts::on(EXP);
    }
}

section! {
    /// Fan-out: each request split over leaves, answered by all or the first K, with hedged or tied copies to replicas (docs/fanout.md).
    Fanout "fanout" {
        /// Leaves each request is split over (each its own server of harness.threads workers and its own queue); 1: no fan-out.
        leaves: usize = 1, Opts::on(EXP).flag("fanout");
        /// Replicas of each leaf (hedged and tied copies go to another one).
        replicas: usize = 1, Opts::on(EXP);
        /// A request is answered by all its leaves or the first K: all, k=K.
        wait: crate::fanout::FanoutWait = crate::fanout::FanoutWait::All, Opts::on(EXP).flag("fanout-wait");
        /// Send a copy of a leaf's sub-request to another replica after this long without an answer: none, after=2ms, or after=p95 (the running 95th percentile of a leaf's latency).
        hedge: crate::fanout::Hedge = crate::fanout::Hedge::None, Opts::on(EXP);
        /// Send each sub-request to two replicas at once; the first to start it cancels the other.
        tied: bool = false, Opts::on(EXP);
    }
}

section! {
    /// Planned background load: hogs started before warmup and stopped after the measured phase.
    Interference "interference" {
        /// Background load, `CLASS:N[,KEY=VALUE][@cpus=LIST][,nice=N]` (repeatable; `+` joins several in one value): cpu, vm, io, hdd, cache, net.
        hogs: InterfereSet = InterfereSet::default(), Opts::on(EXP).flag("interfere");
    }
}

section! {
    /// Host settings held for the run and restored afterwards (also after a failure or Ctrl-C).
    Knobs "tuning" {
        /// Move every movable interrupt to these CPUs during the run.
        irq_cpus: CpuList = CpuList::default(), Opts::on(EXP);
        /// Hold a C-state limit (µs of wake-up latency; 0 = no deep sleep) through /dev/cpu_dma_latency.
        dma_latency: Option<DmaLatency> = None, Opts::on(EXP);
        /// Transparent huge pages mode during the run.
        thp: Option<ThpMode> = None, Opts::on(EXP);
        /// Bind the workers' memory to this NUMA node (a host with one node says so).
        numa_node: Option<NumaNode> = None, Opts::on(EXP);
        /// Hold the real-time runtime limit (/proc/sys/kernel/sched_rt_runtime_us): µs of each period real-time threads may run before the kernel throttles them (950000: the kernel's 95 %), or -1 for no limit (a SCHED_FIFO worker that spins then keeps its CPU: leave one CPU free of such workers).
        rt_runtime: Option<RtRuntime> = None, Opts::on(EXP);
    }
}
