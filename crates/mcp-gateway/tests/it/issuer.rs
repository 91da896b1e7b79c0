//! A JWT issuer of the tests' own: P-256 keys, a JWKS document served on loopback, tokens
//! signed with any key. Shared by the gateway's tests and `mcp-harness serve`'s end-to-end
//! tests (crates/cli/tests/serve_gateway.rs includes this file by path), so both check the
//! same tokens.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

/// The issuer every test's tokens name.
pub const ISSUER: &str = "https://idp.example.com";

/// An issuer: a P-256 key (`kid` "k1"), its JWKS served on loopback, and tokens it signs.
pub struct Issuer {
    pub key: EcdsaKeyPair,
    pub pkcs8: Vec<u8>,
    pub jwks_url: String,
}

impl Issuer {
    pub async fn start() -> Issuer {
        let (key, pkcs8) = p256();
        let jwks_url = serve_jwks(Arc::new(std::sync::Mutex::new(jwks_of(&key, "k1")))).await;
        Issuer { key, pkcs8, jwks_url }
    }

    /// A token of subject "carol" for `aud`, expiring `exp_in` seconds from now (negative: in
    /// the past).
    pub fn token(&self, aud: &str, exp_in: i64) -> String {
        sign(&self.pkcs8, aud, exp_in)
    }

    /// A token of subject `sub` for `aud`, expiring `exp_in` seconds from now.
    pub fn token_for(&self, sub: &str, aud: &str, exp_in: i64) -> String {
        sign_for(&self.pkcs8, "k1", sub, aud, exp_in)
    }
}

pub fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A fresh P-256 key and its PKCS#8 document.
pub fn p256() -> (EcdsaKeyPair, Vec<u8>) {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).unwrap();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
    (key, pkcs8.as_ref().to_vec())
}

/// Serves the JWKS document `jwks` holds (the test changes it to rotate keys) on loopback;
/// its URL.
pub async fn serve_jwks(jwks: Arc<std::sync::Mutex<String>>) -> String {
    serve_jwks_stalling(jwks, Arc::default()).await
}

/// An issuer's switch: while `stall` is set its answers wait; `answered` counts them.
#[derive(Default)]
pub struct Stall {
    pub stall: AtomicBool,
    pub answered: std::sync::atomic::AtomicUsize,
}

/// [`serve_jwks`], holding each answer while `stall` says so (an issuer that has become slow).
pub async fn serve_jwks_stalling(jwks: Arc<std::sync::Mutex<String>>, stall: Arc<Stall>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let jwks_url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (jwks, stall) = (Arc::clone(&jwks), Arc::clone(&stall));
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_request| {
                    let (jwks, stall) = (Arc::clone(&jwks), Arc::clone(&stall));
                    async move {
                        while stall.stall.load(Ordering::Relaxed) {
                            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        }
                        let document = jwks.lock().unwrap().clone();
                        stall.answered.fetch_add(1, Ordering::Relaxed);
                        let mut response = hyper::Response::new(Full::new(Bytes::from(document)));
                        response.headers_mut().insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    jwks_url
}

/// A JWKS document with one P-256 key, `kid`.
pub fn jwks_of(key: &EcdsaKeyPair, kid: &str) -> String {
    let point = key.public_key().as_ref().to_vec();
    json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
        "x": b64(&point[1..33]), "y": b64(&point[33..65])}]})
    .to_string()
}

/// A token of subject "carol" signed with `pkcs8` under `kid` "k1".
pub fn sign(pkcs8: &[u8], aud: &str, exp_in: i64) -> String {
    sign_as(pkcs8, "k1", aud, exp_in)
}

/// A token of subject "carol" signed with `pkcs8` under `kid`.
pub fn sign_as(pkcs8: &[u8], kid: &str, aud: &str, exp_in: i64) -> String {
    sign_for(pkcs8, kid, "carol", aud, exp_in)
}

/// A token of subject `sub` from [`ISSUER`] for `aud`, signed with `pkcs8` under `kid`.
pub fn sign_for(pkcs8: &[u8], kid: &str, sub: &str, aud: &str, exp_in: i64) -> String {
    let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()).unwrap();
    let claims = json!({"iss": ISSUER, "sub": sub, "aud": aud, "iat": now, "exp": now + exp_in});
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_ec_der(pkcs8)).unwrap()
}
