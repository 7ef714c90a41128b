//! Finding policies: by file path, or by `NAME@VERSION` in a policy directory first and then
//! among the copies compiled into the binary (so jev works from any directory).

use std::path::{Path, PathBuf};

use super::load::{PolicyError, load_policy};
use super::model::Policy;

/// The bundled policy files, compiled in. `policies/` holds the same files; a tidy test
/// checks that this list names every one of them.
pub const BUNDLED: &[(&str, &str)] = &[
    (
        "reliability.policy-v1.json",
        include_str!("../../policies/reliability.policy-v1.json"),
    ),
    (
        "reliability.policy-v2.json",
        include_str!("../../policies/reliability.policy-v2.json"),
    ),
    (
        "reliability.policy-v3.json",
        include_str!("../../policies/reliability.policy-v3.json"),
    ),
    (
        "tool-call-assessment.v1.json",
        include_str!("../../policies/tool-call-assessment.v1.json"),
    ),
    (
        "tool-selection.v1.json",
        include_str!("../../policies/tool-selection.v1.json"),
    ),
    (
        "skill-routing.v1.json",
        include_str!("../../policies/skill-routing.v1.json"),
    ),
    (
        "model-routing.v1.json",
        include_str!("../../policies/model-routing.v1.json"),
    ),
    (
        "proposal-review.v1.json",
        include_str!("../../policies/proposal-review.v1.json"),
    ),
];

/// Where a policy came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    /// Compiled into the binary (the name is the bundled file's name).
    Bundled(&'static str),
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Bundled(name) => write!(f, "(bundled) {name}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Located {
    pub policy: Policy,
    pub origin: Origin,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{origin}: {error}")]
    Invalid { origin: Origin, error: PolicyError },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("no policy {reference} in {searched}")]
    NotFound { reference: String, searched: String },
    #[error("{path}: defines {found}, and so does {other}")]
    Duplicate {
        path: PathBuf,
        found: String,
        other: PathBuf,
    },
}

/// The outcome of a lookup, with the warnings the caller should show (domain code never prints).
#[derive(Debug)]
pub struct Resolved {
    pub located: Located,
    pub warnings: Vec<String>,
}

/// Loads one policy file.
pub fn load_file(path: &Path) -> Result<Located, RegistryError> {
    let text = std::fs::read_to_string(path).map_err(|error| RegistryError::Io {
        path: path.to_owned(),
        error,
    })?;
    let origin = Origin::File(path.to_owned());
    let policy = load_policy(&text).map_err(|error| RegistryError::Invalid {
        origin: origin.clone(),
        error,
    })?;
    Ok(Located { policy, origin })
}

/// Every bundled policy, loaded. A bundled file that fails to load is a build defect that the
/// test suite catches; it still surfaces as an error here rather than a panic.
pub fn bundled() -> Result<Vec<Located>, RegistryError> {
    BUNDLED
        .iter()
        .map(|(name, text)| {
            let origin = Origin::Bundled(name);
            load_policy(text)
                .map(|policy| Located {
                    policy,
                    origin: origin.clone(),
                })
                .map_err(|error| RegistryError::Invalid { origin, error })
        })
        .collect()
}

/// Every `*.json` policy in `dir`, sorted by file name. Two files defining the same
/// name@version is an error: a lookup would be ambiguous.
pub fn directory(dir: &Path) -> Result<Vec<Located>, RegistryError> {
    let entries = std::fs::read_dir(dir).map_err(|error| RegistryError::Io {
        path: dir.to_owned(),
        error,
    })?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| RegistryError::Io {
            path: dir.to_owned(),
            error,
        })?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            paths.push(path);
        }
    }
    paths.sort();
    let mut out: Vec<Located> = Vec::new();
    for path in paths {
        let located = load_file(&path)?;
        if let Some(other) = out
            .iter()
            .find(|l| l.policy.reference() == located.policy.reference())
        {
            let Origin::File(other) = &other.origin else {
                continue;
            };
            return Err(RegistryError::Duplicate {
                path,
                found: located.policy.reference(),
                other: other.clone(),
            });
        }
        out.push(located);
    }
    Ok(out)
}

/// True when `reference` reads as `NAME@VERSION` rather than a path.
pub fn is_name_ref(reference: &str) -> bool {
    reference.contains('@')
        && !reference.contains(['/', '\\'])
        && !reference.ends_with(".json")
        && !Path::new(reference).exists()
}

/// Finds `reference` (a path, or `NAME@VERSION` looked up in `dir` and then among the bundled
/// policies). When `dir` and the bundled set both define it with different digests, the
/// directory's copy wins and a warning says so.
pub fn resolve(reference: &str, dir: Option<&Path>) -> Result<Resolved, RegistryError> {
    if !is_name_ref(reference) {
        return Ok(Resolved {
            located: load_file(Path::new(reference))?,
            warnings: Vec::new(),
        });
    }
    let bundled = bundled()?;
    let from_bundle = bundled
        .into_iter()
        .find(|l| l.policy.reference() == reference);
    let mut warnings = Vec::new();
    if let Some(dir) = dir {
        let local = directory(dir)?
            .into_iter()
            .find(|l| l.policy.reference() == reference);
        if let Some(local) = local {
            if let Some(b) = &from_bundle {
                if b.policy.digest != local.policy.digest {
                    warnings.push(format!(
                        "{}: {reference} differs from the bundled copy ({} vs {}); using the file",
                        local.origin, local.policy.digest, b.policy.digest
                    ));
                }
            }
            return Ok(Resolved {
                located: local,
                warnings,
            });
        }
    }
    match from_bundle {
        Some(located) => Ok(Resolved { located, warnings }),
        None => Err(RegistryError::NotFound {
            reference: reference.to_owned(),
            searched: match dir {
                Some(d) => format!("{} or the bundled policies", d.display()),
                None => "the bundled policies".into(),
            },
        }),
    }
}

/// The directory searched by default: `policies/` when it exists.
pub fn default_dir() -> Option<PathBuf> {
    let p = PathBuf::from("policies");
    p.is_dir().then_some(p)
}
