//! PKCE with the S256 method (RFC 7636), the only method MCP clients use.
//!
//! A code verifier is 43 to 128 characters from the unreserved set
//! `[A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~"`; its challenge is
//! `BASE64URL-NOPAD(SHA-256(ASCII(verifier)))`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_safety::Secret;
use rand::{CryptoRng, RngExt as _};
use sha2::{Digest as _, Sha256};

/// The unreserved characters a verifier is made of (RFC 7636 §4.1).
pub const UNRESERVED: &[u8; 66] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~";
/// Shortest verifier allowed.
pub const MIN_VERIFIER_LEN: usize = 43;
/// Longest verifier allowed.
pub const MAX_VERIFIER_LEN: usize = 128;
/// Length of generated verifiers: 64 characters, about 386 bits of entropy.
pub const DEFAULT_VERIFIER_LEN: usize = 64;
/// The `code_challenge_method` value.
pub const METHOD_S256: &str = "S256";

/// A verifier that breaks the RFC 7636 grammar, or a length outside 43..=128.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PkceError {
    /// Length outside 43..=128.
    #[error("a PKCE code verifier must be 43 to 128 characters long, not {len}")]
    BadLength {
        /// The refused length.
        len: usize,
    },
    /// A character outside the unreserved set.
    #[error("a PKCE code verifier may only contain A-Z a-z 0-9 - . _ ~ (bad character at byte {position})")]
    BadCharacter {
        /// Byte offset of the first bad character.
        position: usize,
    },
}

/// A PKCE S256 pair. `Debug` does not show the verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pkce {
    verifier: Secret,
    challenge: String,
}

impl Pkce {
    /// A fresh pair with a [`DEFAULT_VERIFIER_LEN`]-character verifier from the thread-local
    /// cryptographically secure RNG.
    pub fn generate() -> Self {
        Self::from_rng(&mut rand::rng())
    }

    /// A fresh pair with a [`DEFAULT_VERIFIER_LEN`]-character verifier drawn from `rng`.
    pub fn from_rng<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let verifier = random_verifier(rng, DEFAULT_VERIFIER_LEN);
        Self::from_valid_verifier(verifier)
    }

    /// A fresh pair with a verifier of `len` characters drawn from `rng`.
    pub fn from_rng_with_len<R: CryptoRng + ?Sized>(rng: &mut R, len: usize) -> Result<Self, PkceError> {
        if !(MIN_VERIFIER_LEN..=MAX_VERIFIER_LEN).contains(&len) {
            return Err(PkceError::BadLength { len });
        }
        Ok(Self::from_valid_verifier(random_verifier(rng, len)))
    }

    /// The pair for an existing verifier, which must satisfy the RFC 7636 grammar.
    pub fn from_verifier(verifier: &str) -> Result<Self, PkceError> {
        validate_verifier(verifier)?;
        Ok(Self::from_valid_verifier(verifier.to_owned()))
    }

    fn from_valid_verifier(verifier: String) -> Self {
        let challenge = s256_challenge(&verifier);
        Self { verifier: Secret::new(verifier), challenge }
    }

    /// The `code_verifier` for the token request. Secret until then: do not log it.
    pub fn verifier(&self) -> &str {
        self.verifier.expose()
    }

    /// The `code_challenge` for the authorization request.
    pub fn challenge(&self) -> &str {
        &self.challenge
    }

    /// The `code_challenge_method`: always `S256`.
    pub fn method(&self) -> &'static str {
        METHOD_S256
    }
}

fn random_verifier<R: CryptoRng + ?Sized>(rng: &mut R, len: usize) -> String {
    (0..len).map(|_| char::from(UNRESERVED[rng.random_range(0..UNRESERVED.len())])).collect()
}

/// `BASE64URL-NOPAD(SHA-256(verifier))`. Does not check the verifier's grammar.
pub fn s256_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Checks `verifier` against the RFC 7636 §4.1 grammar.
pub fn validate_verifier(verifier: &str) -> Result<(), PkceError> {
    let len = verifier.len();
    if let Some(position) = verifier.bytes().position(|b| !UNRESERVED.contains(&b)) {
        return Err(PkceError::BadCharacter { position });
    }
    if !(MIN_VERIFIER_LEN..=MAX_VERIFIER_LEN).contains(&len) {
        return Err(PkceError::BadLength { len });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng as _;
    use rand::rngs::StdRng;

    /// RFC 7636 Appendix B. (The challenge is `...URWbuGJSstw-cM`, as printed in the RFC and as
    /// Python's hashlib computes it; a `...URWuxM6Sc6xSIk` tail seen elsewhere is wrong.)
    #[test]
    fn rfc7636_appendix_b() {
        let octets: [u8; 32] = [
            116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37, 77, 105, 214, 191,
            240, 91, 88, 5, 88, 83, 132, 141, 121,
        ];
        assert_eq!(URL_SAFE_NO_PAD.encode(octets), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").unwrap();
        assert_eq!(p.challenge(), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        assert_eq!(p.method(), "S256");
        assert_eq!(p.verifier(), "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
    }

    #[test]
    fn generate_is_valid_and_fresh() {
        let a = Pkce::generate();
        let b = Pkce::generate();
        validate_verifier(a.verifier()).unwrap();
        assert_eq!(a.verifier().len(), DEFAULT_VERIFIER_LEN);
        assert_ne!(a.verifier(), b.verifier());
        assert_eq!(a.challenge(), s256_challenge(a.verifier()));
        assert_eq!(a.challenge().len(), 43);
    }

    #[test]
    fn seeded_rng_is_deterministic() {
        let a = Pkce::from_rng(&mut StdRng::seed_from_u64(7));
        let b = Pkce::from_rng(&mut StdRng::seed_from_u64(7));
        assert_eq!(a, b);
    }

    #[test]
    fn debug_redacts_verifier() {
        let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk").unwrap();
        let d = format!("{p:?}");
        assert!(!d.contains("dBjftJeZ4CVP"), "{d}");
        assert!(d.contains("E9Melhoa2Ow"), "{d}");
    }

    #[test]
    fn bad_verifiers_and_lengths() {
        assert_eq!(Pkce::from_verifier(&"a".repeat(42)), Err(PkceError::BadLength { len: 42 }));
        assert_eq!(Pkce::from_verifier(&"a".repeat(129)), Err(PkceError::BadLength { len: 129 }));
        assert!(Pkce::from_verifier(&"a".repeat(43)).is_ok());
        assert!(Pkce::from_verifier(&"~".repeat(128)).is_ok());
        let mut v = "a".repeat(50);
        v.insert(3, '+');
        assert_eq!(Pkce::from_verifier(&v), Err(PkceError::BadCharacter { position: 3 }));
        assert!(Pkce::from_verifier(&format!("{}\u{e9}", "a".repeat(50))).is_err());
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(Pkce::from_rng_with_len(&mut rng, 42), Err(PkceError::BadLength { len: 42 }));
        assert_eq!(Pkce::from_rng_with_len(&mut rng, 129), Err(PkceError::BadLength { len: 129 }));
    }

    proptest! {
        #[test]
        fn generated_verifiers_satisfy_grammar(seed in any::<u64>(), len in MIN_VERIFIER_LEN..=MAX_VERIFIER_LEN) {
            let p = Pkce::from_rng_with_len(&mut StdRng::seed_from_u64(seed), len).unwrap();
            prop_assert_eq!(p.verifier().len(), len);
            prop_assert!(p.verifier().bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)));
            prop_assert_eq!(p.challenge().len(), 43);
            prop_assert!(p.challenge().bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        }

        #[test]
        fn validate_never_panics(s in "\\PC{0,140}") {
            let _ = Pkce::from_verifier(&s);
        }
    }
}
