//! Raw TCP ping-pong on loopback: the floor the loopback configuration is
//! compared against (bench/transport).
//!
//! A minimal echo server thread and a client that sends one message, blocks
//! until the whole reply is back, waits for the next slot, and repeats. The
//! message sizes equal a taillab request and response frame carrying the
//! same payload (16 + size bytes out, 32 + size back), TCP_NODELAY on both
//! ends, so the only difference from `--app null` over loopback is the
//! harness itself (queue hand-off, stamps, separate send/receive threads).
//!
//! With `--poll 1` both ends busy-poll instead of blocking: non-blocking
//! reads in a loop, so neither side is ever woken by the kernel (the floor
//! for a spinning client and server; on a host without a cpuidle driver the
//! wake-ups are most of the blocking RTT).
//!
//! With `--cpus S,C` the server thread runs on CPU S and the client on CPU
//! C. Unpinned, a blocking ping-pong usually runs both ends on one CPU: the
//! woken end is placed where the waker runs, so each hand-over is a context
//! switch, not a wake-up of another CPU. A load generator and its server run
//! at the same time and so on two CPUs; pinned apart, the ping-pong is the
//! floor for that placement.
//!
//! Usage: pingpong [--size 64] [--n 20000] [--gap-us 500] [--warmup 1000] [--poll 0|1] [--cpus S,C]
//! Prints one JSON line: {"n":…, "size":…, "p50_ns":…, "p90_ns":…, "p99_ns":…, "mean_ns":…}

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use taillab_core::clock::{now_ns, set_timer_slack_1ns, wait_until, WaitMode};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name} takes a number, got {v}")))
        .unwrap_or(default)
}

/// `read_exact` that also works on a non-blocking socket (spins on WouldBlock).
fn read_full(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `--cpus S,C`: the server's and the client's CPU, if given.
fn cpus() -> Option<(usize, usize)> {
    let args: Vec<String> = std::env::args().collect();
    let v = args.iter().position(|a| a == "--cpus").and_then(|i| args.get(i + 1))?;
    let parse =
        |x: &str| x.trim().parse::<usize>().unwrap_or_else(|_| panic!("--cpus takes S,C (two CPU numbers), got {v}"));
    let (a, b) = v.split_once(',').unwrap_or_else(|| panic!("--cpus takes S,C (two CPU numbers), got {v}"));
    Some((parse(a), parse(b)))
}

/// Pins the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_setaffinity
    // reads it for this thread (pid 0) only.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    assert!(ok, "cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error());
}

fn main() {
    let placement = cpus();
    let size = arg("--size", 64) as usize;
    let n = arg("--n", 20_000) as usize;
    let gap = arg("--gap-us", 500) * 1000;
    let warmup = arg("--warmup", 1000) as usize;
    let poll = arg("--poll", 0) == 1;
    let (req_len, resp_len) = (16 + size, 32 + size);
    let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let addr = l.local_addr().expect("local addr");
    std::thread::spawn(move || {
        if let Some((srv, _)) = placement {
            pin(srv);
        }
        let (mut s, _) = l.accept().expect("accept");
        s.set_nodelay(true).expect("nodelay");
        s.set_nonblocking(poll).expect("nonblocking");
        let mut req = vec![0u8; req_len];
        let resp = vec![1u8; resp_len];
        while read_full(&mut s, &mut req).is_ok() {
            if s.write_all(&resp).is_err() {
                break;
            }
        }
    });
    set_timer_slack_1ns();
    if let Some((_, cli)) = placement {
        pin(cli);
    }
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_nodelay(true).expect("nodelay");
    // A write of one small frame never finds a full send buffer here.
    c.set_nonblocking(poll).expect("nonblocking");
    let req = vec![2u8; req_len];
    let mut resp = vec![0u8; resp_len];
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("bounds");
    let mut sum = 0u128;
    let mut next = now_ns();
    for i in 0..warmup + n {
        next += gap;
        // The same hybrid wait the load client's sender uses.
        wait_until(next, WaitMode::Hybrid, 1_000_000.min(gap / 2));
        let t = now_ns();
        c.write_all(&req).expect("write");
        read_full(&mut c, &mut resp).expect("read");
        let rtt = now_ns() - t;
        if i >= warmup {
            h.record(rtt).expect("auto range");
            sum += rtt as u128;
        }
    }
    println!(
        "{{\"n\":{n},\"size\":{size},\"poll\":{poll},\"p50_ns\":{},\"p90_ns\":{},\"p99_ns\":{},\"mean_ns\":{:.0}}}",
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        sum as f64 / n as f64
    );
}
