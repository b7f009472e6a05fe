//! Golden files: a versioned manifest of cases with their expected outputs, so that CI machines
//! without a GPU (and tools in other languages) can detect any drift of the model.
//!
//! `golden/manifest.json` lists every case: problem, shapes, distribution, seed, SHA-256 of the
//! `expected`, `lo` and `hi` fp16 bytes, and a few hundred sampled elements. Small cases are also
//! stored whole under `golden/cases/` (inputs and reference, the case-file format of `reference`).
//! `golden/scaled-gemm.json` holds the block-scaled family's hashes ([`scaled`]).

pub mod scaled;
pub mod set;

use crate::case_file::{fp16_bytes, CaseReader, CaseWriter};
use crate::error::{Error, Result};
use crate::model::bounds::KOrder;
use crate::model::{dual_gemm_reference, group_gemm_reference, Reference, MODEL_VERSION};
use crate::problem::generate::{generate_dual_gemm, generate_group_gemm};
use crate::problem::{Distribution, ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use set::CaseDefinition;
use sha2::{Digest, Sha256};
use std::path::Path;

/// Version of the manifest layout.
pub const FORMAT_VERSION: u32 = 1;
/// Sampled elements per case.
const SAMPLES: usize = 256;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    pub model_version: String,
    pub k_order: KOrder,
    pub cases: Vec<ManifestCase>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestCase {
    pub name: String,
    pub problem: ProblemKind,
    pub shapes: Vec<Shape>,
    pub distribution: Distribution,
    pub seed: u64,
    /// Path of the whole case relative to the golden directory, for small cases.
    pub file: Option<String>,
    pub sha256_expected: String,
    pub sha256_lo: String,
    pub sha256_hi: String,
    /// The bug this case is built to expose, if it is an adversarial case.
    pub exposes: Option<String>,
    pub samples: Vec<Sample>,
}

/// One sampled element: flat index and fp16 bit patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub index: usize,
    pub expected: u16,
    pub lo: u16,
    pub hi: u16,
}

fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Computes the reference of a case definition.
pub fn compute(definition: &CaseDefinition, order: KOrder) -> Result<Reference> {
    Ok(match definition.problem {
        ProblemKind::DualGemm => dual_gemm_reference(
            &generate_dual_gemm(definition.shapes[0], definition.dist, definition.seed),
            order,
        ),
        ProblemKind::GroupGemm => group_gemm_reference(
            &generate_group_gemm(&definition.shapes, definition.dist, definition.seed)?,
            order,
        ),
        ProblemKind::Gemm | ProblemKind::Gemv => {
            return Err(Error::InvalidInput(format!(
                "the golden set has no {} cases",
                definition.problem.name()
            )))
        }
    })
}

fn manifest_entry(definition: &CaseDefinition, reference: &Reference) -> ManifestCase {
    let mut rng = ChaCha8Rng::seed_from_u64(definition.seed ^ 0x601D);
    let mut indices: Vec<usize> = (0..SAMPLES.min(reference.len()))
        .map(|_| (rng.next_u64() % reference.len() as u64) as usize)
        .collect();
    indices.sort_unstable();
    indices.dedup();
    ManifestCase {
        name: definition.name.clone(),
        problem: definition.problem,
        shapes: definition.shapes.clone(),
        distribution: definition.dist,
        seed: definition.seed,
        file: definition
            .stored_whole
            .then(|| format!("cases/{}.safetensors", definition.name)),
        sha256_expected: sha256_hex(&fp16_bytes(&reference.expected)),
        sha256_lo: sha256_hex(&fp16_bytes(&reference.lo)),
        sha256_hi: sha256_hex(&fp16_bytes(&reference.hi)),
        exposes: definition.exposes.map(|bug| bug.name()),
        samples: indices
            .into_iter()
            .map(|index| Sample {
                index,
                expected: reference.expected[index].to_bits(),
                lo: reference.lo[index].to_bits(),
                hi: reference.hi[index].to_bits(),
            })
            .collect(),
    }
}

fn whole_case_writer(
    definition: &CaseDefinition,
    reference: &Reference,
    order: KOrder,
) -> CaseWriter {
    let shape = definition.shapes[0];
    let inputs = generate_dual_gemm(shape, definition.dist, definition.seed);
    let fill = definition.dist.blocked_padding_fill();
    let mut writer = CaseWriter::default();
    writer
        .dual_gemm_inputs(&inputs, fill)
        .meta("distribution", definition.dist.name())
        .meta("seed", definition.seed)
        .meta("blocked_padding_fill", format!("{fill:#04x}"))
        .meta("golden_case", &definition.name)
        .reference(shape, reference, order);
    if let Some(bug) = definition.exposes {
        writer.meta("exposes", bug.name());
    }
    writer
}

pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join("manifest.json");
    let text =
        crate::bounded_read::read_text(&path, "golden manifest", crate::bounded_read::JSON_CAP)?;
    parse_manifest(&text).map_err(|reason| Error::file(&path, reason))
}

/// Why a golden manifest's text was refused, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

/// Parses and checks a manifest's text; never panics on bad input.
pub fn parse_manifest(text: &str) -> std::result::Result<Manifest, ManifestError> {
    let manifest: Manifest = serde_json::from_str(text)
        .map_err(|err| ManifestError(format!("not a valid golden manifest: {err}")))?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(ManifestError(format!(
            "manifest format version {} is not supported (this tool reads {FORMAT_VERSION})",
            manifest.format_version
        )));
    }
    for case in &manifest.cases {
        if case.shapes.is_empty() {
            return Err(ManifestError(format!("case '{}' has no shape", case.name)));
        }
        for shape in &case.shapes {
            Shape::new(shape.m, shape.n, shape.k, shape.l)
                .map_err(|err| ManifestError(format!("case '{}': {err}", case.name)))?;
        }
        if case
            .file
            .as_deref()
            .is_some_and(|file| file.contains("..") || file.starts_with('/'))
        {
            return Err(ManifestError(format!(
                "case '{}': file path must stay inside the golden directory",
                case.name
            )));
        }
    }
    Ok(manifest)
}

/// Progress callback: (case name, index, total).
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize);

/// Rewrites the golden set in `dir`. Refuses to replace a manifest of another model version unless
/// `force`.
pub fn generate(dir: &Path, order: KOrder, force: bool, progress: Progress) -> Result<Manifest> {
    if let Ok(existing) = read_manifest(dir) {
        if existing.model_version != MODEL_VERSION && !force {
            return Err(Error::InvalidInput(format!(
                "{} holds golden files of model version {}, this is version {MODEL_VERSION}: pass --force to replace them",
                dir.display(),
                existing.model_version
            )));
        }
    }
    let cases_dir = dir.join("cases");
    std::fs::create_dir_all(&cases_dir)
        .map_err(|err| Error::file(&cases_dir, format!("cannot create: {err}")))?;
    let definitions = set::golden_set();
    let mut manifest = Manifest {
        format_version: FORMAT_VERSION,
        model_version: MODEL_VERSION.to_string(),
        k_order: order,
        cases: Vec::new(),
    };
    for (i, definition) in definitions.iter().enumerate() {
        progress(&definition.name, i, definitions.len());
        let reference = compute(definition, order)?;
        let entry = manifest_entry(definition, &reference);
        if let Some(file) = &entry.file {
            whole_case_writer(definition, &reference, order).write(&dir.join(file))?;
        }
        manifest.cases.push(entry);
    }
    let path = dir.join("manifest.json");
    let text = serde_json::to_string_pretty(&manifest).expect("manifests serialize");
    std::fs::write(&path, text + "\n")
        .map_err(|err| Error::file(&path, format!("cannot write: {err}")))?;
    Ok(manifest)
}

/// What verifying one case found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseStatus {
    Ok,
    Drift(String),
}

/// Recomputes one manifest case and compares hashes, samples and (for whole cases) the stored file.
pub fn verify_case(dir: &Path, case: &ManifestCase, order: KOrder) -> Result<CaseStatus> {
    let definition = CaseDefinition {
        name: case.name.clone(),
        problem: case.problem,
        shapes: case.shapes.clone(),
        dist: case.distribution,
        seed: case.seed,
        stored_whole: case.file.is_some(),
        exposes: None,
    };
    let reference = compute(&definition, order)?;
    let recomputed = manifest_entry(&definition, &reference);
    for (what, stored, now) in [
        (
            "expected",
            &case.sha256_expected,
            &recomputed.sha256_expected,
        ),
        ("lo", &case.sha256_lo, &recomputed.sha256_lo),
        ("hi", &case.sha256_hi, &recomputed.sha256_hi),
    ] {
        if stored != now {
            return Ok(CaseStatus::Drift(format!("SHA-256 of {what} changed")));
        }
    }
    for sample in &case.samples {
        let index = sample.index;
        if index >= reference.len() {
            return Ok(CaseStatus::Drift(format!(
                "sample index {index} is outside the output"
            )));
        }
        let now = (
            reference.expected[index].to_bits(),
            reference.lo[index].to_bits(),
            reference.hi[index].to_bits(),
        );
        if now != (sample.expected, sample.lo, sample.hi) {
            return Ok(CaseStatus::Drift(format!(
                "sampled element {index} changed"
            )));
        }
    }
    if let Some(file) = &case.file {
        let path = dir.join(file);
        let stored = CaseReader::open(&path)?;
        let shape = case.shapes[0];
        let inputs = generate_dual_gemm(shape, case.distribution, case.seed);
        if stored.dual_gemm_inputs()? != inputs {
            return Ok(CaseStatus::Drift(format!(
                "{file}: stored inputs differ from the generator's"
            )));
        }
        let dims = [shape.m, shape.n, shape.l];
        for (name, values) in [
            ("expected", &reference.expected),
            ("lo", &reference.lo),
            ("hi", &reference.hi),
        ] {
            if stored.tensor(name, safetensors::Dtype::F16, &dims)? != fp16_bytes(values) {
                return Ok(CaseStatus::Drift(format!(
                    "{file}: stored {name} differs from the model"
                )));
            }
        }
    }
    Ok(CaseStatus::Ok)
}

/// Cost of recomputing a case, in multiply-adds, to pick the cheap ones.
pub fn cost(case: &ManifestCase) -> usize {
    let per_gemm: usize = case.shapes.iter().map(|s| s.m * s.n * s.k * s.l).sum();
    per_gemm
        * if case.problem == ProblemKind::DualGemm {
            2
        } else {
            1
        }
}
