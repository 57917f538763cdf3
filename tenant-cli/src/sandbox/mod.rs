//! The compact service run in-process as a tenant's sandbox (`svc-cli sandbox`, and the
//! service behind `svc-cli demo`): a real v1 API on loopback, with its own SQLite database, that
//! sends real signed webhooks and can inject faults ([`svc_service::sandbox::Faults`]).
//!
//! On first start it creates one tenant and writes its credentials beside the database, in
//! `<db>.credentials.json` (mode 0600: it holds the API key and the signing secret); later
//! starts on the same database read them back, so the key an integration was given keeps
//! working. Being local, the sandbox delivers webhooks to `http://` and private addresses.
//!
//! While it runs it holds a lock on `<db>.running` (left in place after it stops), so that an
//! operator step that needs the running sandbox (`sandbox resend`) can tell whether one runs
//! ([`is_running`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use svc_service::sandbox::{Config, Faults, InForce, SandboxDb};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use svc_client::{ApiKey, Client, RetryPolicy};

/// The sandbox tenant's name.
const TENANT_NAME: &str = "Sandbox tenant";

/// What a sandbox starts with.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The service's database (created when missing).
    pub db: PathBuf,
    /// Where the API listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Faults to set on the tenant (`None`: leave them as they are; none on first start).
    pub faults: Option<Faults>,
    /// The tenant's webhook URL (`None`: leave it as it is; none on first start).
    pub webhook_url: Option<String>,
    /// Delay before a failed delivery's single retry.
    pub webhook_retry_delay: Duration,
}

impl SandboxOptions {
    /// Defaults for a database at `db`: `127.0.0.1:8787`, the contract's 5-minute retry.
    pub fn new(db: impl Into<PathBuf>) -> Self {
        Self {
            db: db.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            faults: None,
            webhook_url: None,
            webhook_retry_delay: Duration::from_secs(300),
        }
    }
}

/// The sandbox tenant's credentials, as `<db>.credentials.json` holds them. `Debug` shows
/// neither the key nor the secret.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Credentials {
    /// The tenant's id (`ten_…`).
    pub tenant_id: String,
    /// Its API key (`svc_live_…`).
    pub api_key: String,
    /// Its webhook signing secret (`whsec_…`).
    pub signing_secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("tenant_id", &self.tenant_id)
            .field("api_key", &"[redacted]")
            .field("signing_secret", &"[redacted]")
            .finish()
    }
}

/// A running sandbox. Stop it with [`Sandbox::stop`]; dropping it stops the server too.
#[derive(Debug)]
pub struct Sandbox {
    /// The API's base URL (`http://127.0.0.1:<port>/v1`).
    pub base_url: String,
    /// The tenant's credentials.
    pub credentials: Credentials,
    /// Whether this start created the tenant (first start on this database).
    pub created: bool,
    /// The faults and webhook URL in force: this start's options, or what the last start
    /// left where an option was not given.
    pub in_force: InForce,
    /// The service's database, for the operator-side steps of the demo.
    pub db: SandboxDb,
    /// The service's configuration.
    pub config: Config,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
    /// The lock on `<db>.running`, held while the sandbox runs (`None` when another sandbox on
    /// the same database holds it).
    _running: Option<std::fs::File>,
}

/// The file a running sandbox at `db` keeps locked.
fn running_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".running");
    PathBuf::from(name)
}

/// Takes the lock that says a sandbox runs on `db`: `None` when another process holds it.
fn lock_running(db: &Path) -> anyhow::Result<Option<std::fs::File>> {
    let path = running_path(db);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Whether a sandbox runs on the database at `db` (in this process or another).
///
/// # Errors
/// The lock file exists but cannot be opened or locked.
pub fn is_running(db: &Path) -> anyhow::Result<bool> {
    let path = running_path(db);
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(error).with_context(|| format!("opening {}", path.display())),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(std::fs::TryLockError::WouldBlock) => Ok(true),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Where the credentials of the sandbox at `db` are kept.
pub fn credentials_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".credentials.json");
    PathBuf::from(name)
}

/// The credentials of the sandbox at `db`, from the file beside it.
///
/// # Errors
/// No credentials file (the database was not made by `svc-cli sandbox`), or one that does not
/// read.
pub fn read_credentials(db: &Path) -> anyhow::Result<Credentials> {
    let path = credentials_path(db);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (a database made by `svc-cli sandbox` has it beside it)",
            path.display()
        )
    })?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a sandbox credentials file", path.display()))
}

/// The address a client on this machine reaches the API at: loopback when the sandbox listens
/// on every interface (`0.0.0.0`, `::`), since `svc-cli` sends a key over plain HTTP to a
/// loopback host only (without `--insecure-http`).
pub(crate) fn reachable(address: SocketAddr) -> SocketAddr {
    let ip = match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, address.port())
}

impl Sandbox {
    /// Opens (or creates) the database and its tenant, applies `options`, and starts serving.
    ///
    /// # Errors
    /// The address is taken, the database cannot be opened, or it exists without the
    /// credentials file a sandbox writes (it was not made by `svc-cli sandbox`).
    pub async fn start(options: SandboxOptions) -> anyhow::Result<Sandbox> {
        let listener = TcpListener::bind(options.listen)
            .await
            .with_context(|| format!("cannot listen on {}", options.listen))?;
        let address = listener.local_addr().context("reading the bound address")?;
        let mut config = Config::new(&options.db);
        config.listen = address;
        config.allow_http_webhooks = true;
        config.allow_private_webhooks = true;
        config.webhook_retry_delay_secs = options.webhook_retry_delay.as_secs().max(1);

        let db = SandboxDb::open(&options.db)
            .await
            .with_context(|| format!("opening the sandbox database {}", options.db.display()))?;
        let (credentials, created) = tenant(&db, &options).await?;
        let running = lock_running(&options.db)?;
        if let Some(faults) = options.faults {
            db.set_faults(&credentials.tenant_id, faults).await?;
        }
        if let Some(url) = &options.webhook_url {
            let url = (!url.trim().is_empty()).then(|| url.trim().to_owned());
            db.set_webhook_url(&credentials.tenant_id, url).await?;
        }
        let in_force = db.in_force(&credentials.tenant_id).await?;

        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(svc_service::run(config.clone(), listener, async move {
            let _ = stopped.await;
        }));
        Ok(Sandbox {
            base_url: format!("http://{}/v1", reachable(address)),
            credentials,
            created,
            in_force,
            db,
            config,
            stop: Some(stop),
            server,
            _running: running,
        })
    }

    /// A client of the sandbox's API with the tenant's key (no retry waits longer than 2 s).
    /// Plain HTTP is allowed even when the sandbox listens on an address that is not loopback:
    /// the address is this machine's own.
    ///
    /// # Errors
    /// Never in practice (the base URL is the sandbox's own).
    pub fn client(&self) -> anyhow::Result<Client> {
        let retry = RetryPolicy {
            max_retry_after: Duration::from_secs(2),
            ..RetryPolicy::default()
        };
        Ok(Client::builder(&self.base_url)
            .allow_insecure_http(true)
            .api_key(ApiKey::new(&self.credentials.api_key))
            .retry(retry)
            .build()?)
    }

    /// The lines that point an integration at the sandbox.
    pub fn exports(&self) -> String {
        format!(
            "export SVC_BASE_URL={}\nexport SVC_API_KEY={}\nexport SVC_SIGNING_SECRET={}\n",
            self.base_url, self.credentials.api_key, self.credentials.signing_secret
        )
    }

    /// Stops the server (requests in flight are answered) and its workers.
    ///
    /// # Errors
    /// The server failed while running.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.server)
            .await
            .context("the sandbox server panicked")?
    }

    /// Waits for the server to end by itself (it fails), for `sandbox`'s foreground run.
    ///
    /// # Errors
    /// Why the server ended.
    pub async fn wait_failed(&mut self) -> anyhow::Result<()> {
        (&mut self.server)
            .await
            .context("the sandbox server panicked")??;
        bail!("the sandbox server stopped")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The tenant of the sandbox at `options.db`: read back from its credentials file, or created
/// (with the options' faults and webhook URL) when the database has no tenant yet.
async fn tenant(db: &SandboxDb, options: &SandboxOptions) -> anyhow::Result<(Credentials, bool)> {
    let path = credentials_path(&options.db);
    if path.exists() {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let credentials: Credentials = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a sandbox credentials file", path.display()))?;
        if !db.holds_tenant(&credentials.tenant_id).await? {
            bail!(
                "{} names tenant {}, which {} does not hold; remove both files to start afresh",
                path.display(),
                credentials.tenant_id,
                options.db.display()
            );
        }
        return Ok((credentials, false));
    }
    if db.has_tenants().await? {
        bail!(
            "{} already holds tenants but has no {}: it was not made by `svc-cli sandbox`; \
             pass another --db",
            options.db.display(),
            path.display()
        );
    }
    let created = db
        .create_tenant(
            TENANT_NAME,
            options.webhook_url.clone(),
            options.faults.unwrap_or_default(),
        )
        .await?;
    let credentials = Credentials {
        tenant_id: created.tenant_id,
        api_key: created.api_key.expose().to_owned(),
        signing_secret: created.signing_secret.expose().to_owned(),
    };
    write_private(&path, &serde_json::to_string_pretty(&credentials)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok((credentials, true))
}

/// Writes `text` to a new file only its owner can read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let mut file = open.open(path)?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}
