//! The kernel's process connector (netlink `NETLINK_CONNECTOR`, `CN_IDX_PROC`): a socket
//! that, once subscribed, receives an event for every exec and exit on the machine. Needs
//! CAP_NET_ADMIN.

pub use crate::sys::types::ProcEvent;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Where a connector datagram's event starts: after the nlmsghdr (16) and cn_msg (20).
const EVENT: usize = 16 + 20;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_CN_MCAST_IGNORE: u32 = 2;

/// A connector socket, bound but not yet subscribed.
#[derive(Debug)]
pub struct ProcConnector {
    fd: OwnedFd,
}

impl ProcConnector {
    /// Opens and binds the socket; no events flow until [`Self::subscribe`].
    pub fn open() -> io::Result<Self> {
        // SAFETY: plain socket(2); a non-negative result is a new descriptor we own.
        let raw = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_CONNECTOR) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw was just created and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid; its family is set below. No group yet.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: binds our socket to a correctly sized sockaddr_nl.
        let rc = unsafe {
            libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_nl).cast(), std::mem::size_of::<libc::sockaddr_nl>() as u32)
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { fd })
    }

    /// Joins (`true`) or leaves the connector's group, telling the kernel to start or stop
    /// sending (it counts listeners).
    pub fn subscribe(&self, on: bool) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        let group = CN_IDX_PROC;
        let opt = if on { libc::NETLINK_ADD_MEMBERSHIP } else { libc::NETLINK_DROP_MEMBERSHIP };
        // SAFETY: setsockopt on our socket with a u32 of its size.
        let rc = unsafe { libc::setsockopt(fd, libc::SOL_NETLINK, opt, (&group as *const u32).cast(), 4) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let msg = control_message(if on { PROC_CN_MCAST_LISTEN } else { PROC_CN_MCAST_IGNORE });
        // SAFETY: sends our buffer of its own length on our socket.
        if unsafe { libc::send(fd, msg.as_ptr().cast(), msg.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Blocks for the next event. `Ok(None)` when events were dropped under a burst or
    /// the wait was interrupted (the caller's next reading scans instead); an error when
    /// the socket failed for good.
    pub fn next(&self, buf: &mut [u8; 1024]) -> io::Result<Option<ProcEvent>> {
        // SAFETY: receives into our buffer, at most its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(parse_event(&buf[..n as usize]))
    }
}

/// nlmsghdr + cn_msg + the op, "listen" or "ignore".
fn control_message(op: u32) -> Vec<u8> {
    let mut msg = Vec::with_capacity(40);
    msg.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes()); // nlmsg_type
    msg.extend_from_slice(&0u16.to_ne_bytes()); // nlmsg_flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_seq
    msg.extend_from_slice(&std::process::id().to_ne_bytes()); // nlmsg_pid
    msg.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    msg.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // ack
    msg.extend_from_slice(&4u16.to_ne_bytes()); // len
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&op.to_ne_bytes());
    msg
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// The event of one connector datagram; `None` if it is too short.
fn parse_event(b: &[u8]) -> Option<ProcEvent> {
    let (what, tgid) = (u32_at(b, EVENT)?, u32_at(b, EVENT + 20)?);
    Some(match what {
        PROC_EVENT_EXEC => ProcEvent::Exec { tgid },
        PROC_EVENT_EXIT => ProcEvent::Exit { tgid },
        _ => ProcEvent::Other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connector_events_are_read_at_their_offsets() {
        let mut b = vec![0u8; 64];
        b[36..40].copy_from_slice(&PROC_EVENT_EXEC.to_ne_bytes());
        b[56..60].copy_from_slice(&4242u32.to_ne_bytes());
        assert_eq!(parse_event(&b), Some(ProcEvent::Exec { tgid: 4242 }));
        b[36..40].copy_from_slice(&PROC_EVENT_EXIT.to_ne_bytes());
        assert_eq!(parse_event(&b), Some(ProcEvent::Exit { tgid: 4242 }));
        b[36..40].copy_from_slice(&1u32.to_ne_bytes());
        assert_eq!(parse_event(&b), Some(ProcEvent::Other));
        assert_eq!(parse_event(&b[..50]), None);
    }

    #[test]
    fn the_subscription_message_is_one_netlink_message_of_its_own_length() {
        let m = control_message(PROC_CN_MCAST_LISTEN);
        assert_eq!(m.len(), 40);
        assert_eq!(u32_at(&m, 0), Some(40));
        assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
    }
}
