//! Merging shard certificates (`campaign/shard.rs`) into the certificate of the whole campaign.
//!
//! The shards must be of one campaign: the same kernel and source hash, the same oracle build and
//! model version, the same seed, case count and options, the same shard count, every index
//! exactly once, each signed with this oracle's key (shards made on other machines must share
//! it: `NVFP4_ORACLE_SECRETS`). Then:
//! - coverage: counts summed, the FP4 codes and scale exponents seen united, the worst distance
//!   the largest; for a campaign that passes, equal to the unsharded campaign's;
//! - a failure: the shards' earliest in campaign order, which is the case an unsharded campaign
//!   stops at and shrinks from the same proptest tree, so the minimal repro is the same (its
//!   files are copied beside the merged certificate). Other shards ran past it, so a failing
//!   merge counts more cases than the unsharded run did;
//! - compute-sanitizer and the determinism check: shard 1's, which ran them;
//! - time: the slowest shard's.

use super::coverage::Coverage;
use super::failure_report::FailureReport;
use super::report::{Certificate, ExactOutcome, Status};
use super::shard::Shard;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A shard's certificate and the directory its repro files are in.
pub struct ShardCertificate {
    pub certificate: Certificate,
    pub dir: PathBuf,
}

/// Reads a shard's certificate, refusing one whose signature does not hold.
pub fn read_shard(path: &Path) -> Result<ShardCertificate> {
    let value = super::signing::read_verified(path, "shard certificate")?;
    let certificate: Certificate = serde_json::from_value(value)
        .map_err(|err| Error::file(path, format!("not a certificate of this oracle: {err}")))?;
    if certificate.shard.is_none() {
        return Err(Error::file(
            path,
            "not a shard's certificate (it was made without --shard)",
        ));
    }
    Ok(ShardCertificate {
        certificate,
        dir: path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    })
}

/// The shard count of a campaign whose shards these all are; why not, if they are not.
fn check_one_campaign(shards: &[ShardCertificate]) -> Result<usize> {
    let first = &shards
        .first()
        .ok_or_else(|| Error::NotOneCampaign("no shard certificates given".into()))?
        .certificate;
    let count = first.shard.map_or(0, |s| s.count);
    type Field = (&'static str, fn(&Certificate) -> String);
    let fields: [Field; 13] = [
        ("kernel", |c| c.kernel.clone()),
        ("source hash", |c| format!("{:?}", c.source_hash)),
        ("oracle", |c| c.tool.clone()),
        ("oracle build", |c| c.build.clone()),
        ("model version", |c| c.model_version.clone()),
        ("problem", |c| c.problem.clone()),
        ("seed", |c| c.seed.to_string()),
        ("case count", |c| c.cases_requested.to_string()),
        ("K order", |c| c.k_order.clone()),
        ("distributions", |c| c.only_gpumode.to_string()),
        ("--quick", |c| {
            c.coverage.production_size_skipped.to_string()
        }),
        ("--exact", |c| c.exact.is_some().to_string()),
        ("shard count", |c| {
            c.shard.map_or(0, |s| s.count).to_string()
        }),
    ];
    for (what, get) in fields {
        let values: Vec<String> = shards.iter().map(|s| get(&s.certificate)).collect();
        if values.iter().any(|v| *v != values[0]) {
            return Err(Error::NotOneCampaign(format!(
                "the shards are not of one campaign: their {what} differs ({})",
                distinct(&values)
            )));
        }
    }
    let gpus: Vec<String> = shards
        .iter()
        .map(|s| {
            s.certificate
                .gpu
                .as_ref()
                .map_or("none".into(), |g| g.name.clone())
        })
        .collect();
    if gpus.iter().any(|g| *g != gpus[0]) {
        return Err(Error::NotOneCampaign(format!(
            "the shards ran on different GPUs ({})",
            distinct(&gpus)
        )));
    }
    let mut seen = vec![0usize; count + 1];
    for shard in shards.iter().filter_map(|s| s.certificate.shard) {
        seen[shard.index] += 1;
    }
    let missing: Vec<String> = (1..=count)
        .filter(|&i| seen[i] == 0)
        .map(|i| format!("{i}/{count}"))
        .collect();
    let twice: Vec<String> = (1..=count)
        .filter(|&i| seen[i] > 1)
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !twice.is_empty() {
        return Err(Error::NotOneCampaign(format!(
            "shard {} given more than once",
            twice.join(", ")
        )));
    }
    if !missing.is_empty() {
        return Err(Error::NotOneCampaign(format!(
            "shard {} missing",
            missing.join(", ")
        )));
    }
    Ok(count)
}

fn distinct(values: &[String]) -> String {
    let mut unique: Vec<&String> = Vec::new();
    for value in values {
        if !unique.contains(&value) {
            unique.push(value);
        }
    }
    unique
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(" vs ")
}

/// The coverage of the whole campaign from its shards'.
pub fn merge_coverage(parts: &[&Coverage], failed: bool) -> Coverage {
    let mut merged = parts
        .first()
        .map_or_else(Coverage::default, |c| (*c).clone());
    for part in &parts[1..] {
        merged.cases += part.cases;
        for (into, from) in [
            (&mut merged.by_distribution, &part.by_distribution),
            (&mut merged.by_shape_class, &part.by_shape_class),
        ] {
            for (key, count) in from {
                *into.entry(key.clone()).or_default() += count;
            }
        }
        for (into, from) in [
            (
                &mut merged.seconds_by_shape_class,
                &part.seconds_by_shape_class,
            ),
            (&mut merged.seconds_by_phase, &part.seconds_by_phase),
        ] {
            for (key, seconds) in from {
                *into.entry(key.clone()).or_default() += seconds;
            }
        }
        for (regime, count) in &part.by_regime {
            let into = merged.by_regime.entry(regime.clone()).or_default();
            into.cases += count.cases;
            into.sampled += count.sampled;
        }
        merged.deployment_cases.cases += part.deployment_cases.cases;
        merged.deployment_cases.sampled += part.deployment_cases.sampled;
        if let (Some(into), Some(from)) = (merged.ranges.as_mut(), part.ranges.as_ref()) {
            into.merge(from);
        }
        merged.sampled_cases += part.sampled_cases;
        merged.sampled_rows_judged += part.sampled_rows_judged;
        merged.sampled_rows_of += part.sampled_rows_of;
        for (into, from) in [
            (&mut merged.fp4_codes_seen, &part.fp4_codes_seen),
            (&mut merged.scale_exponents_seen, &part.scale_exponents_seen),
        ] {
            into.extend(from);
            into.sort_unstable();
            into.dedup();
        }
        merged.nan_scales_seen |= part.nan_scales_seen;
        merged.worst_ulps_from_expected = merged
            .worst_ulps_from_expected
            .max(part.worst_ulps_from_expected);
        merged.refuses_unsupported_shape = match (
            merged.refuses_unsupported_shape,
            part.refuses_unsupported_shape,
        ) {
            (Some(a), Some(b)) => Some(a && b),
            _ => None,
        };
        merged.exact = match (merged.exact, part.exact) {
            (Some(mut a), Some(b)) => {
                a.cases_replayed += b.cases_replayed;
                a.elements_compared += b.elements_compared;
                a.ambiguous_elements += b.ambiguous_elements;
                a.ambiguous_alternative_observed += b.ambiguous_alternative_observed;
                a.cases_mismatching += b.cases_mismatching;
                a.elements_mismatching += b.elements_mismatching;
                Some(a)
            }
            (a, b) => a.or(b),
        };
    }
    // An unsharded campaign offers the unsupported shape only when no case failed.
    if failed {
        merged.refuses_unsupported_shape = None;
    }
    merged
}

/// Copies a failure's repro files from the shard's directory into `out` under the unsharded
/// names, and points the report at them.
fn move_repro(failure: &mut FailureReport, kernel: &str, from: &Path, out: &Path) -> Result<()> {
    let copy = |path: &mut PathBuf, suffix: &str| -> Result<()> {
        let name = path.file_name().map(PathBuf::from).unwrap_or_default();
        let source = from.join(name);
        let target = out.join(format!("{kernel}-{suffix}.safetensors"));
        std::fs::copy(&source, &target)
            .map_err(|err| Error::file(&source, format!("the shard's repro file: {err}")))?;
        *path = target;
        Ok(())
    };
    copy(&mut failure.repro_case, "repro-case")?;
    copy(&mut failure.repro_output, "repro-output")?;
    if let Some(path) = failure.repro_minimal_data.as_mut() {
        copy(path, "repro-minimal-data")?;
    }
    if let Some(path) = failure.repro_minimal_output.as_mut() {
        copy(path, "repro-minimal-output")?;
    }
    failure.replay = format!(
        "nvfp4-oracle check --case {} --output {}",
        failure.repro_case.display(),
        failure.repro_output.display()
    );
    Ok(())
}

/// The certificate of the whole campaign from its shards' certificates; repro files are copied
/// into `out`.
pub fn merge(mut shards: Vec<ShardCertificate>, out: &Path) -> Result<Certificate> {
    let count = check_one_campaign(&shards)?;
    shards.sort_by_key(|s| s.certificate.shard.map_or(0, |s: Shard| s.index));
    let certificates: Vec<&Certificate> = shards.iter().map(|s| &s.certificate).collect();
    let first = certificates[0];
    let mut merged = first.clone();
    merged.shard = None;
    merged.merged_shards = Some(count);
    merged.devices = Vec::new();
    for device in certificates.iter().flat_map(|c| &c.devices) {
        if !merged.devices.contains(device) {
            merged.devices.push(device.clone());
        }
    }
    merged.reference = None;
    for reference in certificates.iter().filter_map(|c| c.reference.as_ref()) {
        merged
            .reference
            .get_or_insert_with(Default::default)
            .add(reference);
    }
    merged.created = super::report::utc_now();
    merged.elapsed_seconds = certificates
        .iter()
        .map(|c| c.elapsed_seconds)
        .fold(0.0, f64::max);
    // What held around every worker: the weakest shard's isolation is the campaign's.
    if let Some(unsandboxed) = certificates.iter().find(|c| {
        c.environment
            .isolation
            .as_deref()
            .is_some_and(|i| !i.starts_with("sandboxed"))
    }) {
        merged.environment = unsandboxed.environment.clone();
    }
    if let Some(unavailable) = certificates
        .iter()
        .find(|c| c.status == Status::Unavailable)
    {
        merged.status = Status::Unavailable;
        merged.unavailable_reason = unavailable.unavailable_reason.clone();
        return Ok(merged);
    }
    let earliest = shards
        .iter()
        .filter_map(|s| s.certificate.failure.as_ref().map(|f| (f, &s.dir)))
        .min_by_key(|(f, _)| f.case_index);
    merged.failure = match earliest {
        Some((failure, dir)) => {
            let mut failure = failure.clone();
            move_repro(&mut failure, &merged.kernel, dir, out)?;
            Some(failure)
        }
        None => None,
    };
    let coverages: Vec<&Coverage> = certificates.iter().map(|c| &c.coverage).collect();
    merged.coverage = merge_coverage(&coverages, merged.failure.is_some());
    if let Some(exact) = merged.exact.as_mut() {
        exact.coverage = merged.coverage.exact.unwrap_or_default();
        exact.mismatch = certificates
            .iter()
            .filter_map(|c| c.exact.as_ref()?.mismatch.as_ref())
            .min_by_key(|m| m.case_index)
            .cloned();
        exact.outcome = if merged.failure.is_some() {
            ExactOutcome::IntervalFailure
        } else if exact.mismatch.is_some() {
            ExactOutcome::ScheduleDiffers
        } else {
            first
                .exact
                .as_ref()
                .map_or(ExactOutcome::NoScheduleDeclared, |e| e.outcome)
        };
    }
    merged.status = match &merged.exact {
        _ if merged.failure.is_some() => Status::Failed,
        Some(exact) if exact.outcome == ExactOutcome::ScheduleDiffers => Status::ScheduleDiffers,
        _ => Status::Certified,
    };
    // Shard 1 ran the checks; a finding there fails the whole.
    let (sanitizer, determinism) = (first.sanitizer.clone(), first.determinism.clone());
    merged.add_checks(sanitizer, determinism);
    Ok(merged)
}
