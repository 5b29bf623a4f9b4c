//! A run's settings checked and turned into what the harness runs: the app's name and keys,
//! the [`RunSpec`] (with the notes a setting's interplay deserves), every cross-setting rule
//! ([`RunConfig::validate`]) and a confidence-interval target.

use super::*;

impl RunConfig {
    /// The app's name, or an error saying how to give it.
    pub fn app_name(&self) -> Result<&str, ConfigError> {
        self.app.name.as_deref().ok_or_else(|| {
            ConfigError::Invalid("say which app: --app NAME (or `name = ...` in section [app]; `taillab apps` lists them)".into())
        })
    }

    /// Checks the app settings against the app's keys; an unknown one is
    /// named with the nearest app key or configuration key.
    pub fn check_app_keys(&self, app: &str, keys: &[KeySpec]) -> Result<(), ConfigError> {
        for (k, _) in self.settings.iter() {
            if keys.iter().any(|s| s.name == k) {
                continue;
            }
            let app_keys: Vec<&str> = keys.iter().map(|s| s.name).collect();
            let cfg_keys: Vec<String> = fields().iter().map(|f| f.key()).collect();
            let near = value::nearest(k, app_keys.iter().copied())
                .map(|n| format!("`{n}` (an app key)"))
                .or_else(|| {
                    value::nearest(k, cfg_keys.iter().map(String::as_str)).map(|n| format!("`{n}`"))
                });
            return Err(ConfigError::UnknownKey {
                key: format!("app.{k}"),
                hint: format!(
                    ": `{app}` has no setting `{k}`{}; its keys are {} (see `taillab apps`)",
                    near.map(|n| format!(" — did you mean {n}?"))
                        .unwrap_or_default(),
                    if app_keys.is_empty() {
                        "(none)".to_string()
                    } else {
                        app_keys.join(", ")
                    }
                ),
            });
        }
        Ok(())
    }

    /// The harness's view of this configuration; fails when a required
    /// setting is missing or a value is out of range.
    pub fn spec(&self) -> Result<RunSpec, ConfigError> {
        let l = &self.load;
        let qps = l.qps.or_else(|| l.arrival.own_rate()).ok_or_else(|| {
            ConfigError::Invalid(
                "say the offered load: --qps RATE (or `qps` in section [load])".into(),
            )
        })?;
        let measure = match (l.requests, l.duration) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(d)) => Bound::Seconds(d.secs()),
            _ => {
                return Err(ConfigError::Invalid(
                    "say how long to measure: --requests N or --duration TIME (load.requests / load.duration)".into(),
                ))
            }
        };
        let warmup = match (l.warmup_requests, l.warmup) {
            (Some(n), _) => Bound::Requests(n),
            (None, Some(d)) => Bound::Seconds(d.secs()),
            (None, None) => Bound::Requests(0),
        };
        let h = &self.harness;
        if h.rt_priority > 99 {
            return Err(ConfigError::Invalid(format!(
                "harness.rt_priority must be 0 (normal scheduling) or 1..=99 (SCHED_FIFO), got {}",
                h.rt_priority
            )));
        }
        if let Some(n) = h.nice {
            if !(-20..=19).contains(&n) {
                return Err(ConfigError::Invalid(format!(
                    "harness.nice must be -20..=19 (a CFS nice value; -20 is the highest), got {n}"
                )));
            }
            if h.rt_priority > 0 {
                return Err(ConfigError::Invalid(format!(
                    "harness.nice {n} and harness.rt_priority {} both set: a worker runs under one scheduling class, CFS at a nice value or SCHED_FIFO at a priority; leave one out",
                    h.rt_priority
                )));
            }
        }
        let spec = RunSpec {
            qps,
            threads: h.threads,
            arrival: l.arrival.clone(),
            dispatch: h.dispatch.unwrap_or_default(),
            seed: l.seed,
            warmup,
            measure,
            wait: rt_wait(h.rt_priority, h.wait),
            spin_margin_ns: h.spin_margin.0,
            shaper: h.shaper,
            discipline: h.discipline,
            keep_records: self.record.save_requests,
            record_format: self.record.format,
            save_requests: self.record.save_requests,
            live: self.monitor.metrics_listen.is_some(),
            record_mem_cap: self.record.max_record_mem.0,
            interval_ns: self.record.interval.0,
            drain_timeout_ns: l.drain_timeout.0,
            rt_priority: (h.rt_priority > 0).then_some(h.rt_priority as i32),
            nice: h.nice,
            cpus: h.cpus.0.clone(),
            helpers: h.helpers,
            producers: h.producers,
            fanout: {
                let f = &self.fanout;
                let spec = crate::fanout::FanoutSpec {
                    leaves: f.leaves,
                    replicas: f.replicas,
                    wait: f.wait,
                    hedge: f.hedge,
                    tied: f.tied,
                };
                // Any fan-out setting off its default is checked (--fanout 0 included).
                (spec != crate::fanout::FanoutSpec::default_one()).then_some(spec)
            },
            send_lag_p99_max_ns: self.monitor.max_send_lag.0,
            net_delay: self.net.delay.clone(),
            roi: self.record.roi,
            roi_force: self.record.roi_force,
        };
        spec.validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(spec)
    }

    /// [`RunConfig::spec`] for running: every request's stamps are kept in
    /// memory whenever they fit under `record.max_record_mem` (the sequence
    /// checks and the run's ideal use them), and written to disk only with
    /// `record.save_requests`. The note says when they did not fit.
    pub fn run_spec(&self) -> Result<(RunSpec, Option<String>), ConfigError> {
        let spec = self.spec()?;
        let need = spec.record_capacity() * crate::records::RECORD_BYTES;
        let fits = need <= spec.record_mem_cap;
        let mut notes = Vec::new();
        if !fits && !self.record.save_requests {
            notes.push(format!(
                "note: {} requests exceed record.max_record_mem {} for per-request records; keeping histograms only (sequence checks and the ideal skipped)",
                spec.record_capacity(),
                self.record.max_record_mem.show()
            ));
        }
        if spec.wait != self.harness.wait {
            notes.push(format!(
                "note: with --rt-priority {} workers block while idle instead of spinning (--wait hybrid spins): a SCHED_FIFO thread that spins keeps its CPU from everything else, and the kernel's RT throttling then stops it for the rest of each second; --wait spin spins anyway",
                self.harness.rt_priority
            ));
        }
        let note = (!notes.is_empty()).then(|| notes.join("\n"));
        Ok((
            RunSpec {
                keep_records: fits || self.record.save_requests,
                ..spec
            },
            note,
        ))
    }

    /// Checks everything that can be checked before a run starts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.app_name()?;
        self.spec()?;
        let n = &self.net;
        let bad = |s: String| Err(ConfigError::Invalid(s));
        if n.clients == 0 || n.clients > 256 {
            return bad(format!("net.clients must be in 1..=256, got {}", n.clients));
        }
        if n.connections == 0 || n.connections > 4096 {
            return bad(format!(
                "net.connections must be in 1..=4096, got {}",
                n.connections
            ));
        }
        if n.max_connections == 0 || n.max_connections > 1_000_000 {
            return bad(format!(
                "net.max_connections must be in 1..=1000000, got {}",
                n.max_connections
            ));
        }
        if n.target.is_none() && n.clients * n.connections > n.max_connections {
            return bad(format!(
                "net.clients × net.connections = {} exceeds net.max_connections {}; raise --max-connections",
                n.clients * n.connections,
                n.max_connections
            ));
        }
        let launchers = n.client_launcher.0.len();
        if launchers > 1 && launchers != n.clients {
            return bad(format!(
                "give net.client_launcher once (for all clients) or {} times (one per client), not {launchers} times",
                n.clients
            ));
        }
        match n.topology {
            Topology::Integrated => {
                if n.clients != 1 || n.target.is_some() {
                    return bad("net.clients and net.target apply to loopback/networked runs; add --topology loopback".into());
                }
                if n.launcher != fields::Launcher::Templates {
                    return bad("net.launcher slurm starts the processes of a networked run; add --topology networked".into());
                }
            }
            Topology::Loopback | Topology::Networked => {
                if self.record.roi != crate::roi::RoiMode::None {
                    return bad("record.roi marks the measured phase of an integrated run (the one process a simulator runs); use --topology integrated".into());
                }
                if n.delay.is_some() {
                    return bad("net.delay simulates a network in integrated runs; loopback/networked have a real one".into());
                }
                if n.topology == Topology::Loopback
                    && (n.server_launcher != "{cmd}" || launchers > 0)
                {
                    return bad(
                        "launchers are for --topology networked; loopback runs everything here"
                            .into(),
                    );
                }
            }
        }
        check_senders(n)?;
        if n.max_batch == 0 || n.max_frame.0 == 0 || n.max_frame.0 > 1 << 30 {
            return bad("net.max_batch must be ≥ 1 and net.max_frame in 1B..=1GiB".into());
        }
        let m = &self.monitor;
        if !(10_000_000..=60_000_000_000).contains(&m.period.0) {
            return bad(format!(
                "monitor.period must be within 10ms..60s, got {}",
                m.period
            ));
        }
        for (k, v) in [("max_steal", m.max_steal), ("max_foreign", m.max_foreign)] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!(
                    "monitor.{k} must be a percentage of one CPU ≥ 0, got {v}"
                ));
            }
        }
        if !(m.max_recv_lag_ratio.is_finite() && m.max_recv_lag_ratio >= 0.0) {
            return bad(format!(
                "monitor.max_recv_lag_ratio must be a fraction of sojourn p50 ≥ 0, got {}",
                m.max_recv_lag_ratio
            ));
        }
        if let Some(text) = &m.metrics_listen {
            let a = metrics_address(text, m.metrics_public)
                .map_err(|e| ConfigError::Invalid(e.to_string()))?;
            // One client per fan-out leaf, else net.clients.
            let clients = if self.fanout.leaves > 1 {
                self.fanout.leaves
            } else {
                n.clients
            };
            if a.port() != 0 && a.port() as usize + clients - 1 > u16::MAX as usize {
                return bad(format!(
                    "monitor.metrics_listen {a}: client i of {clients} listens on port {}+i, beyond 65535; give a lower port",
                    a.port()
                ));
            }
        }
        if self.ci.redo_disturbed > 20 {
            return bad(format!(
                "ci.redo_disturbed must be in 0..=20 (redos per run), got {}",
                self.ci.redo_disturbed
            ));
        }
        if let Some(t) = self.ci_target()? {
            t.validate().map_err(|e| ConfigError::Invalid(e.0))?;
        }
        Ok(())
    }

    /// The stopping rule, when a CI target is set.
    pub fn ci_target(&self) -> Result<Option<crate::experiment::CiTarget>, ConfigError> {
        let c = &self.ci;
        Ok(c.target.map(|target| crate::experiment::CiTarget {
            target,
            min_runs: c.min_runs,
            max_runs: c.max_runs,
            metrics: if c.metrics.0.is_empty() {
                crate::experiment::CiTarget::default_metrics()
            } else {
                c.metrics.0.clone()
            },
        }))
    }
}
