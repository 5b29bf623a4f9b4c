//! A busy-polling raw memcached client: the floor `taillab load --app
//! memcached` is compared against (bench/transport).
//!
//! One connection, one request in flight: at each intended time (a fixed
//! gap, `--qps`) it writes `get KEY\r\n` and reads without blocking, in a
//! loop, until the response's `END\r\n`; latency is from the intended time
//! to the user-space read that completed the response (so a response that
//! overruns the next slot delays that request, as in an open-loop client).
//! Nothing is ever woken up on this side: the rest is memcached and the
//! kernel. Keys are the adapter's (`k` + zero-padded number, 16 bytes) and
//! should exist (a `taillab load --app memcached` run before this preloads
//! them).
//!
//! Usage: mcpoll --port P [--qps 10000] [--n 100000] [--warmup 2000] [--keys 10000]
//! Prints one JSON line: {"n":…, "p50_ns":…, "p90_ns":…, "p99_ns":…, "mean_ns":…}

use std::io::{Read, Write};
use std::net::TcpStream;
use taillab_core::clock::{now_ns, spin_until};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, got {v}")))
        .unwrap_or(default)
}

fn main() {
    let port = arg("--port", 11211);
    let gap = 1_000_000_000 / arg("--qps", 10_000).max(1);
    let (n, warmup, keys) = (arg("--n", 100_000) as usize, arg("--warmup", 2000) as usize, arg("--keys", 10_000));
    let mut c = TcpStream::connect(("127.0.0.1", port as u16)).expect("connect to memcached");
    c.set_nodelay(true).expect("nodelay");
    c.set_nonblocking(true).expect("nonblocking");
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let (mut sum, mut buf, mut got) = (0u128, vec![0u8; 64 * 1024], Vec::with_capacity(4096));
    let mut next = now_ns() + gap;
    for i in 0..warmup + n {
        spin_until(next);
        let req = format!("get k{:015}\r\n", (i as u64 * 7919) % keys);
        c.write_all(req.as_bytes()).expect("write");
        got.clear();
        let done = loop {
            match c.read(&mut buf) {
                Ok(0) => panic!("memcached closed the connection"),
                Ok(k) => {
                    got.extend_from_slice(&buf[..k]);
                    if got.ends_with(b"END\r\n") {
                        break now_ns();
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => panic!("read: {e}"),
            }
        };
        if i >= warmup {
            h.record(done - next).expect("auto range");
            sum += (done - next) as u128;
        }
        next += gap;
    }
    println!(
        "{{\"n\":{n},\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"mean_ns\":{:.0}}}",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        sum as f64 / n as f64
    );
}
