//! `jev keygen`: a new signing key for seals.

use std::path::{Path, PathBuf};

use jev::{fsutil, sign};

use super::{Failure, Out, Outcome};

#[derive(clap::Args)]
pub struct Args {
    /// Path prefix: writes PREFIX.key (secret) and, for Ed25519, PREFIX.pub (to verify with).
    #[arg(long, value_name = "PREFIX")]
    out: PathBuf,
    /// A shared-secret HMAC-SHA256 key instead of an Ed25519 key pair (the same file signs and
    /// verifies, so whoever can verify can also sign).
    #[arg(long)]
    hmac: bool,
}

fn with_ext(prefix: &Path, ext: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(ext);
    PathBuf::from(s)
}

fn write_new(path: &Path, text: &str, secret: bool) -> Result<(), Failure> {
    if path.exists() {
        return Err(Failure::input(format!(
            "{}: already exists; refusing to overwrite a key",
            path.display()
        )));
    }
    fsutil::write_atomic(path, text.as_bytes())
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    Ok(())
}

pub fn run(args: Args, out: &mut Out) -> Outcome {
    let secret_path = with_ext(&args.out, ".key");
    if args.hmac {
        let text = sign::generate_hmac();
        let id = sign::Key::parse(&text).map_err(Failure::input)?.id();
        write_new(&secret_path, &text, true)?;
        out.line(&format!(
            "wrote {} (hmac-sha256 shared secret, key id {id}): sign with it and verify with it; keep it private",
            secret_path.display()
        ))?;
    } else {
        let public_path = with_ext(&args.out, ".pub");
        if public_path.exists() {
            return Err(Failure::input(format!(
                "{}: already exists; refusing to overwrite a key",
                public_path.display()
            )));
        }
        let (secret, public) = sign::generate_ed25519();
        let id = sign::Key::parse(&public).map_err(Failure::input)?.id();
        write_new(&secret_path, &secret, true)?;
        write_new(&public_path, &public, false)?;
        out.line(&format!(
            "wrote {} (ed25519 secret key, key id {id}; keep it private) and {} (give this to verifiers: jev verify --trust-key)",
            secret_path.display(),
            public_path.display()
        ))?;
    }
    Ok(jev::exit::OK)
}
