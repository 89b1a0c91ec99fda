//! The platform seam on systems other than Linux: each call does the portable thing or
//! returns [`std::io::ErrorKind::Unsupported`], so the crate builds and a port has one
//! file to fill in (see issue 30). Nothing here pretends: an owner-only mode that cannot
//! be set is not reported as set.

fn unsupported(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, format!("{what} is not implemented on this platform yet"))
}

pub mod time {
    //! Clocks from `std`: a process-local monotonic clock (not counting suspend).

    fn origin() -> std::time::Instant {
        static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        *T0.get_or_init(std::time::Instant::now)
    }

    /// Microseconds since the first reading in this process.
    pub fn boot_us() -> u64 {
        origin().elapsed().as_micros() as u64
    }

    /// Nanoseconds since the first reading in this process.
    pub fn monotonic_ns() -> u64 {
        origin().elapsed().as_nanos() as u64
    }

    /// Unknown here: empty.
    pub fn boot_id() -> String {
        String::new()
    }
}

pub mod timer {
    //! No kernel timer here: the alarm uses tokio's.

    /// Never constructed on this platform.
    pub struct BootTimer(std::convert::Infallible);

    impl BootTimer {
        pub fn new() -> std::io::Result<Self> {
            Err(super::unsupported("a boot-clock timer"))
        }
        pub fn set_in(&self, _us: u64) -> std::io::Result<()> {
            match self.0 {}
        }
        pub async fn expired(&self) -> Option<std::io::Result<()>> {
            match self.0 {}
        }
    }
}

pub mod sched {
    //! No per-thread slice or idle class here.

    pub fn short_slice_for_this_thread(_ns: u64) -> std::io::Result<()> {
        Err(super::unsupported("a per-thread scheduler slice"))
    }
    pub fn this_thread_slice_ns() -> Option<u64> {
        None
    }
    pub fn is_unsupported_slice(e: &std::io::Error) -> bool {
        e.kind() == std::io::ErrorKind::Unsupported
    }
    pub fn lowest_for_this_thread() -> std::io::Result<()> {
        Err(super::unsupported("the idle scheduling class"))
    }
}

pub mod signal {
    //! Ctrl-C (the console's interrupt) only, until a port adds its own stop requests
    //! (SIGTERM on macOS, a service stop or window close on Windows).

    pub async fn stop_requested() {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

pub mod memory {
    //! Nothing is given back here.

    /// # Safety
    /// As on Linux; does nothing here.
    pub unsafe fn drop_pages(_range: std::ops::Range<usize>) -> bool {
        false
    }
    pub fn trim_heap() {}
}

pub mod id {
    //! No POSIX user ids here: everyone is user 0 and not root.

    pub fn uid() -> u32 {
        0
    }
    pub fn euid() -> u32 {
        0
    }
    pub fn is_root() -> bool {
        false
    }
    /// The account name from the environment (`USERNAME`, as Windows sets it).
    pub fn account_name() -> Option<String> {
        std::env::var("USERNAME").ok().filter(|n| !n.is_empty())
    }
}

pub mod cpu {
    //! CPUs from `std`.

    pub fn online() -> usize {
        std::thread::available_parallelism().map_or(0, |n| n.get())
    }
}

pub mod errno {
    //! Errors by their portable kind.

    use crate::sys::types::SpawnRefusal;

    pub fn spawn_refusal(e: &std::io::Error) -> SpawnRefusal {
        match e.kind() {
            std::io::ErrorKind::NotFound => SpawnRefusal::NotFound,
            std::io::ErrorKind::PermissionDenied => SpawnRefusal::NotExecutable,
            _ => SpawnRefusal::Other,
        }
    }
    pub fn is_try_again(e: &std::io::Error) -> bool {
        e.kind() == std::io::ErrorKind::WouldBlock
    }
}

pub mod fs {
    //! Files with `std` alone: no modes, no umask; opening refuses nothing extra. A port
    //! must give Lull's files owner-only access control lists before it ships.

    use crate::sys::types::{FileId, Ownership};
    use std::fs::{DirBuilder, Metadata, OpenOptions};
    use std::io;
    use std::path::Path;

    pub fn set_umask(_mask: u32) -> u32 {
        0
    }
    pub fn with_umask<T>(_mask: u32, f: impl FnOnce() -> T) -> T {
        f()
    }
    pub fn dir_builder(_mode: u32) -> DirBuilder {
        let mut b = DirBuilder::new();
        b.recursive(true);
        b
    }
    pub fn create_private_dir(dir: &Path) -> io::Result<()> {
        dir_builder(0o700).create(dir)
    }
    pub fn replace_durably(from: &Path, to: &Path) -> io::Result<()> {
        crate::sys::portable::replace_durably(from, to)
    }
    pub fn create_mode(opts: &mut OpenOptions, _mode: u32) -> &mut OpenOptions {
        opts
    }
    pub fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
        opts
    }
    pub fn no_follow_nonblocking(opts: &mut OpenOptions) -> &mut OpenOptions {
        opts
    }
    pub fn is_symlink_refusal(_e: &io::Error) -> bool {
        false
    }
    pub fn make_fifo(_path: &Path, _mode: u32) -> io::Result<()> {
        Err(super::unsupported("a FIFO"))
    }
    pub fn set_mode(_path: &Path, _mode: u32) -> io::Result<()> {
        Err(super::unsupported("a file mode"))
    }
    pub fn set_file_mode(_file: &std::fs::File, _mode: u32) -> io::Result<()> {
        Err(super::unsupported("a file mode"))
    }
    pub fn set_mode_no_follow(_path: &Path, _mode: u32) -> io::Result<()> {
        Err(super::unsupported("a file mode"))
    }
    /// Never known here.
    pub fn others_may_access(_path: &Path) -> io::Result<bool> {
        Ok(false)
    }
    pub fn ownership(_meta: &Metadata) -> Ownership {
        Ownership { uid: 0, mode: 0 }
    }
    pub fn file_id(_meta: &Metadata) -> FileId {
        FileId { dev: 0, ino: 0 }
    }
    pub fn is_socket(_meta: &Metadata) -> bool {
        false
    }
    pub fn mtime(meta: &Metadata) -> (i64, i64) {
        let d = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
        (d.as_secs() as i64, i64::from(d.subsec_nanos()))
    }
}

pub mod procfs {
    //! No namespaces, cgroups or process working directories to read here.

    pub fn in_other_namespace(_pid: i32, _ns: &str) -> std::io::Result<bool> {
        Ok(false)
    }
    pub fn cgroups_of(_pid: i32) -> Vec<String> {
        Vec::new()
    }
    pub fn working_dirs() -> std::collections::HashSet<std::path::PathBuf> {
        std::collections::HashSet::new()
    }
}

pub mod proc_events {
    //! No process connector here: exclusive programs are found by scanning.

    pub use crate::sys::types::ProcEvent;

    /// Never constructed on this platform.
    #[derive(Debug)]
    pub struct ProcConnector(std::convert::Infallible);

    impl ProcConnector {
        pub fn open() -> std::io::Result<Self> {
            Err(super::unsupported("the process connector"))
        }
        pub fn subscribe(&self, _on: bool) -> std::io::Result<()> {
            match self.0 {}
        }
        pub fn next(&self, _buf: &mut [u8; 1024]) -> std::io::Result<Option<ProcEvent>> {
            match self.0 {}
        }
    }
}

pub mod ipc {
    //! No control channel yet (a named pipe on Windows, a Unix socket with the peer's
    //! credentials on macOS: issue 30): the agent refuses to start, saying so, and the
    //! CLI finds no agent.

    use std::io;
    use std::path::Path;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Never constructed on this platform.
    pub struct Listener(std::convert::Infallible);
    /// Never constructed on this platform.
    pub struct Connection(std::convert::Infallible);
    /// Never constructed on this platform.
    pub struct ClientStream(std::convert::Infallible);

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Peer {
        pub uid: u32,
        pub pid: Option<i32>,
    }

    pub fn bind_owner_only(_path: &Path) -> io::Result<Listener> {
        Err(super::unsupported("the agent's control channel"))
    }
    pub async fn accept(listener: &Listener) -> io::Result<Connection> {
        match listener.0 {}
    }
    pub fn peer(conn: &Connection) -> io::Result<Peer> {
        match conn.0 {}
    }
    pub fn endpoint(path: &Path) -> String {
        path.display().to_string()
    }
    pub fn connect(_path: &Path) -> io::Result<ClientStream> {
        Err(io::Error::new(io::ErrorKind::NotFound, "the agent's control channel is not implemented on this platform yet"))
    }
    pub fn peer_pid(stream: &ClientStream) -> Option<u32> {
        match stream.0 {}
    }

    impl ClientStream {
        pub fn set_read_timeout(&self, _t: Option<std::time::Duration>) -> io::Result<()> {
            match self.0 {}
        }
    }
    impl io::Read for &ClientStream {
        fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
            match self.0 {}
        }
    }
    impl io::Write for ClientStream {
        fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
            match self.0 {}
        }
        fn flush(&mut self) -> io::Result<()> {
            match self.0 {}
        }
    }
    impl tokio::io::AsyncRead for Connection {
        fn poll_read(self: Pin<&mut Self>, _cx: &mut Context<'_>, _buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
            match self.0 {}
        }
    }
    impl tokio::io::AsyncWrite for Connection {
        fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, _buf: &[u8]) -> Poll<io::Result<usize>> {
            match self.0 {}
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.0 {}
        }
        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            match self.0 {}
        }
    }
}
