//! Secrets and roles. Every credential is a 32-byte random secret from the OS
//! (`getrandom`), shown once as `lull_<kind>_<64 hex>` and stored only as its SHA-256.
//!
//! Why SHA-256 and not argon2: these are not human passwords but 256-bit random values,
//! so there is nothing to brute-force and a slow hash buys no security; a database leak
//! still reveals no usable secret. And the hash runs on every heartbeat (tens of
//! thousands a second), where argon2's deliberate cost would be the bottleneck.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Principal {
    /// Runs the pool: enrols machines, sees everything.
    Admin,
    /// A workstation owner: sees only their own machines' data (and jobs they submit).
    Owner { owner: String },
    /// An enrolled agent.
    Agent { agent_id: String, owner: String },
}

impl Principal {
    /// The name jobs submitted by this principal are filed under.
    pub fn submitter(&self) -> String {
        match self {
            Principal::Admin => "admin".into(),
            Principal::Owner { owner } | Principal::Agent { owner, .. } => owner.clone(),
        }
    }
}

/// The kinds of secret, by prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    Admin,
    Owner,
    Agent,
    Join,
}

impl SecretKind {
    fn prefix(self) -> &'static str {
        match self {
            SecretKind::Admin => "lull_admin_",
            SecretKind::Owner => "lull_owner_",
            SecretKind::Agent => "lull_agent_",
            SecretKind::Join => "lull_join_",
        }
    }
}

/// 32 random bytes from the OS, hex-encoded.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The OS random source failing is not recoverable for a server that mints secrets.
    getrandom::fill(&mut buf).expect("OS random source");
    hex(&buf)
}

/// A new secret of `kind`.
pub fn new_secret(kind: SecretKind) -> String {
    format!("{}{}", kind.prefix(), random_hex(32))
}

/// The stored form of a secret.
pub fn hash_secret(secret: &str) -> String {
    hex(&digest(secret))
}

/// The SHA-256 of a secret, as bytes (the credential cache's key).
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// True if `secret` looks like a secret of `kind` (right prefix, 64 hex digits).
pub fn well_formed(secret: &str, kind: SecretKind) -> bool {
    secret.strip_prefix(kind.prefix()).is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The kind a secret claims by its prefix, if well formed.
pub fn kind_of(secret: &str) -> Option<SecretKind> {
    [SecretKind::Admin, SecretKind::Owner, SecretKind::Agent, SecretKind::Join].into_iter().find(|k| well_formed(secret, *k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_prefixed_and_hash_stably() {
        let a = new_secret(SecretKind::Agent);
        let b = new_secret(SecretKind::Agent);
        assert_ne!(a, b);
        assert!(well_formed(&a, SecretKind::Agent));
        assert!(!well_formed(&a, SecretKind::Admin));
        assert_eq!(kind_of(&a), Some(SecretKind::Agent));
        assert_eq!(hash_secret(&a), hash_secret(&a));
        assert_ne!(hash_secret(&a), hash_secret(&b));
        assert_eq!(hash_secret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(kind_of("lull_agent_zz"), None);
    }
}
