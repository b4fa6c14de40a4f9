//! A small HTTP receiver for what the server sends out (pre-receive
//! callouts, webhooks): it records every request and answers as its
//! [`Answer`] says, which a test changes while it runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the receiver answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// This status and body.
    Status(u16, String),
    /// Never (holds the connection for two minutes).
    Hang,
    /// `302 Found` to this location (for a POST; a GET gets 200 and a
    /// login page, as behind an SSO proxy).
    Redirect(String),
}

/// One request received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Lower-case header names with their values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// The status it was answered with (`None`: not answered).
    pub answered: Option<u16>,
}

impl Received {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A receiver on a free loopback port; stops accepting when dropped.
pub struct Receiver {
    port: u16,
    answer: Arc<Mutex<Answer>>,
    received: Arc<Mutex<Vec<Received>>>,
    open: Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    /// Starts a receiver answering `answer`.
    pub fn start(answer: Answer) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(Mutex::new(answer));
        let received = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        {
            let (answer, received, open) = (answer.clone(), received.clone(), open.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if !open.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (answer, received) = (answer.clone(), received.clone());
                    std::thread::spawn(move || serve(conn, &answer, &received));
                }
            });
        }
        Receiver {
            port,
            answer,
            received,
            open,
        }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Answers `answer` from now on.
    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// Everything received so far.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// Waits until `pred` holds for what was received (or panics after `timeout`).
    pub fn wait_until(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.received();
            if pred(&got) {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "receiver: {what} not seen within {timeout:?}; got {} requests: {:?}",
                got.len(),
                got.iter().map(|r| r.answered).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.open.store(false, std::sync::atomic::Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, answer: &Mutex<Answer>, received: &Mutex<Vec<Received>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(conn.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let is_get = line.starts_with("GET ");
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut answer = answer.lock().unwrap().clone();
    if is_get && matches!(answer, Answer::Redirect(_)) {
        // Where the redirect leads: a page that says 200.
        answer = Answer::Status(200, "<html>please log in</html>".into());
    }
    let index = {
        let mut r = received.lock().unwrap();
        r.push(Received {
            headers,
            body,
            answered: None,
        });
        r.len() - 1
    };
    match answer {
        Answer::Hang => std::thread::sleep(Duration::from_secs(120)),
        Answer::Redirect(location) => {
            let mut conn = conn;
            let _ = write!(
                conn,
                "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            let _ = conn.flush();
            received.lock().unwrap()[index].answered = Some(302);
        }
        Answer::Status(status, text) => {
            let mut conn = conn;
            let _ = write!(
                conn,
                "HTTP/1.1 {status} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            let _ = conn.flush();
            received.lock().unwrap()[index].answered = Some(status);
        }
    }
}
