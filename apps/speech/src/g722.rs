//! G.722 decoding through spandsp (Debian `libspandsp-dev`).
//!
//! The Asterisk prompt recordings ship as 8 kHz WAV and as G.722, a
//! wideband (16 kHz) codec. The en-us acoustic model expects 16 kHz speech:
//! on the 8 kHz files upsampled by sox the full-LM word error rate was 74 %,
//! on the G.722 decodes 27 % (the first 60 prompts), so the app decodes G.722.

use std::ffi::{c_int, c_void};

extern "C" {
    fn g722_decode_init(s: *mut c_void, rate: c_int, options: c_int) -> *mut c_void;
    fn g722_decode(s: *mut c_void, amp: *mut i16, data: *const u8, len: c_int) -> c_int;
    fn g722_decode_free(s: *mut c_void) -> c_int;
}

/// Decodes a headerless 64 kbit/s G.722 stream into 16 kHz samples.
pub fn decode(bitstream: &[u8]) -> Result<Vec<i16>, String> {
    let len = c_int::try_from(bitstream.len())
        .map_err(|_| format!("G.722 stream of {} bytes is too long", bitstream.len()))?;
    // Each byte carries two 16 kHz samples at 64 kbit/s.
    let mut out = vec![0i16; 2 * bitstream.len()];
    // SAFETY: spandsp allocates its own state (NULL in); `out` holds the
    // two samples per input byte that 64 kbit/s mode produces, and the state
    // is freed before returning.
    let n = unsafe {
        let s = g722_decode_init(std::ptr::null_mut(), 64000, 0);
        if s.is_null() {
            return Err("g722_decode_init failed".into());
        }
        let n = g722_decode(s, out.as_mut_ptr(), bitstream.as_ptr(), len);
        g722_decode_free(s);
        n
    };
    let n = usize::try_from(n).map_err(|_| "g722_decode failed".to_string())?;
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_samples_per_byte() {
        let pcm = super::decode(&[0x55; 800]).unwrap();
        assert_eq!(pcm.len(), 1600);
        assert!(super::decode(&[]).unwrap().is_empty());
    }
}
