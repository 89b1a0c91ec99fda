//! The signals that ask a foreground process to stop.

/// Resolves on the first SIGINT, SIGTERM or SIGHUP (a closed terminal). The handlers are
/// installed by this call, not when the future is first polled. Must be called inside a
/// tokio runtime.
pub fn stop_requested() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, Signal, SignalKind};
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async fn recv(s: &mut Option<Signal>) {
        match s {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    async move {
        tokio::select! {
            _ = recv(&mut int) => {}
            _ = recv(&mut term) => {}
            _ = recv(&mut hup) => {}
        }
    }
}
