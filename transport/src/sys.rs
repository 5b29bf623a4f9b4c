//! The client's and server's per-request syscalls, made directly.
//!
//! glibc's `send`, `recvmsg` and `epoll_pwait2` are thread-cancellation points: each call
//! switches the thread's cancellation state on and off around the syscall, which took about
//! 4 % of a saturated client's CPU (`perf record` of `taillab load` at its ceiling). taillab
//! never cancels threads, so these make the same syscalls without that bookkeeping; errors
//! come back as `std::io::Error` as from the standard library.

use std::os::fd::RawFd;

fn result(n: libc::c_long) -> std::io::Result<usize> {
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `send(fd, buf, MSG_NOSIGNAL)`: bytes written (a closed peer is an error, not SIGPIPE).
pub fn send(fd: RawFd, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `buf` is valid for its length; a null address with length 0 is sendto's send.
    result(unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0,
        )
    })
}

/// `recvmsg(fd, msg, flags)`.
///
/// # Safety
/// `msg` must describe buffers that are valid and writable for the call.
pub unsafe fn recvmsg(fd: RawFd, msg: *mut libc::msghdr, flags: libc::c_int) -> std::io::Result<usize> {
    // SAFETY: the caller vouches for `msg`.
    result(unsafe { libc::syscall(libc::SYS_recvmsg, fd, msg, flags) })
}

/// `epoll_pwait2(epfd, events, timeout)` without a signal mask: ready entries (0 when
/// interrupted or on an error, which a caller treats as "nothing yet").
pub fn epoll_pwait2(epfd: RawFd, events: &mut [libc::epoll_event], timeout: &libc::timespec) -> usize {
    // SAFETY: `events` has room for its length; `timeout` lives across the call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epfd,
            events.as_mut_ptr(),
            events.len() as libc::c_int,
            timeout as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    n.max(0) as usize
}

/// Writes all of `b` on the blocking socket `fd` ([`send`] until done).
pub fn send_all(fd: RawFd, mut b: &[u8]) -> std::io::Result<()> {
    while !b.is_empty() {
        match send(fd, b) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => b = &b[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
