//! The loopback listener of `LoopbackBrowser`: only the redirect with our state ends the wait.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_auth::{LoopbackBrowser, UserAgent, UserAgentError};
use url::Url;

fn browser(shown: Arc<Mutex<Vec<String>>>, timeout: Duration) -> LoopbackBrowser {
    LoopbackBrowser {
        show: Arc::new(move |url: &Url| shown.lock().unwrap().push(url.to_string())),
        open_browser: false,
        timeout,
    }
}

#[tokio::test]
async fn only_the_redirect_with_our_state_is_taken() {
    let shown = Arc::new(Mutex::new(Vec::new()));
    let pending = browser(shown.clone(), Duration::from_secs(10)).prepare().await.unwrap();
    let redirect = pending.redirect_uri().to_owned();
    assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"), "{redirect}");
    let auth_url = Url::parse("https://as.example/authorize?x=1").unwrap();
    let waiting = tokio::spawn(async move { pending.complete(&auth_url, "good-state").await });

    let http = reqwest::Client::new();
    // Another program, a stale tab, a wrong path: answered, ignored.
    for (query, status) in [
        ("?code=evil&state=other", 400),
        ("?error=access_denied&error_description=%1b%5b31mgo+away", 400),
        ("?code=x&state=good-state", 404),
    ] {
        let url = if status == 404 { redirect.replace("/callback", "/elsewhere") } else { redirect.clone() };
        let resp = http.get(format!("{url}{query}")).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), if status == 404 { 400 } else { status }, "{query}");
    }
    let resp = http.get(format!("{redirect}?code=the-code&state=good-state")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.text().await.unwrap().contains("Logged in"));
    let back = waiting.await.unwrap().unwrap();
    assert_eq!(
        (back.code.as_ref().map(mcp_safety::Secret::expose), back.state.as_deref()),
        (Some("the-code"), Some("good-state"))
    );
    assert_eq!(shown.lock().unwrap().as_slice(), ["https://as.example/authorize?x=1"]);
}

#[tokio::test]
async fn nobody_coming_back_times_out_with_a_clear_error() {
    let pending = browser(Arc::default(), Duration::from_millis(200)).prepare().await.unwrap();
    let err = pending.complete(&Url::parse("https://as.example/a").unwrap(), "s").await.unwrap_err();
    assert!(matches!(err, UserAgentError::TimedOut(_)), "{err}");
    assert!(err.to_string().contains("open the URL"), "{err}");
}

#[tokio::test]
async fn garbage_on_the_listener_does_not_end_the_wait() {
    use tokio::io::AsyncWriteExt as _;
    let pending = browser(Arc::default(), Duration::from_secs(10)).prepare().await.unwrap();
    let redirect = Url::parse(pending.redirect_uri()).unwrap();
    let addr = format!("127.0.0.1:{}", redirect.port().unwrap());
    let waiting =
        tokio::spawn(async move { pending.complete(&Url::parse("https://as.example/a").unwrap(), "s").await });
    for junk in [&b"\x00\xff\xfe garbage\r\n\r\n"[..], &[b'A'; 40_000][..], b"GET /callback?code=1"] {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let _ = stream.write_all(junk).await;
        drop(stream);
    }
    let resp = reqwest::get(format!("{redirect}?code=ok&state=s")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(waiting.await.unwrap().unwrap().code.as_ref().map(mcp_safety::Secret::expose), Some("ok"));
}

/// A connection that stalls (another local program) does not hold up the browser's: each is
/// served on its own (the real callback waited 10 s behind each stalled one), and more of them
/// than are served at once push out the oldest, not the browser's (it was closed unanswered).
#[tokio::test]
async fn a_stalled_connection_does_not_hold_up_the_callback() {
    let pending = browser(Arc::default(), Duration::from_secs(30)).prepare().await.unwrap();
    let redirect = Url::parse(pending.redirect_uri()).unwrap();
    let addr = format!("127.0.0.1:{}", redirect.port().unwrap());
    let waiting =
        tokio::spawn(async move { pending.complete(&Url::parse("https://as.example/a").unwrap(), "s").await });
    let mut stalled = Vec::new();
    for _ in 0..40 {
        stalled.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    let started = std::time::Instant::now();
    let resp = reqwest::get(format!("{redirect}?code=ok&state=s")).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(waiting.await.unwrap().unwrap().code.as_ref().map(mcp_safety::Secret::expose), Some("ok"));
    assert!(started.elapsed() < Duration::from_secs(5), "held up for {:?}", started.elapsed());
    drop(stalled);
}
