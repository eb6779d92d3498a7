//! A TCP relay between anima and its PostgreSQL server that can cut the database off: every
//! connection through it broken at once (a restart, a failover, a network blip), and, while it
//! is down, new connections refused (nothing listens on its port), as a daemon sees a server
//! that is gone; or every connection frozen, as a lost machine leaves it (`freeze`).
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Relay {
    pub addr: SocketAddr,
    open: Arc<Mutex<Vec<TcpStream>>>,
    /// Asked to be down: the listener is closed (connections refused) until it is up again.
    down: Arc<AtomicBool>,
    /// The listener is open (the accepting thread's word on it).
    listening: Arc<AtomicBool>,
    /// Nothing passes any more, and neither side hears of the other closing (`freeze`).
    frozen: Arc<AtomicBool>,
}

impl Relay {
    /// A relay on a free loopback port to the server at `to`.
    pub fn start(to: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(Mutex::new(Vec::new()));
        let down = Arc::new(AtomicBool::new(false));
        let listening = Arc::new(AtomicBool::new(true));
        let frozen = Arc::new(AtomicBool::new(false));
        let (conns, asked_down, said) = (open.clone(), down.clone(), listening.clone());
        let cold = frozen.clone();
        std::thread::spawn(move || {
            let mut listener = Some(listener);
            loop {
                if asked_down.load(Ordering::SeqCst) {
                    // Closed: a connection now is refused by the system.
                    listener = None;
                    said.store(false, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                let l = match &listener {
                    Some(l) => l,
                    None => match TcpListener::bind(addr) {
                        Ok(l) => {
                            l.set_nonblocking(true).unwrap();
                            said.store(true, Ordering::SeqCst);
                            listener.insert(l)
                        }
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    },
                };
                l.set_nonblocking(true).unwrap();
                let client = match l.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(_) => continue,
                };
                let _ = client.set_nonblocking(false);
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                conns
                    .lock()
                    .unwrap()
                    .extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                for (mut from, mut into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let cold = cold.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            // Frozen: what comes is lost on the way, as on a dead link.
                            if !cold.load(Ordering::SeqCst) && into.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        if !cold.load(Ordering::SeqCst) {
                            let _ = into.shutdown(Shutdown::Both);
                        }
                    });
                }
            }
        });
        Relay {
            addr,
            open,
            down,
            listening,
            frozen,
        }
    }

    /// Every connection through the relay is broken, as a restarting server breaks them.
    pub fn cut_all(&self) {
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// The link goes dead, as when a machine is lost: nothing passes either way any more, and
    /// a side that closes its end is not heard of on the other, whose connection stays open
    /// (the relay holds both ends) until that side gives up on it.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// The database goes away: every connection is broken and new ones are refused until `up`.
    pub fn down(&self) {
        self.down.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.listening.load(Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the relay did not close its port"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        // A connection accepted just before the port closed is among those cut.
        self.cut_all();
    }

    /// The database is back: the relay listens again on the same port.
    pub fn up(&self) {
        self.down.store(false, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.listening.load(Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the relay could not listen on {} again",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A relay to the server of the database at `url`, and `url` through it; `None` when the
/// server is not on TCP.
pub fn to_database(url: &str) -> Option<(Relay, String)> {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        _ => return None,
    };
    let server = format!("{host}:{}", config.get_ports()[0]);
    let to = std::net::ToSocketAddrs::to_socket_addrs(&server)
        .unwrap()
        .next()
        .unwrap();
    let relay = Relay::start(to);
    let through = url.replacen(&server, &relay.addr.to_string(), 1);
    assert_ne!(
        through, url,
        "the relay's address is in the connection string"
    );
    Some((relay, through))
}
