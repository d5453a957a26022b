//! This process's own TCP sockets, looked at from the test that runs servers in process.

use std::mem::ManuallyDrop;
use std::net::SocketAddr;
use std::os::fd::FromRawFd as _;

/// Whether `TCP_NODELAY` is set, for each TCP socket of this process whose local and peer
/// addresses `wanted` accepts (a connected socket's two ends: a server's accepted socket
/// is found by the client's address as its peer, a client's by the server's).
pub fn nodelay_of(wanted: impl Fn(SocketAddr, SocketAddr) -> bool) -> Vec<bool> {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in fds.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        // SAFETY: the descriptor is only looked at (its addresses and one option) and never
        // closed (`ManuallyDrop`); one that is not a socket, or was closed meanwhile, gives
        // errors, not a match.
        let socket = ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        if let (Ok(local), Ok(peer)) = (socket.local_addr(), socket.peer_addr())
            && wanted(local, peer)
            && let Ok(nodelay) = socket.nodelay()
        {
            found.push(nodelay);
        }
    }
    found
}
