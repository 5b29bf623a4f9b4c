//! A minimal level-triggered epoll set (Linux), shared by the per-worker
//! server dispatch and the polling load client.

use std::os::fd::RawFd;

/// A level-triggered epoll instance; closed on drop.
pub struct Epoll {
    fd: RawFd,
}

/// A buffer for [`Epoll::wait`]'s ready list.
pub fn events() -> Vec<libc::epoll_event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; 64]
}

impl Epoll {
    /// A new, empty set (close-on-exec).
    pub fn new() -> std::io::Result<Self> {
        // SAFETY: plain syscall; the fd is closed in Drop.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Epoll { fd })
    }

    /// Watches `fd` for input, reporting it as `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> std::io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: valid epoll fd; ev outlives the call; a bad `fd` is an error return.
        if unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd` (errors ignored: the fd may be gone already).
    pub fn del(&self, fd: RawFd) {
        // SAFETY: a null event is allowed for DEL.
        unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Waits up to `timeout_ns` (0: just look; nanosecond resolution) and
    /// returns how many fds are ready: their tokens are `token(events, i)`
    /// for `i < n` (an interrupted wait reports none).
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ns: u64) -> usize {
        let ts = libc::timespec {
            tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
        };
        crate::sys::epoll_pwait2(self.fd, events, &ts)
    }
}

/// The token of ready entry `i` after [`Epoll::wait`].
pub fn token(events: &[libc::epoll_event], i: usize) -> u64 {
    events[i].u64
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}
