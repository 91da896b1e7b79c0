//! A fake authorization server on 127.0.0.1 for the HTTP flow tests: canned answers by path,
//! and a record of every request.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use url::Url;

/// One request the fake saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
}

impl Seen {
    /// The form body; a parameter given twice fails the test.
    pub(crate) fn form(&self) -> HashMap<String, String> {
        let pairs: Vec<(String, String)> = url::form_urlencoded::parse(self.body.as_bytes()).into_owned().collect();
        let form: HashMap<String, String> = pairs.iter().cloned().collect();
        assert_eq!(form.len(), pairs.len(), "no repeated parameters: {}", self.body);
        form
    }
}

#[derive(Clone, Default)]
pub(crate) struct Fake {
    routes: Arc<Mutex<HashMap<String, (u16, String)>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn handle(State(fake): State<Fake>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let text = |name: header::HeaderName| parts.headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    fake.seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: path.clone(),
        authorization: text(header::AUTHORIZATION),
        content_type: text(header::CONTENT_TYPE),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let routes = fake.routes.lock().unwrap();
    // A route with a query matches exactly; otherwise by path alone.
    match routes.get(&path).or_else(|| routes.get(parts.uri.path())) {
        Some((status, body)) => {
            (StatusCode::from_u16(*status).unwrap(), [(header::CONTENT_TYPE, "application/json")], body.clone())
                .into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// The running fake.
pub(crate) struct Server {
    pub base: String,
    pub fake: Fake,
}

impl Server {
    pub(crate) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let fake = Fake::default();
        let app = Router::new().fallback(handle).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { base, fake }
    }

    pub(crate) fn route(&self, path: &str, status: u16, body: impl Into<String>) {
        self.fake.routes.lock().unwrap().insert(path.to_owned(), (status, body.into()));
    }

    pub(crate) fn json(&self, path: &str, status: u16, body: &Value) {
        self.route(path, status, body.to_string());
    }

    pub(crate) fn url(&self, path: &str) -> Url {
        Url::parse(&format!("{}{path}", self.base)).unwrap()
    }

    pub(crate) fn paths(&self) -> Vec<String> {
        self.fake.seen.lock().unwrap().iter().map(|s| s.path.clone()).collect()
    }

    pub(crate) fn last(&self) -> Seen {
        self.fake.seen.lock().unwrap().last().cloned().unwrap()
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.fake.seen.lock().unwrap().clone()
    }
}
