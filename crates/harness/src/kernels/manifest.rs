//! The kernel manifest: a TOML file beside an external kernel that names it and says what it
//! solves, where its code is, which shapes and GPU it needs, and optionally the accumulation
//! schedule it declares for `certify --exact`. Unknown keys are errors, so a typo is never
//! silently ignored. Example (`examples/submissions/*/kernel.toml`):
//!
//! ```toml
//! name = "example-triton"
//! problem = "dual-gemm"
//! submission = "submission.py"          # or: library = "libkernel.so" and symbol = "..."
//! description = "Triton, one program per 64x64 tile"
//! deliberately_broken = false           # optional
//! nondeterministic = false              # optional: outputs may differ between runs (atomics-
//!                                       # based split-K); certify then skips its determinism check
//! arch = "sm_90"                        # optional: sm_XY (at least X.Y) or sm_XYa (exactly X.Y)
//! accumulation = "per-product"          # optional: one f32 FMA per product (an fp32 CUDA-core
//!                                       # GEMM, torch's fp32 matmul); default: blocks of 16
//!                                       # summed before each rounding (tensor cores)
//! python_path = ["pkgs"]                # optional, submissions only: folders (relative to this
//!                                       # file) put first on the worker's PYTHONPATH and shown
//!                                       # to it read-only in the sandbox: packages the GPU
//!                                       # machine lacks, e.g. CuTe DSL installed with
//!                                       # `pip install --target pkgs`
//! readable = ["/data/tables"]           # optional: paths (relative to this file or absolute)
//!                                       # the worker may read beyond its minimal root (the
//!                                       # system's folders, the interpreter's, its own folder);
//!                                       # recorded in the certificate
//!
//! [shapes]                              # optional: the declared support
//! k_multiple = 64                       # m_multiple, n_multiple, k_multiple, max_l
//! production = [[256, 4096, 7168]]      # optional: shapes it will run at ([M, N, K] or
//!                                       # [M, N, K, L]); every campaign runs each of them
//!
//! [schedule]                            # optional: replayed by certify --exact
//! mma = "hopper-hmma-f16-f32"
//! k_order = "increasing"                # increasing | decreasing | split-halves
//! epilogue = "silu-mul-f64-rne"
//! ```

use super::interface::ShapeSupport;
use crate::error::{Error, Result};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::{KChunkOrder, MmaModel, OutputEpilogue, Schedule};
use nvfp4_model::problem::{ProblemKind, Shape};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    name: String,
    problem: Option<String>,
    submission: Option<PathBuf>,
    library: Option<PathBuf>,
    symbol: Option<String>,
    description: Option<String>,
    deliberately_broken: Option<bool>,
    nondeterministic: Option<bool>,
    arch: Option<String>,
    accumulation: Option<String>,
    python_path: Option<Vec<PathBuf>>,
    readable: Option<Vec<PathBuf>>,
    shapes: Option<ShapesTable>,
    schedule: Option<ScheduleTable>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShapesTable {
    m_multiple: Option<usize>,
    n_multiple: Option<usize>,
    k_multiple: Option<usize>,
    max_l: Option<usize>,
    production: Option<Vec<Vec<usize>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleTable {
    mma: String,
    k_order: String,
    epilogue: String,
}

/// Where an external kernel's code is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelCode {
    /// A GPU MODE `submission.py`.
    Submission(PathBuf),
    /// A shared library and the symbol of its entry point (C ABI, `include/nvfp4_oracle.h`).
    Library { path: PathBuf, symbol: String },
}

/// A GPU architecture requirement: `sm_90` (compute capability 9.0 or later) or `sm_90a`
/// (exactly 9.0: the `a` targets are not forward compatible).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchRequirement {
    pub major: i32,
    pub minor: i32,
    pub exact: bool,
}

/// The compute capabilities NVIDIA's GPUs have (CUDA's `sm_XY` targets).
pub const KNOWN_ARCHS: [(i32, i32); 20] = [
    (5, 0),
    (5, 2),
    (5, 3),
    (6, 0),
    (6, 1),
    (6, 2),
    (7, 0),
    (7, 2),
    (7, 5),
    (8, 0),
    (8, 6),
    (8, 7),
    (8, 9),
    (9, 0),
    (10, 0),
    (10, 1),
    (10, 3),
    (11, 0),
    (12, 0),
    (12, 1),
];

impl ArchRequirement {
    /// Whether it names a GPU that exists; the `a` targets begin with sm_90a.
    pub fn is_known(&self) -> bool {
        KNOWN_ARCHS.contains(&(self.major, self.minor)) && (!self.exact || self.major >= 9)
    }

    pub fn parse(text: &str) -> Option<ArchRequirement> {
        let digits = text.strip_prefix("sm_")?;
        let (digits, exact) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (major, minor) = digits.split_at(digits.len() - 1);
        Some(ArchRequirement {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            exact,
        })
    }

    /// Why a GPU of compute capability `(major, minor)` does not meet it.
    pub fn unmet_by(&self, (major, minor): (i32, i32)) -> Option<String> {
        let ok = if self.exact {
            (major, minor) == (self.major, self.minor)
        } else {
            (major, minor) >= (self.major, self.minor)
        };
        (!ok).then(|| format!("needs {self}; this GPU is sm_{major}{minor}"))
    }
}

impl std::fmt::Display for ArchRequirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "sm_{}{}{}",
            self.major,
            self.minor,
            if self.exact { "a" } else { "" }
        )
    }
}

/// A validated manifest, paths resolved against the manifest's directory.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: Option<PathBuf>,
    pub name: String,
    pub problem: ProblemKind,
    pub code: KernelCode,
    pub description: String,
    pub deliberately_broken: bool,
    pub nondeterministic: bool,
    pub arch: Option<ArchRequirement>,
    pub support: ShapeSupport,
    pub schedule: Option<Schedule>,
    /// `accumulation = "per-product"`: the intervals of [`KOrder::PerProduct`].
    pub accumulation: Option<KOrder>,
    /// `[shapes] production`: shapes the kernel will run at, run by every campaign.
    pub production_shapes: Vec<Shape>,
    /// `python_path`: folders first on a submission worker's PYTHONPATH, readable in its
    /// sandbox (absolute; each an existing folder). Their contents are not in `hash`: they are
    /// the submission's packages, like torch, not its code.
    pub python_path: Vec<PathBuf>,
    /// `readable`: paths the kernel's workers may read beyond their minimal root (absolute;
    /// each existing, none a home folder whole), recorded in the certificate.
    pub readable: Vec<PathBuf>,
    /// SHA-256 of the kernel's file(s) and the manifest: certificates and `bench` are keyed by it.
    pub hash: String,
}

fn bad(path: &Path, reason: impl ToString) -> Error {
    Error::file(path, reason)
}

fn parse_schedule(path: &Path, table: &ScheduleTable) -> Result<Schedule> {
    let mma = MmaModel::parse(&table.mma).ok_or_else(|| {
        bad(
            path,
            format!(
                "schedule.mma '{}': expected one of {}",
                table.mma,
                MmaModel::ALL.map(MmaModel::name).join(", ")
            ),
        )
    })?;
    let k_order = match table.k_order.as_str() {
        "increasing" => KChunkOrder::Increasing,
        "decreasing" => KChunkOrder::Decreasing,
        "split-halves" => KChunkOrder::SplitHalvesIncreasing,
        other => {
            return Err(bad(
                path,
                format!(
                    "schedule.k_order '{other}': expected increasing, decreasing or split-halves"
                ),
            ))
        }
    };
    let epilogue = match table.epilogue.as_str() {
        "silu-mul-f64-rne" => OutputEpilogue::SiluMulF64Rne,
        other => {
            return Err(bad(
                path,
                format!("schedule.epilogue '{other}': expected silu-mul-f64-rne"),
            ))
        }
    };
    Ok(Schedule {
        mma,
        k_order,
        epilogue,
    })
}

/// SHA-256 over the named files' bytes (and names), in order.
pub fn hash_files(files: &[&Path]) -> Result<String> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    for file in files {
        // Streamed, its length from the file system: a library of any size is hashed without
        // being held, and only a regular file is (a device or a FIFO never ends).
        let mut reader =
            std::fs::File::open(file).map_err(|err| bad(file, format!("cannot read: {err}")))?;
        let meta = reader
            .metadata()
            .map_err(|err| bad(file, format!("cannot read: {err}")))?;
        if !meta.is_file() {
            return Err(bad(file, "not a regular file"));
        }
        hasher.update(file.file_name().map_or(&b""[..], |n| n.as_encoded_bytes()));
        hasher.update(meta.len().to_le_bytes());
        let copied = std::io::copy(&mut (&mut reader).take(meta.len()), &mut hasher)
            .map_err(|err| bad(file, format!("cannot read: {err}")))?;
        if copied != meta.len() {
            return Err(bad(file, "changed while it was read"));
        }
    }
    Ok(format!("{:x}", hasher.finalize()))
}

fn require_file(path: &Path, what: &str) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(bad(path, format!("the {what} is not a file"))),
        Err(err) => Err(bad(path, format!("cannot open the {what}: {err}"))),
    }
}

impl Manifest {
    /// Reads and validates a manifest file.
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = nvfp4_model::bounded_read::read_text(
            path,
            "manifest",
            nvfp4_model::bounded_read::MANIFEST_CAP,
        )?;
        Manifest::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Manifest> {
        let file: ManifestFile = toml::from_str(text).map_err(|err| {
            bad(
                path,
                format!("invalid manifest: {}", err.to_string().trim()),
            )
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if file.name.is_empty()
            || !file
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(bad(
                path,
                format!(
                    "name '{}': use letters, digits, '-', '_' and '.' only (it names files)",
                    file.name
                ),
            ));
        }
        let problem: ProblemKind = file
            .problem
            .as_deref()
            .unwrap_or("dual-gemm")
            .parse()
            .map_err(|err: nvfp4_model::Error| bad(path, err))?;
        let code = match (file.submission, file.library, file.symbol) {
            (Some(submission), None, None) => KernelCode::Submission(dir.join(submission)),
            (None, Some(library), Some(symbol)) => KernelCode::Library {
                path: dir.join(library),
                symbol,
            },
            (None, Some(_), None) => {
                return Err(bad(
                    path,
                    "a library needs `symbol`, the name of its entry point",
                ))
            }
            (Some(_), _, Some(_)) => {
                return Err(bad(path, "`symbol` goes with `library`, not `submission`"))
            }
            (Some(_), Some(_), _) => {
                return Err(bad(path, "give either `submission` or `library`, not both"))
            }
            (None, None, _) => {
                return Err(bad(
                    path,
                    "missing `submission` (a submission.py) or `library` (a .so) and `symbol`",
                ))
            }
        };
        let arch = match &file.arch {
            None => None,
            Some(text) => Some(
                ArchRequirement::parse(text)
                    .filter(ArchRequirement::is_known)
                    .ok_or_else(|| {
                        bad(
                            path,
                            format!(
                                "arch '{text}': not a GPU architecture; expected one of {} (with \
                                 `a`, e.g. sm_90a or sm_100a: exactly that one)",
                                KNOWN_ARCHS
                                    .map(|(major, minor)| format!("sm_{major}{minor}"))
                                    .join(", ")
                            ),
                        )
                    })?,
            ),
        };
        let mut support = ShapeSupport::ANY;
        if let Some(shapes) = &file.shapes {
            for (key, value) in [
                ("m_multiple", shapes.m_multiple),
                ("n_multiple", shapes.n_multiple),
                ("k_multiple", shapes.k_multiple),
                ("max_l", shapes.max_l),
            ] {
                if value == Some(0) {
                    return Err(bad(path, format!("shapes.{key} must be at least 1")));
                }
            }
            support.m_multiple = shapes.m_multiple.unwrap_or(1);
            support.n_multiple = shapes.n_multiple.unwrap_or(1);
            support.k_multiple = shapes.k_multiple.unwrap_or(16);
            support.max_l = shapes.max_l.unwrap_or(usize::MAX);
            if support.k_multiple % 16 != 0 {
                return Err(bad(
                    path,
                    format!(
                        "shapes.k_multiple = {}: must be a multiple of 16 (K always is)",
                        support.k_multiple
                    ),
                ));
            }
        }
        let mut production_shapes = Vec::new();
        for dims in file
            .shapes
            .iter()
            .flat_map(|s| s.production.iter().flatten())
        {
            let shape = match dims[..] {
                [m, n, k] => Shape::new(m, n, k, 1),
                [m, n, k, l] => Shape::new(m, n, k, l),
                _ => {
                    return Err(bad(
                        path,
                        format!("shapes.production {dims:?}: expected [M, N, K] or [M, N, K, L]"),
                    ))
                }
            }
            .map_err(|err| bad(path, format!("shapes.production {dims:?}: {err}")))?;
            if !support.supports(shape) {
                return Err(bad(
                    path,
                    format!(
                        "shapes.production {dims:?}: outside the declared support ({})",
                        support.describe()
                    ),
                ));
            }
            // As --model leaves such shapes out: one GPU cannot hold the case beside a kernel.
            if !crate::certify::within_case_bound(shape) {
                return Err(bad(
                    path,
                    format!(
                        "shapes.production {dims:?}: an operand or the output past 2^31 \
                         elements, the most one case may have (what one 80 GB GPU holds beside \
                         the kernel); give the shape the kernel runs per call"
                    ),
                ));
            }
            production_shapes.push(shape);
        }
        let schedule = match &file.schedule {
            None => None,
            Some(table) => Some(parse_schedule(path, table)?),
        };
        let accumulation = match file.accumulation.as_deref() {
            None | Some("blocks") => None,
            Some("per-product") => Some(KOrder::PerProduct),
            Some(other) => {
                return Err(bad(
                    path,
                    format!("accumulation '{other}': expected blocks (the default) or per-product"),
                ))
            }
        };
        let mut python_path = Vec::new();
        for folder in file.python_path.iter().flatten() {
            if !matches!(code, KernelCode::Submission(_)) {
                return Err(bad(
                    path,
                    "`python_path` goes with `submission`: a library's worker runs no Python",
                ));
            }
            let resolved = std::path::absolute(dir.join(folder)).unwrap_or(dir.join(folder));
            if resolved.to_string_lossy().contains(':') {
                return Err(bad(
                    path,
                    format!(
                        "python_path '{}': a ':' cannot be on PYTHONPATH",
                        folder.display()
                    ),
                ));
            }
            if !resolved.is_dir() {
                return Err(bad(
                    path,
                    format!(
                        "python_path '{}': {} is not a folder (install the packages there, e.g. \
                         `pip install --target {} PACKAGE`)",
                        folder.display(),
                        resolved.display(),
                        resolved.display()
                    ),
                ));
            }
            python_path.push(resolved);
        }
        let mut readable = Vec::new();
        for entry in file.readable.iter().flatten() {
            let resolved = std::path::absolute(dir.join(entry)).unwrap_or(dir.join(entry));
            if !resolved.exists() {
                return Err(bad(
                    path,
                    format!(
                        "readable '{}': {} does not exist",
                        entry.display(),
                        resolved.display()
                    ),
                ));
            }
            // Only a worker reads it (the sandbox is the GPU backend's).
            #[cfg(feature = "gpu")]
            if crate::sandbox::environment::holds_a_home(&resolved) {
                return Err(bad(
                    path,
                    format!(
                        "readable '{}': {} is (or holds) a home folder: name the folder inside \
                         it that the kernel needs",
                        entry.display(),
                        resolved.display()
                    ),
                ));
            }
            readable.push(resolved);
        }
        let code_file = match &code {
            KernelCode::Submission(p) => {
                require_file(p, "submission").map_err(|err| bad(path, err))?;
                p.clone()
            }
            KernelCode::Library { path: p, .. } => {
                require_file(p, "library").map_err(|err| bad(path, err))?;
                p.clone()
            }
        };
        let hash = hash_files(&[code_file.as_path(), path])?;
        Ok(Manifest {
            path: Some(path.to_path_buf()),
            description: file.description.unwrap_or_else(|| match &code {
                KernelCode::Submission(p) => format!("submission {}", p.display()),
                KernelCode::Library { path, symbol } => {
                    format!("{symbol} in {}", path.display())
                }
            }),
            name: file.name,
            problem,
            code,
            deliberately_broken: file.deliberately_broken.unwrap_or(false),
            nondeterministic: file.nondeterministic.unwrap_or(false),
            arch,
            support,
            schedule,
            accumulation,
            production_shapes,
            python_path,
            readable,
            hash,
        })
    }

    /// A manifest for a kernel given on the command line without one: any shape, no schedule,
    /// and the per-product intervals. Nothing says how such a kernel accumulates, and those
    /// intervals contain the default ones: a correct kernel passes them whether it sums blocks
    /// of 16 on tensor cores or adds product by product in fp32 (docs/reference/numerics.md section 3).
    pub fn for_code(code: KernelCode, problem: ProblemKind) -> Result<Manifest> {
        let (file, name) = match &code {
            KernelCode::Submission(p) => {
                require_file(p, "submission")?;
                let stem = p
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("submission");
                let name = if stem == "submission" {
                    p.canonicalize()
                        .ok()
                        .and_then(|c| c.parent()?.file_name()?.to_str().map(str::to_string))
                        .map_or(stem.to_string(), |dir| format!("{dir}-submission"))
                } else {
                    stem.to_string()
                };
                (p.clone(), name)
            }
            KernelCode::Library { path, symbol } => {
                require_file(path, "library")?;
                let stem = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or("library");
                (path.clone(), format!("{stem}-{symbol}"))
            }
        };
        let name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        Ok(Manifest {
            path: None,
            description: match &code {
                KernelCode::Submission(p) => format!("submission {}", p.display()),
                KernelCode::Library { path, symbol } => format!("{symbol} in {}", path.display()),
            },
            hash: hash_files(&[file.as_path()])?,
            name,
            problem,
            code,
            deliberately_broken: false,
            nondeterministic: false,
            arch: None,
            support: ShapeSupport::ANY,
            schedule: None,
            accumulation: Some(KOrder::PerProduct),
            production_shapes: Vec::new(),
            python_path: Vec::new(),
            readable: Vec::new(),
        })
    }
}
