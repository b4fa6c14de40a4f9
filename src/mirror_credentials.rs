//! The command-line parts of mirror credentials: the upstream's user name
//! and password or token (from a file or an environment variable, never
//! the command line, where `ps` would show it), and the secrets key that
//! seals them in the store ([`gitstow_mirror::secret`]).

use std::path::PathBuf;

use gitstow_mirror::secret::{SealKey, KEY_MISSING};

/// `--username`, `--password-file`, `--password-env`.
#[derive(Debug, Clone, clap::Args)]
pub struct UpstreamLogin {
    /// The user name to send to the upstream (HTTP Basic), with a
    /// password or token from --password-file or --password-env (GitHub
    /// and Gitea take a token with any user name, GitLab with oauth2).
    #[arg(long, value_name = "NAME")]
    pub username: Option<String>,
    /// Read the password or token from FILE (its first line).
    #[arg(
        long,
        value_name = "FILE",
        requires = "username",
        conflicts_with = "password_env"
    )]
    pub password_file: Option<PathBuf>,
    /// Read the password or token from the environment variable VAR.
    #[arg(long, value_name = "VAR", requires = "username")]
    pub password_env: Option<String>,
    /// For an SSH URL (`ssh://git@host/org/app.git`, `git@host:org/app.git`):
    /// the private key to authenticate with (an unencrypted OpenSSH key
    /// file, as `ssh-keygen -N ''` writes it).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["username"])]
    pub ssh_key_file: Option<PathBuf>,
    /// For an SSH URL: the host key the server must show, as `ssh-keygen
    /// -lf` prints it (`SHA256:…`); without it the first one seen is kept
    /// and a later change fails the mirror.
    #[arg(long, value_name = "FINGERPRINT")]
    pub ssh_host_key: Option<String>,
}

impl UpstreamLogin {
    /// `upstream` with the credentials given: HTTP Basic, or an SSH key
    /// and host key.
    ///
    /// # Errors
    /// As [`UpstreamLogin::read`]; an SSH key that does not parse; an SSH
    /// URL without a key.
    pub fn apply(
        &self,
        upstream: gitstow_mirror::Upstream,
    ) -> Result<gitstow_mirror::Upstream, String> {
        let mut upstream = upstream;
        if let Some((user, password)) = self.read()? {
            upstream = upstream.with_basic(&user, &password);
        }
        match self.ssh_key()? {
            Some(pem) => upstream
                .with_ssh_key(&pem, self.ssh_host_key.as_deref())
                .map_err(|e| e.to_string()),
            None if upstream.is_ssh() => Err("an SSH URL needs --ssh-key-file FILE".into()),
            None => Ok(upstream),
        }
    }

    /// Says which host key an SSH upstream showed, when none was pinned
    /// (so that the operator can check it and pin it).
    pub fn tell_host_key(&self, name: &str, upstream: &gitstow_mirror::Upstream) {
        if self.ssh_host_key.is_none() {
            if let Some(key) = upstream.seen_host_key() {
                println!("{name}: the upstream's SSH host key is {key} (--ssh-host-key pins it)");
            }
        }
    }

    /// The SSH private key given (its text), if any.
    ///
    /// # Errors
    /// The file cannot be read (the message holds none of the key).
    pub fn ssh_key(&self) -> Result<Option<String>, String> {
        let Some(path) = &self.ssh_key_file else {
            return Ok(None);
        };
        std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| format!("cannot read --ssh-key-file {}: {e}", path.display()))
    }

    /// The user name and password given, if any.
    ///
    /// # Errors
    /// A user name without a password, or a source that cannot be read
    /// (the message never holds the password).
    pub fn read(&self) -> Result<Option<(String, String)>, String> {
        let Some(user) = &self.username else {
            return Ok(None);
        };
        let password = if let Some(path) = &self.password_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --password-file {}: {e}", path.display()))?;
            text.lines().next().unwrap_or("").to_owned()
        } else if let Some(var) = &self.password_env {
            std::env::var(var).map_err(|_| format!("--password-env: {var} is not set"))?
        } else {
            return Err("--username needs --password-file FILE or --password-env VAR".into());
        };
        if password.is_empty() {
            return Err("the password or token given is empty".into());
        }
        Ok(Some((user.clone(), password)))
    }
}

/// `--webhook-secret-file`, `--webhook-secret-env`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebhookSecretArg {
    /// The secret the upstream's webhook proves itself with (GitHub and
    /// Gitea sign with it, GitLab sends it), from FILE (its first line):
    /// POST /<repo>/mirror/sync with it makes the mirror due at once.
    /// Stored sealed with the secrets key.
    #[arg(long, value_name = "FILE", conflicts_with = "webhook_secret_env")]
    pub webhook_secret_file: Option<PathBuf>,
    /// The same, from the environment variable VAR.
    #[arg(long, value_name = "VAR")]
    pub webhook_secret_env: Option<String>,
}

impl WebhookSecretArg {
    /// The secret given, if any.
    ///
    /// # Errors
    /// A source that cannot be read, or an empty secret.
    pub fn read(&self) -> Result<Option<String>, String> {
        let secret = if let Some(path) = &self.webhook_secret_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                format!("cannot read --webhook-secret-file {}: {e}", path.display())
            })?;
            text.lines().next().unwrap_or("").to_owned()
        } else if let Some(var) = &self.webhook_secret_env {
            std::env::var(var).map_err(|_| format!("--webhook-secret-env: {var} is not set"))?
        } else {
            return Ok(None);
        };
        if secret.is_empty() {
            return Err("the webhook secret given is empty".into());
        }
        Ok(Some(secret))
    }
}

/// `--secrets-key-file`.
#[derive(Debug, Clone, clap::Args)]
pub struct SecretsKeyArg {
    /// The key that seals mirror credentials in the store: a file holding
    /// 64 hex digits (`openssl rand -hex 32`); default: the environment
    /// variable GITSTOW_SECRETS_KEY. Keep it out of the bucket: whoever
    /// reads the bucket must not read the credentials.
    #[arg(long, value_name = "FILE")]
    pub secrets_key_file: Option<PathBuf>,
}

impl SecretsKeyArg {
    /// The key given, if any.
    ///
    /// # Errors
    /// The file cannot be read or holds no key.
    pub fn load(&self) -> Result<Option<SealKey>, String> {
        SealKey::load(self.secrets_key_file.as_deref())
    }

    /// The key, which must be given.
    ///
    /// # Errors
    /// As [`SecretsKeyArg::load`], or none given ([`KEY_MISSING`]).
    pub fn require(&self) -> Result<SealKey, String> {
        self.load()?.ok_or_else(|| KEY_MISSING.to_owned())
    }
}
