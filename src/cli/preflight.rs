//! `nvfp4-oracle preflight`: the instruction census of a kernel's PTX (src/preflight/), on any
//! machine, GPU or not: a PTX file, or a built-in variant compiled by NVRTC for its own
//! architecture.

use super::EXIT_FAIL;
use crate::error::{Error, Result};
use crate::preflight::census::{census, Variant};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct PreflightArgs {
    /// A PTX file (nvcc --ptx, NVRTC, CuTe DSL's --keep-ptx dump).
    #[arg(long, value_name = "FILE", conflicts_with = "kernel")]
    pub ptx: Option<PathBuf>,
    /// A built-in GPU variant (see `variants`), compiled with NVRTC for its architecture.
    #[arg(long, value_name = "NAME")]
    pub kernel: Option<String>,
    /// Do not require block-scaled MMAs to be NVFP4's (kind::mxf4nvf4 block16).
    #[arg(long)]
    pub any_format: bool,
    /// What the kernel claims to be (repeatable): a finding when the code does not show it.
    #[arg(long, value_enum)]
    pub claim: Vec<Claim>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Claim {
    TwoSm,
    Persistent,
    WarpSpecialized,
}

pub fn run(args: PreflightArgs) -> Result<ExitCode> {
    let (source, ptx) = match (&args.ptx, &args.kernel) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read_to_string(path).map_err(|err| Error::file(path, err))?,
        ),
        (None, Some(name)) => {
            let variant = crate::gpu::variants::gpu_variants()
                .into_iter()
                .find(|v| v.name == name)
                .ok_or_else(|| Error::Usage(format!("no GPU variant '{name}'")))?;
            let ptx = crate::gpu::compile::compile_variant(&variant)?;
            (format!("{name} ({})", variant.arch.target), ptx.to_src())
        }
        (None, None) => {
            return Err(Error::Usage(
                "name the code to read: --ptx FILE or --kernel NAME".into(),
            ))
        }
    };
    let entries = census(&ptx);
    if entries.is_empty() {
        return Err(Error::Usage(format!("{source}: no .entry in this PTX")));
    }
    let claims: Vec<Variant> = args
        .claim
        .iter()
        .map(|c| match c {
            Claim::TwoSm => Variant::TwoSm,
            Claim::Persistent => Variant::Persistent,
            Claim::WarpSpecialized => Variant::WarpSpecialized,
        })
        .collect();
    let findings = crate::preflight::findings(&entries, !args.any_format, &claims);
    print!("{}", crate::preflight::report(&source, &entries, &findings));
    Ok(if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}
