//! Certificates: one JSON and one Markdown file per kernel and run, plus the minimal repro of a
//! failure as two safetensors files that `nvfp4-oracle check` replays.

use super::campaign::{CampaignLimits, CaseSpec};
use super::coverage::{Coverage, ExactCoverage};
use super::failure_report::{regenerate_command, FailureReport};
use crate::certify::run_campaign::CampaignResult;
use crate::error::{Error, Result};
use crate::kernels::{KernelEnvironment, KernelUnderTest};
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::model::replay::ExactMismatch;
use nvfp4_model::model::MODEL_VERSION;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Every case inside the intervals (and, under `--exact`, see [`ExactReport::outcome`]).
    Certified,
    Failed,
    Unavailable,
    /// `--exact`: every case inside the intervals, but some output is not what the declared
    /// schedule gives ("correct within interval, schedule differs from declared"). Not trusted
    /// by `bench`, which times only `certified` kernels.
    ScheduleDiffers,
}

/// What `--exact` concluded for one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExactOutcome {
    /// Every output inside the intervals and equal to the replay of the declared schedule.
    CertifiedExact,
    /// Every output inside the intervals; some differ from the replay.
    ScheduleDiffers,
    /// The kernel declares no schedule: only the interval check ran.
    NoScheduleDeclared,
    /// A case failed the interval check (the status says `failed`).
    IntervalFailure,
}

/// The exact-mode part of a certificate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactReport {
    pub outcome: ExactOutcome,
    pub schedule: Option<Schedule>,
    /// The schedule in words, e.g. `hopper-hmma-f16-f32, K increasing, silu-mul-f64-rne`.
    pub schedule_name: Option<String>,
    pub coverage: ExactCoverage,
    pub mismatch: Option<ExactMismatchReport>,
}

/// The first output inside the intervals that differs from the replay, shrunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactMismatchReport {
    /// The first differing case's index in campaign order.
    #[serde(default)]
    pub case_index: usize,
    pub first_case: CaseSpec,
    pub minimal_case: CaseSpec,
    pub shrink_steps: usize,
    /// In the minimal case.
    pub mismatching_elements: usize,
    pub elements: usize,
    pub first_difference: ExactMismatch,
    /// `first_difference` in words.
    pub difference: String,
    /// Schedules whose replay the first differing case's output matches exactly (empty: none of
    /// the modelled ones).
    pub matching_schedules: Vec<String>,
    /// Regenerates the minimal case's inputs and reference.
    pub regenerate: String,
}

impl ExactOutcome {
    pub fn describe(self) -> &'static str {
        match self {
            ExactOutcome::CertifiedExact => "certified exact",
            ExactOutcome::ScheduleDiffers => {
                "correct within interval, schedule differs from declared"
            }
            ExactOutcome::NoScheduleDeclared => "no schedule declared (interval check only)",
            ExactOutcome::IntervalFailure => "not reached: the interval check failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub os: String,
    pub arch: String,
    pub cpus: usize,
    /// The CPU's model name (/proc/cpuinfo), where it can be read.
    pub cpu_model: Option<String>,
}

impl Machine {
    pub fn this() -> Self {
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, name)| name.trim().to_string())
            });
        Machine {
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            // The cores the campaign used: its share of the host's (crate::cores).
            cpus: crate::cores::budget().threads,
            cpu_model,
        }
    }
}

/// The commit this binary was built from (see build.rs).
pub const BUILD: &str = env!("NVFP4_ORACLE_BUILD");

/// Now, in UTC, as `2026-11-24T18:09:10Z`: a date with no dependency on the local time zone.
pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (the proleptic Gregorian calendar, in 400-year
    // eras of 146,097 days).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Certificate {
    pub tool: String,
    /// The commit the tool was built from ("+modified": with uncommitted changes).
    pub build: String,
    /// When the certificate was made, UTC.
    pub created: String,
    pub model_version: String,
    pub kernel: String,
    /// SHA-256 of the kernel's source (GPU variants): `bench` trusts certificates of the same hash.
    pub source_hash: Option<String>,
    /// Where a user's kernel came from (its manifest's or code's path): another kernel of the
    /// same name from elsewhere never replaces this certificate.
    #[serde(default)]
    pub source_path: Option<String>,
    pub problem: String,
    pub supported_shapes: String,
    pub status: Status,
    pub unavailable_reason: Option<String>,
    pub seed: u64,
    pub cases_requested: usize,
    pub k_order: String,
    pub only_gpumode: bool,
    pub elapsed_seconds: f64,
    pub coverage: Coverage,
    pub failure: Option<FailureReport>,
    /// `--exact` only.
    pub exact: Option<ExactReport>,
    pub machine: Machine,
    /// The GPU it ran on (GPU kernels; `None` where none was found).
    pub gpu: Option<crate::gpu::device::DeviceInfo>,
    /// Python and torch versions (submissions).
    pub environment: KernelEnvironment,
    /// GPU kernels: compute-sanitizer and the determinism check on a sample of cases, for bugs
    /// outputs do not show; a finding fails the certificate. `checks_skipped` says why one did not run.
    pub sanitizer: Option<super::sanitize::SanitizerReport>,
    pub determinism: Option<super::checks::determinism::DeterminismReport>,
    pub checks_skipped: Vec<String>,
    /// `certify --shard I/N`: this certificate covers that share of the cases only; `bench`
    /// trusts none until `merge` has combined the shards.
    #[serde(default)]
    pub shard: Option<super::shard::Shard>,
    /// A certificate `merge` made: how many shards it combined.
    #[serde(default)]
    pub merged_shards: Option<usize>,
    /// The GPUs its cases ran on (each shard's, when merged), with the CUDA_VISIBLE_DEVICES it
    /// ran under; empty for a CPU kernel.
    #[serde(default)]
    pub devices: Vec<String>,
    /// Where this campaign's references were computed: `Some` when the GPU reference computed
    /// any (with the CPU model's cross-check of them), `None` when the CPU model did all.
    #[serde(default)]
    pub reference: Option<super::reference_engine::EngineReport>,
    /// Set by [`Certificate::write`] when it kept the certificate already in the report
    /// directory instead of this one (this one could not run the kernel): why. Never written.
    #[serde(skip)]
    pub kept_instead: Option<String>,
}

impl Certificate {
    fn base(kernel: &dyn KernelUnderTest, limits: &CampaignLimits) -> Self {
        Certificate {
            tool: concat!("nvfp4-oracle ", env!("CARGO_PKG_VERSION")).to_string(),
            build: BUILD.to_string(),
            created: utc_now(),
            model_version: MODEL_VERSION.to_string(),
            kernel: kernel.name().to_string(),
            source_hash: kernel.source_hash(),
            source_path: kernel.source_path(),
            problem: kernel.problem().name().to_string(),
            supported_shapes: kernel.support().describe(),
            status: Status::Unavailable,
            unavailable_reason: None,
            seed: limits.seed,
            cases_requested: limits.cases,
            k_order: limits.order_for(kernel).name().to_string(),
            only_gpumode: limits.only_gpumode,
            elapsed_seconds: 0.0,
            coverage: Coverage::default(),
            failure: None,
            exact: None,
            machine: Machine::this(),
            gpu: if kernel.runs_on_gpu() {
                crate::gpu::device::device_info().as_ref().ok().cloned()
            } else {
                None
            },
            environment: kernel.environment(),
            sanitizer: None,
            determinism: None,
            checks_skipped: Vec::new(),
            shard: limits.shard,
            merged_shards: None,
            devices: if kernel.runs_on_gpu() {
                crate::gpu::device::device_info()
                    .as_ref()
                    .ok()
                    .map(|gpu| {
                        let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                            .unwrap_or_else(|_| "unset".into());
                        format!("{} (CUDA_VISIBLE_DEVICES={visible})", gpu.name)
                    })
                    .into_iter()
                    .collect()
            } else {
                Vec::new()
            },
            reference: None,
            kept_instead: None,
        }
    }

    pub fn unavailable(
        kernel: &dyn KernelUnderTest,
        limits: &CampaignLimits,
        reason: String,
    ) -> Self {
        Certificate {
            unavailable_reason: Some(reason),
            ..Certificate::base(kernel, limits)
        }
    }

    /// Builds the certificate and writes the repro files of a failure into `dir`.
    pub fn from_campaign(
        kernel: &dyn KernelUnderTest,
        limits: &CampaignLimits,
        result: CampaignResult,
        dir: &Path,
    ) -> Result<Self> {
        let mut certificate = Certificate::base(kernel, limits);
        certificate.elapsed_seconds = result.elapsed.as_secs_f64();
        certificate.exact = result.exact.map(|exact| {
            let outcome = if result.failure.is_some() {
                ExactOutcome::IntervalFailure
            } else if exact.schedule.is_none() {
                ExactOutcome::NoScheduleDeclared
            } else if exact.mismatch.is_some() {
                ExactOutcome::ScheduleDiffers
            } else {
                ExactOutcome::CertifiedExact
            };
            ExactReport {
                outcome,
                schedule: exact.schedule,
                schedule_name: exact.schedule.map(|s| s.to_string()),
                coverage: result.coverage.exact.unwrap_or_default(),
                mismatch: exact.mismatch.map(|m| {
                    let first_difference = m
                        .comparison
                        .first_mismatch
                        .expect("a mismatch has a first element");
                    ExactMismatchReport {
                        case_index: m.case_index,
                        first_case: m.first,
                        minimal_case: m.minimal,
                        shrink_steps: m.shrink_steps,
                        mismatching_elements: m.comparison.mismatches,
                        elements: m.comparison.elements,
                        difference: first_difference.to_string(),
                        first_difference,
                        matching_schedules: m
                            .matching_schedules
                            .iter()
                            .map(|s| s.to_string())
                            .collect(),
                        regenerate: regenerate_command(kernel.problem(), m.minimal),
                    }
                }),
            }
        });
        certificate.coverage = result.coverage;
        certificate.status = match &certificate.exact {
            _ if result.failure.is_some() => Status::Failed,
            Some(exact) if exact.outcome == ExactOutcome::ScheduleDiffers => {
                Status::ScheduleDiffers
            }
            _ => Status::Certified,
        };
        if let Some(failure) = result.failure {
            let stem = certificate.file_stem();
            certificate.failure =
                Some(FailureReport::written(kernel, limits, failure, &stem, dir)?);
        }
        Ok(certificate)
    }

    /// Adds the checks beyond single outputs; any finding fails a certificate that had passed.
    pub fn add_checks(
        &mut self,
        sanitizer: Option<super::sanitize::SanitizerReport>,
        determinism: Option<super::checks::determinism::DeterminismReport>,
    ) {
        let found = sanitizer
            .as_ref()
            .is_some_and(|s| s.findings().next().is_some())
            || determinism.as_ref().is_some_and(|d| !d.findings.is_empty());
        if found && self.status != Status::Unavailable {
            self.status = Status::Failed;
        }
        self.sanitizer = sanitizer;
        self.determinism = determinism;
    }

    /// The checks' findings, one line each (the summary table's diagnosis).
    pub fn check_findings(&self) -> Vec<String> {
        let sanitizer = self.sanitizer.iter().flat_map(|s| s.findings()).map(|f| {
            format!(
                "{} ({}{})",
                f.verdict,
                f.tool.name(),
                f.location
                    .as_ref()
                    .map_or(String::new(), |l| format!(", {l}"))
            )
        });
        let determinism = self
            .determinism
            .iter()
            .flat_map(|d| &d.findings)
            .map(|f| format!("{} ({}; {})", f.verdict, f.conditions, f.first_difference));
        sanitizer.chain(determinism).collect()
    }

    /// The name of its files: the kernel's, and a shard's beside it (`<kernel>.shard-2-of-4`).
    pub fn file_stem(&self) -> String {
        match self.shard {
            Some(shard) => shard.file_stem(&self.kernel),
            None => self.kernel.clone(),
        }
    }

    /// Writes `<stem>.json` and `<stem>.md` into `dir` ([`Certificate::file_stem`]), each
    /// atomically (a reader sees the old file or the new one, never half of one). A certificate
    /// of a run that could not start the kernel (unavailable here) does not replace one of a
    /// run that did: that one is kept, and `Some(why)` says so. One that replaces a better
    /// verdict says so on stderr. Another kernel's certificate of the same name is never
    /// replaced ([`refuse_another_kernels`]).
    pub fn write(&self, dir: &Path) -> Result<Option<String>> {
        let json_path = dir.join(format!("{}.json", self.file_stem()));
        refuse_another_kernels(
            dir,
            &self.file_stem(),
            &self.problem,
            self.source_path.as_deref(),
        )?;
        let existing = existing_certificate(&json_path);
        if let Some(old) = &existing {
            let (was, old_rank) = verdict(old);
            let (now, new_rank) = verdict(self);
            if new_rank.is_none() && old_rank.is_some() {
                return Ok(Some(format!(
                    "{} kept: its kernel ran there ({was}, {}); this run could not run it",
                    json_path.display(),
                    old.created
                )));
            }
            if let (Some(old_rank), Some(new_rank)) = (old_rank, new_rank) {
                if new_rank < old_rank {
                    eprintln!(
                        "note: {} was {was} ({}), and is now {now}: replaced",
                        json_path.display(),
                        old.created
                    );
                }
            }
        }
        // Signed, so that bench trusts only what this oracle wrote (see signing.rs).
        let mut value = serde_json::to_value(self).map_err(|err| Error::file(dir, err))?;
        super::signing::sign(&mut value)?;
        let json = serde_json::to_string_pretty(&value).map_err(|err| Error::file(dir, err))?;
        for (extension, text) in [("json", json), ("md", self.markdown())] {
            let path = dir.join(format!("{}.{extension}", self.file_stem()));
            write_atomically(&path, text.as_bytes())?;
        }
        Ok(None)
    }
}

/// The certificate in `path`, where there is one this oracle can read.
fn existing_certificate(path: &Path) -> Option<Certificate> {
    let text = nvfp4_model::bounded_read::read_text(
        path,
        "certificate",
        nvfp4_model::bounded_read::JSON_CAP,
    )
    .ok()?;
    serde_json::from_str(&text).ok()
}

/// Refuses to write a certificate of `stem` for a kernel of `problem` from `source_path` over
/// one in `dir` of another kernel that bears the same name (another problem's, or one from
/// another place: two `submission.py` in folders of one name): the user's kernel named like
/// another, whose certificate would be lost. Certify calls it before a campaign too, so that
/// no run is wasted on it.
pub fn refuse_another_kernels(
    dir: &Path,
    stem: &str,
    problem: &str,
    source_path: Option<&str>,
) -> Result<()> {
    let path = dir.join(format!("{stem}.json"));
    let Some(old) = existing_certificate(&path) else {
        return Ok(());
    };
    let other = if old.problem != problem {
        format!("of the {} problem, not the {problem}", old.problem)
    } else {
        match (old.source_path.as_deref(), source_path) {
            (Some(was), Some(now)) if was != now => format!("from {was}, not {now}"),
            _ => return Ok(()),
        }
    };
    Err(Error::Usage(format!(
        "{} is the certificate of another kernel named '{}' ({other}): not replaced; give this \
         kernel another name (a manifest's `name`), or certify into another --report-dir (if it \
         is the same kernel, moved, remove the old certificate)",
        path.display(),
        old.kernel,
    )))
}

/// Checks, before any work, that a file can be written at `path` (its folder exists and takes
/// a new file; it is not a folder), leaving nothing behind.
pub fn check_file_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(Error::file(path, "is a directory, not a file to write"));
    }
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(Error::file(
            path,
            format!("cannot be written: no folder {}", dir.display()),
        ));
    }
    check_dir_writable(dir).map_err(|err| Error::file(path, format!("cannot be written: {err}")))
}

/// Checks, before any work, that `dir` exists (or can be made) and takes new files.
pub fn check_dir_writable(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::file(
            dir,
            "is a file, not a folder: name a folder for the certificates (one that does not \
             exist yet is made)",
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|err| Error::file(dir, format!("cannot create: {err}")))?;
    let probe = dir.join(format!(".nvfp4-oracle-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|err| Error::file(dir, format!("cannot write files into it: {err}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes `bytes` to `path` through a file beside it and a rename: a reader, or a run cut off
/// half-way, never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.{}.partial", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, path));
    written.map_err(|err| {
        let _ = std::fs::remove_file(&temporary);
        Error::file(path, format!("cannot write: {err}"))
    })
}

/// The verdict in words and its rank (higher is better); None for a kernel that did not run.
pub fn verdict(certificate: &Certificate) -> (&'static str, Option<u8>) {
    let exact = certificate.exact.as_ref().map(|e| e.outcome);
    match certificate.status {
        Status::Unavailable => ("unavailable", None),
        Status::Failed => ("failed", Some(0)),
        Status::ScheduleDiffers => ("schedule differs", Some(1)),
        Status::Certified if exact == Some(ExactOutcome::CertifiedExact) => {
            ("certified exact", Some(3))
        }
        Status::Certified => ("certified", Some(2)),
    }
}
