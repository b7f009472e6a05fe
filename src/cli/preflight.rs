//! `nvfp4-oracle preflight`: the instruction census of a kernel's PTX (crates/harness/src/preflight/), on any
//! machine, GPU or not: a PTX file, or a built-in variant compiled by NVRTC for its own
//! architecture. What it reads and what it cannot see: docs/guides/preflight.md.

use super::exit_code::EXIT_FAIL;
use clap::Args;
use nvfp4_harness::preflight::Deadline;
use nvfp4_harness::preflight::Resources;
use nvfp4_harness::preflight::{census, Variant};
use nvfp4_harness::preflight::{compile_submission, how_compiled, Compilation};
use nvfp4_harness::{Error, Result};
use nvfp4_model::bounded_read;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct PreflightArgs {
    /// A PTX file (nvcc --ptx, NVRTC, CuTe DSL's --keep-ptx dump).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kernel", "submission"])]
    pub ptx: Option<PathBuf>,
    /// A GPU MODE submission.py with CuTe DSL kernels: its `compile_kernel()` is run in the
    /// sandbox for --arch (default sm_100a) with nothing launched, and its PTX read
    /// (NVFP4_ORACLE_PYTHON names an interpreter with nvidia-cutlass-dsl; torch is optional).
    #[arg(long, value_name = "FILE", conflicts_with = "kernel")]
    pub submission: Option<PathBuf>,
    /// A built-in GPU variant (see `variants`), compiled with NVRTC for its architecture.
    #[arg(long, value_name = "NAME")]
    pub kernel: Option<String>,
    /// Seconds the whole preflight may take, every step included (a submission's compilation,
    /// ptxas): past it the step running is killed with every process it started, its temporary
    /// files removed, and preflight exits 6.
    #[arg(long, value_name = "SECONDS", default_value_t = nvfp4_harness::preflight::COMPILE_TIMEOUT.as_secs(), allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(1, 7 * 86_400))]
    pub timeout: u64,
    /// Do not require block-scaled MMAs to be NVFP4's (kind::mxf4nvf4 block16).
    #[arg(long)]
    pub any_format: bool,
    /// What the kernel claims to be (repeatable): a finding when the code does not show it.
    #[arg(long, value_enum)]
    pub claim: Vec<Claim>,
    /// The architecture to compile a submission for and that ptxas assembles for (default:
    /// sm_100a for a submission, else the PTX's `.target`).
    #[arg(long)]
    pub arch: Option<String>,
    /// The dynamic shared memory the launch asks for, bytes (it is set by the host code, not in
    /// the PTX); a built-in variant's own is used by default.
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, 1 << 30))]
    pub dynamic_smem: Option<u64>,
    /// Also write this preflight as JSON (the baseline of a later one).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// An earlier preflight's JSON of the same kernel: say what changed in registers, spills,
    /// shared memory and CTAs per SM; exit 5 when CTAs per SM went down or spills appeared.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Hand the parent's environment variable NAME to the submission's compilation
    /// (repeatable); it starts from an allow-list, HOME its own folder (see certify --help).
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Claim {
    TwoSm,
    Persistent,
    WarpSpecialized,
}

pub fn run(args: PreflightArgs) -> Result<ExitCode> {
    let deadline = Deadline::new(std::time::Duration::from_secs(args.timeout));
    // An interrupted preflight kills what it started and removes its files before it ends.
    nvfp4_harness::preflight::catch_interrupts();
    nvfp4_harness::worker::pass_env(&args.pass_env).map_err(Error::Usage)?;
    // A compilation may take minutes (or hang until --timeout): never a silent wait, on a
    // terminal or in a CI log.
    let timeout = args.timeout;
    let _notes = super::progress::Heartbeat::start(move |elapsed| {
        format!(
            "preflight: still working: {} s of the {timeout} s that --timeout allows",
            elapsed.as_secs()
        )
    });
    let code = code_to_read(&args, &deadline)?;
    let (source, modules, threads, dynamic, compiled) = match code {
        Code::Read((source, modules, threads, dynamic)) => {
            (source, modules, threads, dynamic, COMPILED.get().cloned())
        }
        Code::Refused(report) => {
            print!("{report}");
            return Ok(ExitCode::from(EXIT_FAIL));
        }
    };
    let entries: Vec<_> = modules.iter().flat_map(|ptx| census(ptx)).collect();
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
    let mut resources: Option<Resources> = None;
    for ptx in &modules {
        let measured = measure(
            ptx,
            args.arch.clone(),
            threads,
            args.dynamic_smem.or(dynamic),
            &deadline,
        )?;
        resources = Some(match resources {
            Some(so_far) => so_far.merge(measured),
            None => measured,
        });
    }
    let resources = resources.expect("at least one module, as there is an entry");
    let mut findings =
        nvfp4_harness::preflight::findings(&entries, &resources, !args.any_format, &claims);
    // A submission's architecture as its compilation produced it, not as preflight asked.
    if args.submission.is_some() {
        let asked = args.arch.as_deref().unwrap_or(SUBMISSION_ARCH);
        findings.extend(nvfp4_harness::preflight::arch_finding(&modules, asked));
    }
    print!(
        "{}",
        nvfp4_harness::preflight::report(&source, &entries, &resources, &findings)
    );
    // How it was compiled, in the report's stream after it (not on stderr, where it landed
    // out of place in a combined log).
    if let Some(compiled) = &compiled {
        println!("\n{compiled}");
    }
    let record = nvfp4_harness::preflight::record(&source, &entries, &resources);
    let mut worse = false;
    if let Some(path) = &args.baseline {
        let text = bounded_read::read_text(path, "preflight record", bounded_read::JSON_CAP)?;
        let old: nvfp4_harness::preflight::PreflightRecord = serde_json::from_str(&text)
            .map_err(|err| Error::file(path, format!("not a preflight record: {err}")))?;
        println!("\nAgainst the baseline {}:\n", path.display());
        let changes = nvfp4_harness::preflight::diff(&old, &record);
        if changes.is_empty() {
            println!("unchanged");
        }
        for (what, regression) in &changes {
            println!(
                "- {what}{}",
                if *regression { " (**regression**)" } else { "" }
            );
            worse |= regression;
        }
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&record).expect("records serialize");
        std::fs::write(path, text)
            .map_err(|err| Error::file(path, format!("cannot write: {err}")))?;
    }
    Ok(if !findings.is_empty() {
        ExitCode::from(EXIT_FAIL)
    } else if worse {
        ExitCode::from(super::exit_code::EXIT_REGRESSION)
    } else {
        ExitCode::SUCCESS
    })
}

/// What the command reads: (what it is, its PTX modules, the launch's threads and dynamic
/// shared memory where known), or a submission's refusal to compile, as a report.
enum Code {
    Read((String, Vec<String>, Option<u32>, Option<u64>)),
    Refused(String),
}

fn code_to_read(args: &PreflightArgs, deadline: &Deadline) -> Result<Code> {
    if let Some(path) = &args.ptx {
        let ptx = bounded_read::read_text(path, "PTX file", bounded_read::PTX_CAP)?;
        return Ok(Code::Read((
            path.display().to_string(),
            vec![ptx],
            None,
            None,
        )));
    }
    if let Some(path) = &args.submission {
        let arch = args.arch.as_deref().unwrap_or(SUBMISSION_ARCH);
        let source = format!("{} (CuTe DSL, compiled for {arch})", path.display());
        return Ok(match compile_submission(path, arch, deadline)? {
            Compilation::Compiled {
                ptx,
                launches,
                driven_by,
                torch_placeholder,
            } => {
                let _ = COMPILED.set(format!(
                    "Compiled by {driven_by} for {arch}: {} PTX module(s), {} launch(es) in the \
                     host code{}. Worker isolation: {}.",
                    ptx.len(),
                    launches.len(),
                    if torch_placeholder {
                        " (torch not installed: a placeholder stood in for it)"
                    } else {
                        ""
                    },
                    how_compiled(),
                ));
                // Where launches differ, the largest: what must fit for every launch to start.
                let dynamic = launches.iter().filter_map(|l| l.dynamic_shared).max();
                let threads = launches.iter().filter_map(|l| l.threads).max();
                Code::Read((
                    source,
                    ptx.into_iter().map(|(_, text)| text).collect(),
                    threads,
                    dynamic,
                ))
            }
            Compilation::Refused {
                phase,
                message,
                meaning,
                lines,
            } => Code::Refused(nvfp4_harness::preflight::refused_report(
                &source, &phase, &message, meaning, &lines,
            )),
        });
    }
    let Some(name) = &args.kernel else {
        return Err(Error::Usage(
            "name the code to read: --ptx FILE, --submission FILE or --kernel NAME".into(),
        ));
    };
    let variant = nvfp4_harness::gpu::gpu_variants()
        .into_iter()
        .find(|v| v.name == *name)
        .ok_or_else(|| Error::Usage(format!("no GPU variant '{name}'")))?;
    let ptx = nvfp4_harness::gpu::compile_variant(&variant)?;
    Ok(Code::Read((
        format!("{name} ({})", variant.arch.target),
        vec![ptx.to_src()],
        Some(variant.threads),
        Some(u64::from(variant.dynamic_smem)),
    )))
}

/// How a submission was compiled, said after the report (set where it compiled).
static COMPILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The architecture a submission is compiled for unless --arch names another: the B200's.
const SUBMISSION_ARCH: &str = "sm_100a";

/// ptxas's numbers for the module, its refusal, or why there are none; an error where ptxas
/// ran out of time or preflight was interrupted.
fn measure(
    ptx: &str,
    arch: Option<String>,
    threads: Option<u32>,
    dynamic: Option<u64>,
    deadline: &Deadline,
) -> Result<Resources> {
    use nvfp4_harness::preflight::{usage, Assembled};
    let Some(arch) = arch.or_else(|| nvfp4_harness::preflight::target(ptx)) else {
        return Ok(Resources::Unavailable(
            "no --arch and no .target in the PTX".into(),
        ));
    };
    let Some(ptxas) = nvfp4_harness::preflight::find_ptxas() else {
        return Ok(Resources::Unavailable(
            "no ptxas found (NVFP4_ORACLE_PTXAS, PATH, /usr/local/cuda/bin; PyPI's \
             nvidia-cuda-nvcc-cu12 has one)"
                .into(),
        ));
    };
    Ok(match usage(&ptxas, ptx, &arch, deadline) {
        Ok(Assembled::Measured(usages)) => Resources::Measured {
            arch,
            usages,
            dynamic_shared: dynamic,
            threads,
        },
        Ok(Assembled::Refused(message)) => Resources::Refused { arch, message },
        Err(err @ (Error::Timeout { .. } | Error::Interrupted { .. })) => return Err(err),
        // ptxas could not be started (a wrong NVFP4_ORACLE_PTXAS): not measured, said why.
        Err(err) => Resources::Unavailable(err.to_string()),
    })
}
