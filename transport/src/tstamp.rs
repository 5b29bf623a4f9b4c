//! Kernel receive stamps (SO_TIMESTAMPING) on TCP sockets.
//!
//! A user-space stamp taken after `read` includes the reader's own delay:
//! the wake-up of a sleeping thread, or a wait for a CPU that the spinning
//! sender holds (milliseconds on a small host). The kernel stamps each
//! segment when it enters the network stack (`SOF_TIMESTAMPING_RX_SOFTWARE`;
//! on loopback, when the sender's write queued it), and `recvmsg` hands the
//! stamp of the last segment it copied out in a control message. That is
//! when the bytes arrived, whoever reads them and whenever.
//!
//! Limits, and what the code does about them:
//! - The stamp is `CLOCK_REALTIME`; every other stamp is `CLOCK_MONOTONIC`.
//!   [`to_mono`] subtracts an offset sampled between two monotonic reads
//!   (error: half that window, tens of ns). NTP slews both clocks alike, so
//!   only a step of the wall clock moves the offset; [`refresh_offset`] runs
//!   every few tens of ms, and a stamp that a step made land after the
//!   user-space read (or before the request was sent) is refused and counted.
//! - TCP merges small segments waiting in the receive queue and keeps the
//!   later stamp, and one `recvmsg` reports only its last segment's stamp:
//!   responses that waited together get the stamp of the last one. That is
//!   never earlier than the truth; the client counts such responses
//!   (`shared`), and its `client` check fails when it read late enough for
//!   this to matter.
//! - Hardware stamps (`SOF_TIMESTAMPING_RX_HARDWARE`) come from the NIC's
//!   own clock. They are used only when the NIC gives them (its driver must
//!   have RX stamping on: `hwstamp_ctl -i IF -r 1`) *and* that clock is the
//!   system's wall clock (kept so by `phc2sys`): the hardware stamp must
//!   precede the software stamp of the same segment by less than
//!   [`HW_SYNC_WINDOW_NS`]. Otherwise the software stamp is used and the
//!   hardware one counted as unsynced.
//! - A socket that gives no stamp (a kernel without the option, or the
//!   first segments after it is turned on: the kernel enables stamping
//!   asynchronously) gets the user-space stamp, counted as such.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI64, Ordering};

/// `SO_TIMESTAMPING` (asm-generic; x86-64 and arm64) and its control message.
const SO_TIMESTAMPING: libc::c_int = 37;
const SCM_TIMESTAMPING: libc::c_int = SO_TIMESTAMPING;

/// A hardware stamp further than this before the software stamp of the
/// same segment is not on the system's clock.
pub const HW_SYNC_WINDOW_NS: u64 = 1_000_000;

/// Which clock a stamp came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StampClock {
    /// Taken in user space after the read.
    #[serde(rename = "user")]
    User,
    /// The kernel's software receive stamp.
    #[serde(rename = "kernel-software")]
    Software,
    /// The NIC's receive stamp, on the system clock.
    #[serde(rename = "kernel-hardware")]
    Hardware,
}

impl StampClock {
    /// Two bits, for the wire.
    pub fn bits(self) -> u64 {
        match self {
            StampClock::User => 0,
            StampClock::Software => 1,
            StampClock::Hardware => 2,
        }
    }
    /// From [`StampClock::bits`] (an unknown value reads as user).
    pub fn from_bits(b: u64) -> Self {
        match b {
            1 => StampClock::Software,
            2 => StampClock::Hardware,
            _ => StampClock::User,
        }
    }
}

/// Asks the kernel to stamp `fd`'s received segments (software and, where
/// the NIC does it, hardware) and to report the stamps to `recvmsg`.
pub fn enable(fd: RawFd) -> std::io::Result<()> {
    let flags: libc::c_uint = libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE;
    refresh_offset();
    // SAFETY: `flags` outlives the call and is sized as passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPING,
            (&flags as *const libc::c_uint).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `CLOCK_REALTIME − CLOCK_MONOTONIC` in ns (0 until first sampled).
static OFFSET: AtomicI64 = AtomicI64::new(0);

fn clock(id: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into our timespec; both clocks always exist.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Re-samples the wall-clock offset: the realtime read between the two
/// monotonic reads that lie closest together of three tries.
pub fn refresh_offset() {
    let mut best = (i64::MAX, 0i64);
    for _ in 0..3 {
        let a = clock(libc::CLOCK_MONOTONIC);
        let r = clock(libc::CLOCK_REALTIME);
        let b = clock(libc::CLOCK_MONOTONIC);
        if b - a < best.0 {
            best = (b - a, r - (a + (b - a) / 2));
        }
    }
    OFFSET.store(best.1, Ordering::Relaxed);
}

/// A wall-clock stamp on the monotonic clock.
pub fn to_mono(real_ns: u64) -> u64 {
    (real_ns as i64 - OFFSET.load(Ordering::Relaxed)).max(0) as u64
}

/// A kernel receive stamp, on the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelStamp {
    /// When the bytes arrived, converted to the monotonic clock (ns).
    pub mono_ns: u64,
    /// Which clock the stamp came from (software or hardware).
    pub clock: StampClock,
    /// The NIC gave a stamp that is not on the system clock (so the
    /// software one is used).
    pub hw_unsynced: bool,
}

/// Picks the stamp of one control message: `sw` and `hw` are the software
/// and raw hardware wall-clock stamps (0: none).
pub fn choose(sw: u64, hw: u64) -> Option<KernelStamp> {
    let synced = hw != 0 && sw != 0 && hw <= sw && sw - hw < HW_SYNC_WINDOW_NS;
    let hw_unsynced = hw != 0 && !synced;
    if synced {
        return Some(KernelStamp { mono_ns: to_mono(hw), clock: StampClock::Hardware, hw_unsynced });
    }
    (sw != 0).then(|| KernelStamp { mono_ns: to_mono(sw), clock: StampClock::Software, hw_unsynced })
}

/// What became of a read's kernel stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Used.
    Used,
    /// The socket gave none: the user-space stamp stands in.
    Missing,
    /// Later than the user-space read that returned it (a wall-clock step):
    /// refused.
    Late,
    /// Earlier than it could be (before the request was sent, or before the
    /// server finished it): refused.
    Early,
}

/// The stamp a read stands for: the kernel's `k` if it lies within
/// `[not_before, user]`, else the user-space stamp `user`.
pub fn judge(k: Option<KernelStamp>, user: u64, not_before: u64) -> (u64, StampClock, Fate) {
    match k {
        None => (user, StampClock::User, Fate::Missing),
        Some(k) if k.mono_ns > user => (user, StampClock::User, Fate::Late),
        Some(k) if k.mono_ns < not_before => (user, StampClock::User, Fate::Early),
        Some(k) => (k.mono_ns, k.clock, Fate::Used),
    }
}

pub use taillab_core::sections::transport::StampCounts;

/// Counting stamps into [`StampCounts`] (which lives with the summary's
/// other sections in taillab-core).
pub trait Tally {
    /// Counts one stamp.
    fn count(&mut self, clock: StampClock, fate: Fate, hw_unsynced: bool);
    /// Counts a stamp whose clock another host reported.
    fn count_clock(&mut self, clock: StampClock);
}

impl Tally for StampCounts {
    fn count(&mut self, clock: StampClock, fate: Fate, hw_unsynced: bool) {
        match (fate, clock) {
            (Fate::Used, StampClock::Hardware) => self.kernel_hardware += 1,
            (Fate::Used, _) => self.kernel_software += 1,
            (Fate::Missing, _) => self.user += 1,
            (Fate::Late, _) => self.refused_late += 1,
            (Fate::Early, _) => self.refused_early += 1,
        }
        self.hw_unsynced += hw_unsynced as u64;
    }

    fn count_clock(&mut self, clock: StampClock) {
        self.count(clock, if clock == StampClock::User { Fate::Missing } else { Fate::Used }, false);
    }
}

/// Room for one `scm_timestamping` control message (and any other).
#[repr(C, align(8))]
pub struct CmsgBuf([u8; 256]);

impl Default for CmsgBuf {
    fn default() -> Self {
        CmsgBuf([0; 256])
    }
}

fn ts_ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// `recvmsg` into `buf`: the bytes read (0 at end of stream) and the kernel
/// stamp of the last segment they came from, if the socket gave one.
pub fn recv(
    fd: RawFd,
    buf: &mut [u8],
    flags: libc::c_int,
    cm: &mut CmsgBuf,
) -> std::io::Result<(usize, Option<KernelStamp>)> {
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: a zeroed msghdr is valid; the fields set below point at live buffers.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cm.0.as_mut_ptr().cast();
    msg.msg_controllen = cm.0.len() as _;
    // SAFETY: msg describes buffers we own for the duration of the call.
    let n = unsafe { crate::sys::recvmsg(fd, &mut msg, flags) }?;
    let mut stamp = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel just filled,
    // bounded by msg_controllen; the payload is read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SCM_TIMESTAMPING {
                let ts: [libc::timespec; 3] = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = choose(ts_ns(&ts[0]), ts_ns(&ts[2]));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn hardware_only_when_on_the_system_clock() {
        refresh_offset();
        let sw = 1_800_000_000_000_000_000u64;
        let k = choose(sw, sw - 5_000).unwrap();
        assert_eq!((k.clock, k.hw_unsynced), (StampClock::Hardware, false));
        // A NIC clock counting from its own epoch: software stamp, flagged.
        let k = choose(sw, 37_000_000_000).unwrap();
        assert_eq!((k.clock, k.hw_unsynced), (StampClock::Software, true));
        // After the software stamp: not the same clock either.
        assert_eq!(choose(sw, sw + 10).unwrap().clock, StampClock::Software);
        assert_eq!(choose(0, 0), None);
        for c in [StampClock::User, StampClock::Software, StampClock::Hardware] {
            assert_eq!(StampClock::from_bits(c.bits()), c);
        }
    }

    #[test]
    fn stamps_outside_the_request_are_refused_and_counted() {
        let k = |t| Some(KernelStamp { mono_ns: t, clock: StampClock::Software, hw_unsynced: false });
        assert_eq!(judge(k(150), 200, 100), (150, StampClock::Software, Fate::Used));
        // After the read that returned it (a wall-clock step back): the read's own stamp.
        assert_eq!(judge(k(250), 200, 100), (200, StampClock::User, Fate::Late));
        // Before the request could have been answered.
        assert_eq!(judge(k(50), 200, 100), (200, StampClock::User, Fate::Early));
        assert_eq!(judge(None, 200, 100), (200, StampClock::User, Fate::Missing));
        let mut c = StampCounts::default();
        for (clock, fate) in [(StampClock::Software, Fate::Used), (StampClock::User, Fate::Late)] {
            c.count(clock, fate, false);
        }
        assert_eq!((c.kernel_software, c.refused_late, c.total()), (1, 1, 2));
        assert_eq!(c.clock(), "mixed");
        c.kernel_software += 300;
        assert_eq!(c.clock(), "kernel-software");
        assert_eq!(StampCounts::default().clock(), "user");
    }

    #[test]
    fn loopback_segments_carry_a_stamp_between_write_and_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        enable(b.as_raw_fd()).unwrap();
        // The kernel turns stamping on asynchronously: allow a few tries.
        let (mut cm, mut buf) = (CmsgBuf::default(), [0u8; 64]);
        let mut got = None;
        for _ in 0..50 {
            let before = taillab_core::clock::now_ns();
            a.write_all(b"x").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let (n, k) = recv(b.as_raw_fd(), &mut buf, 0, &mut cm).unwrap();
            let after = taillab_core::clock::now_ns();
            assert_eq!(n, 1);
            if let Some(k) = k {
                got = Some((before, k, after));
                break;
            }
        }
        let (before, k, after) = got.expect("no kernel stamp on loopback within 50 tries");
        assert_eq!(k.clock, StampClock::Software);
        // Stamped after the write began, a good while before the read (2 ms sleep).
        assert!(before <= k.mono_ns + 50 && k.mono_ns + 1_000_000 <= after, "{before} {} {after}", k.mono_ns);
    }
}
