//! Every decoder that reads bytes from the network: the taillab frame
//! parser (server and client direction) and the external-protocol response
//! parsers. Any input must decode, ask for more, or error — never panic,
//! never claim more bytes than it was given. Run: `cargo +nightly fuzz run decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taillab_transport::proto::{parse, Kind};
use taillab_transport::wire::{HttpWire, MemcachedWire, RedisWire, TaillabWire, Wire};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the frame cap so small caps get exercised too.
    let (cap, bytes) = match data.split_first() {
        Some((c, rest)) => (u32::from(*c) * 16, rest),
        None => (0, data),
    };
    for expect in [Kind::Request, Kind::Response] {
        let mut off = 0;
        // Walk a stream of frames the way the server's reader does.
        while let Ok(Some(h)) = parse(&bytes[off..], cap, expect) {
            assert!(h.len <= cap);
            assert!(h.frame_len() <= bytes.len() - off);
            off += h.frame_len();
        }
    }
    let wires: [&dyn Wire; 4] = [
        &TaillabWire { max_frame: cap },
        &MemcachedWire { preload: vec![] },
        &RedisWire { preload: vec![] },
        &HttpWire,
    ];
    for w in wires {
        let mut off = 0;
        while let Ok(Some(r)) = w.decode(&bytes[off..]) {
            assert!(r.consumed > 0 && r.consumed <= bytes.len() - off);
            off += r.consumed;
        }
    }
});
