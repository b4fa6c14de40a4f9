//! One fault taxonomy at the service boundary: what a transport may tell a
//! client when a git command fails, whatever the engine. A [`Fault`] is the
//! client's (a request that broke the protocol or a limit, with the words
//! to say) or the server's ([`ServerFault`]: out of space, a store that
//! does not answer, anything else, one text each). The error and its chain
//! go to the log where the fault is made; a transport renders the fault in
//! its own words (HTTP: 400, 503 with `Retry-After`, 500; SSH: `fatal:`).

pub use gitstow_store::ServerFault;

/// Why a git command failed, as a client may be told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The request broke the protocol or a limit: the words to say.
    BadRequest(String),
    /// A failure of the server's.
    Server(ServerFault),
}

impl Fault {
    /// A server-side `error` while `context`: the error and its chain go to
    /// the log, the fault names neither.
    pub fn server(context: &str, error: &(dyn std::error::Error + 'static)) -> Fault {
        tracing::error!(error = %error, "{context} failed");
        Fault::Server(ServerFault::of(error))
    }

    /// The fault of a receive-pack error (logged by the caller): a
    /// malformed request is the client's, anything else the server's.
    pub fn of_push(e: &gitstow_receive::Error) -> Fault {
        match e {
            gitstow_receive::Error::Protocol(why) => Fault::BadRequest(why.clone()),
            other => Fault::Server(ServerFault::of(other)),
        }
    }

    /// The fault of an upload-pack error (logged by the caller): a bad
    /// request or a want the repository does not have is the client's
    /// ([`gitstow_upload::Error::is_clients`]); a walk that cannot read an
    /// object, or finds one corrupt, is the server's.
    pub fn of_fetch(e: &gitstow_upload::Error) -> Fault {
        if e.is_clients() {
            Fault::BadRequest(e.to_string())
        } else {
            Fault::Server(ServerFault::of(e))
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::BadRequest(why) => f.write_str(why),
            Fault::Server(s) => f.write_str(s.text()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_is_told_its_own_fault_and_nothing_of_the_server() {
        let bad = gitstow_receive::Error::Protocol("bad pkt-line".into());
        assert_eq!(Fault::of_push(&bad).to_string(), "bad pkt-line");
        let io = gitstow_receive::Error::Io(std::io::Error::other(
            "/var/lib/gitstow/tmp/spool-1: permission denied",
        ));
        let f = Fault::of_push(&io);
        assert_eq!(f, Fault::Server(ServerFault::Internal));
        assert_eq!(f.to_string(), "internal server error, try again later");
        let full = gitstow_upload::Error::Io(std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert_eq!(
            Fault::of_fetch(&full),
            Fault::Server(ServerFault::OutOfSpace)
        );
    }
}
