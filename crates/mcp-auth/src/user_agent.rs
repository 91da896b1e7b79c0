//! Who takes the user to the authorization server and brings the code back: a port with two
//! adapters.
//!
//! - [`LoopbackBrowser`]: for people. Listens on `127.0.0.1` (RFC 8252 §7.3) for the redirect,
//!   shows the authorization URL and tries to open a browser on it.
//! - [`FollowRedirects`]: for automated clients whose authorization server approves at once
//!   (the conformance harness): requests the authorization URL itself and reads the redirect.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_safety::Secret;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use url::Url;

/// What came back on the redirect URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirected {
    /// The authorization code, when the user approved.
    pub code: Option<Secret>,
    /// The `state` the authorization server echoed.
    pub state: Option<String>,
    /// The `error` when the user or the server refused (RFC 6749 §4.1.2.1).
    pub error: Option<String>,
    /// The `error_description`, if any.
    pub error_description: Option<String>,
}

impl Redirected {
    /// The parameters of a redirect URL's query.
    pub fn from_url(url: &Url) -> Self {
        let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
        Self {
            code: param("code").map(Secret::new),
            state: param("state"),
            error: param("error"),
            error_description: param("error_description"),
        }
    }
}

/// Why the user agent could not complete the authorization.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UserAgentError {
    /// The loopback listener could not be started.
    #[error("could not listen for the authorization redirect on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    /// Nobody came back in time.
    #[error("no authorization redirect within {0:?}: open the URL shown above and approve the access")]
    TimedOut(Duration),
    /// Requesting the authorization URL failed (for [`FollowRedirects`]).
    #[error("requesting the authorization URL failed: {0}")]
    Http(String),
    /// The authorization server did not redirect to the redirect URI.
    #[error("the authorization server did not redirect back: {0}")]
    NoRedirect(String),
}

/// A user agent taking the user to an authorization URL.
#[async_trait]
pub trait UserAgent: Send + Sync {
    /// Gets ready to receive the redirect (a loopback listener binds its port here, so the
    /// redirect URI is known before the client registers it).
    async fn prepare(&self) -> Result<Box<dyn PendingRedirect>, UserAgentError>;
}

/// A prepared user agent waiting for one authorization.
#[async_trait]
pub trait PendingRedirect: Send {
    /// The redirect URI to register and to send in the authorization request.
    fn redirect_uri(&self) -> &str;

    /// Takes the user to `authorization_url` and waits for the redirect back carrying
    /// `state` (a redirect with another state is not ours: a listener ignores it).
    async fn complete(self: Box<Self>, authorization_url: &Url, state: &str) -> Result<Redirected, UserAgentError>;
}

/// How [`LoopbackBrowser`] shows the authorization URL (a CLI prints it to stderr).
pub type ShowUrl = Arc<dyn Fn(&Url) + Send + Sync>;

/// Listens on `127.0.0.1:<any port>/callback`, shows the URL, tries to open a browser, and waits
/// at most `timeout` for the redirect.
#[derive(Clone)]
pub struct LoopbackBrowser {
    /// Shows the URL to the user.
    pub show: ShowUrl,
    /// Try to open the system browser (`xdg-open` / `open`); the URL is shown either way.
    pub open_browser: bool,
    /// How long to wait for the user.
    pub timeout: Duration,
}

impl std::fmt::Debug for LoopbackBrowser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackBrowser")
            .field("open_browser", &self.open_browser)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The largest request line + headers read from the browser.
const MAX_CALLBACK_REQUEST: usize = 16 * 1024;

struct LoopbackPending {
    listener: TcpListener,
    redirect_uri: String,
    browser: LoopbackBrowser,
}

#[async_trait]
impl UserAgent for LoopbackBrowser {
    async fn prepare(&self) -> Result<Box<dyn PendingRedirect>, UserAgentError> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.map_err(UserAgentError::Listen)?;
        let port = listener.local_addr().map_err(UserAgentError::Listen)?.port();
        Ok(Box::new(LoopbackPending {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            browser: self.clone(),
        }))
    }
}

#[async_trait]
impl PendingRedirect for LoopbackPending {
    fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    async fn complete(self: Box<Self>, authorization_url: &Url, state: &str) -> Result<Redirected, UserAgentError> {
        (self.browser.show)(authorization_url);
        if self.browser.open_browser {
            let _ = open_in_browser(authorization_url);
        }
        let timeout = self.browser.timeout;
        tokio::time::timeout(timeout, accept_callback(&self.listener, state))
            .await
            .map_err(|_| UserAgentError::TimedOut(timeout))
    }
}

/// Serves connections until one is a GET of `/callback` carrying a code or an error and our
/// `state`; anything else (another local program, a stale tab) gets an error page. Each
/// connection is served on its own (at most [`MAX_CALLBACK_CONNECTIONS`] at once): one that
/// stalls does not hold up the browser's. When that many are open the oldest is dropped for
/// the newest: a browser sends its request as soon as it connects, so a local program holding
/// idle connections cannot keep it out.
async fn accept_callback(listener: &TcpListener, state: &str) -> Redirected {
    let state: Arc<str> = Arc::from(state);
    let mut serving = tokio::task::JoinSet::new();
    let mut open = std::collections::VecDeque::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    open.retain(|served: &tokio::task::AbortHandle| !served.is_finished());
                    if open.len() >= MAX_CALLBACK_CONNECTIONS
                        && let Some(oldest) = open.pop_front()
                    {
                        oldest.abort();
                    }
                    open.push_back(serving.spawn(serve_callback(stream, Arc::clone(&state))));
                }
                // Out of file descriptors and the like: do not spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            Some(served) = serving.join_next(), if !serving.is_empty() => {
                if let Ok(Some(redirected)) = served {
                    return redirected;
                }
            }
        }
    }
}

/// Connections to the callback listener served at once.
const MAX_CALLBACK_CONNECTIONS: usize = 16;

/// One connection to the callback listener: its redirect when it is the one awaited.
async fn serve_callback(mut stream: tokio::net::TcpStream, state: Arc<str>) -> Option<Redirected> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    // A stalled connection ends after a while.
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_CALLBACK_REQUEST {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    read.ok()?;
    let text = String::from_utf8_lossy(&buf);
    let target = text.lines().next().and_then(|l| l.strip_prefix("GET ")).and_then(|l| l.split(' ').next());
    let redirected = target
        .and_then(|t| Url::parse(&format!("http://127.0.0.1{t}")).ok())
        .filter(|u| u.path() == "/callback")
        .map(|u| Redirected::from_url(&u))
        .filter(|r| r.code.is_some() || r.error.is_some())
        .filter(|r| r.state.as_deref() == Some(&*state));
    let (status, body) = match &redirected {
        Some(r) if r.error.is_none() => ("200 OK", "Logged in. You can close this tab and return to the terminal.\n"),
        Some(_) => ("200 OK", "The authorization was refused. You can close this tab.\n"),
        None => ("400 Bad Request", "Not the authorization callback this login waits for.\n"),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
    redirected
}

/// Opens `url` in the system browser (`xdg-open`, `open` on macOS); whether the opener started.
/// Best effort: a missing opener only means the user opens the URL by hand, so show it too.
pub fn open_in_browser(url: &Url) -> bool {
    let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
    let spawned = std::process::Command::new(opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            // Reap it in the background so it does not linger as a zombie.
            std::thread::spawn(move || child.wait());
            true
        }
        Err(_) => false,
    }
}

/// Requests the authorization URL itself and reads the redirect to `redirect_uri` (never
/// contacted): for authorization servers that approve without a person, as the conformance
/// harness's does.
#[derive(Debug, Clone)]
pub struct FollowRedirects {
    /// The redirect URI to register and use.
    pub redirect_uri: String,
    /// How many redirects inside the authorization server are followed.
    pub max_redirects: usize,
}

impl Default for FollowRedirects {
    fn default() -> Self {
        Self { redirect_uri: "http://127.0.0.1/callback".to_owned(), max_redirects: 5 }
    }
}

struct FollowPending {
    redirect_uri: String,
    max_redirects: usize,
}

#[async_trait]
impl UserAgent for FollowRedirects {
    async fn prepare(&self) -> Result<Box<dyn PendingRedirect>, UserAgentError> {
        Ok(Box::new(FollowPending { redirect_uri: self.redirect_uri.clone(), max_redirects: self.max_redirects }))
    }
}

#[async_trait]
impl PendingRedirect for FollowPending {
    fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    async fn complete(self: Box<Self>, authorization_url: &Url, _state: &str) -> Result<Redirected, UserAgentError> {
        // The caller checks the state of what comes back.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| UserAgentError::Http(e.to_string()))?;
        let target = Url::parse(&self.redirect_uri).map_err(|e| UserAgentError::NoRedirect(e.to_string()))?;
        let mut url = authorization_url.clone();
        for _ in 0..=self.max_redirects {
            let resp = http.get(url.clone()).send().await.map_err(|e| UserAgentError::Http(e.to_string()))?;
            let status = resp.status();
            let location = resp.headers().get(reqwest::header::LOCATION).and_then(|v| v.to_str().ok());
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                return Err(UserAgentError::NoRedirect(format!("{url} answered HTTP {status}")));
            };
            let next = url.join(location).map_err(|e| UserAgentError::NoRedirect(format!("{location:?}: {e}")))?;
            if next.origin() == target.origin() && next.path() == target.path() {
                return Ok(Redirected::from_url(&next));
            }
            url = next;
        }
        Err(UserAgentError::NoRedirect(format!("more than {} redirects", self.max_redirects)))
    }
}
