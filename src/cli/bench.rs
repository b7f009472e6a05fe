//! `nvfp4-oracle bench`: its arguments, and the run: certified built-in variants timed in
//! process, external kernels in their worker by the batch clock (`nvfp4_harness::bench`), torch
//! beside them; the report printed and written.

use super::external::ExternalArgs;
use clap::Args;
use nvfp4_harness::bench::{
    bench_certified, bench_external, render, write_signed, BenchReport, ExternalOptions,
};
use nvfp4_harness::gpu::gpu_variants;
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::{Error, Result};
use nvfp4_model::golden::set::DUAL_GEMM_BENCHMARKS;
use nvfp4_model::problem::{ProblemKind, Shape};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Variants to time (default: every non-test GPU variant).
    #[arg(long = "kernel")]
    pub kernels: Vec<String>,
    /// Shapes MxNxK, comma separated (default: the four dual-GEMM benchmark shapes).
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<Shape>,
    /// Calls timed one at a time per shape (after 3 warm-ups): a built-in variant's time; an
    /// external kernel's cold-call latency by its own CUDA events, a cross-check of the
    /// parent's lone-call batches (its time is the batch clock's).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = crate::cli::value_parsers::whole::<usize>(1, 1_000_000))]
    pub reps: usize,
    /// Where certificates are read from and bench.json / bench.md written to.
    #[arg(long, default_value = "certify-report")]
    pub report_dir: PathBuf,
    /// Time variants without a certificate of the same source hash; the report says so.
    #[arg(long)]
    pub force_untrusted: bool,
    /// Skip the torch comparison even if python3 with torch is present.
    #[arg(long)]
    pub no_torch: bool,
    /// The main branch's bench.json: say which medians got slower beyond the noise of both
    /// runs (the larger spread, at least 5%) and exit 5 if any did. bench.json is signed;
    /// a baseline must be signed with this machine's key.
    #[arg(long, value_name = "BENCH.json")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub external: ExternalArgs,
}

fn torch_baseline(shapes: &[Shape], reps: usize) -> Option<serde_json::Value> {
    // In this process's private folder: a fixed name in /tmp could be a link planted there.
    let script = nvfp4_harness::private_tmp::dir()
        .ok()?
        .join("torch-bench.py");
    std::fs::write(
        &script,
        include_str!("../../scripts/torch_dual_gemm_bench.py"),
    )
    .ok()?;
    let list: Vec<String> = shapes
        .iter()
        .map(|s| format!("{}x{}x{}", s.m, s.n, s.k))
        .collect();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--shapes", &list.join(","), "--reps", &reps.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let why = stderr.lines().last().unwrap_or("python3 failed");
        eprintln!("note: torch comparison skipped: {why}");
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    // Before any worker starts: this process's memory out of a worker's reach, and the key that
    // signs certificates made (so that every sandbox hides it).
    nvfp4_harness::sandbox::protect_parent();
    nvfp4_harness::certify::ensure_key()?;
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        let shape = |&(m, n, k): &(usize, usize, usize)| Shape::new(m, n, k, 1).expect("valid");
        DUAL_GEMM_BENCHMARKS.iter().map(shape).collect()
    } else {
        args.shapes.clone()
    };
    let external = args.external.kernels()?;
    let all = gpu_variants();
    // Named as certify names them: wildcards too ('hopper-*'), and a name that matches no GPU
    // variant is refused with the list.
    let named = |pattern: &String, name: &str| super::certify::matches(pattern, name);
    if let Some(pattern) = args
        .kernels
        .iter()
        .find(|p| !all.iter().any(|v| named(p, v.name)))
    {
        let expected = all.iter().map(|v| v.name).collect::<Vec<_>>().join(", ");
        let given = pattern.clone();
        return Err(nvfp4_model::Error::UnknownName {
            what: "GPU variant",
            given,
            expected,
        }
        .into());
    }
    // External kernels alone unless built-in ones are named too; a wildcard over sound variants
    // ('hopper-*') leaves the test kernels out.
    let listed: Vec<(&str, bool)> = all.iter().map(|v| (v.name, v.test_kernel)).collect();
    let variants: Vec<_> = all
        .iter()
        .filter(|v| match args.kernels.is_empty() {
            true => external.is_empty() && !v.test_kernel,
            false => args
                .kernels
                .iter()
                .any(|k| super::certify::selects(k, (v.name, v.test_kernel), &listed)),
        })
        .collect();
    if variants.is_empty() && external.is_empty() {
        let why = "no GPU variant selected; see `nvfp4-oracle variants`";
        return Err(Error::Usage(why.into()));
    }
    let mut report = BenchReport::new(std::env::args().collect::<Vec<_>>().join(" "));
    let mut unavailable = false;
    for variant in &variants {
        let (dir, force) = (&args.report_dir, args.force_untrusted);
        unavailable |= !bench_certified(variant, &shapes, args.reps, dir, force, &mut report)?;
    }
    let options = ExternalOptions {
        shapes: &args.shapes,
        reps: args.reps,
        report_dir: &args.report_dir,
        force_untrusted: args.force_untrusted,
    };
    let mut uncertified = false;
    for kernel in &external {
        uncertified |= !bench_external(kernel, &options, &mut report)?;
    }
    // The torch comparison is of the dual GEMM.
    let dual = |k: &&_| KernelUnderTest::problem(*k) == ProblemKind::DualGemm;
    if !args.no_torch && (!variants.is_empty() || external.iter().any(|k| dual(&k))) {
        report.torch = torch_baseline(&shapes, args.reps);
    }
    if report.timings.is_empty() {
        // Nothing was timed: no table to write, and no success to report; a timing that failed
        // (a hang, a crash, a wrong output while timed) is said first.
        report
            .findings
            .iter()
            .for_each(|finding| eprintln!("{finding}"));
        if !report.findings.is_empty() {
            eprintln!("nothing timed: every timing failed (see above)");
            return Ok(ExitCode::from(crate::cli::exit_code::EXIT_FAIL));
        }
        // A kernel with no certificate could not be timed anywhere: said as that, not as this
        // machine's want of a GPU.
        if !uncertified && (unavailable || nvfp4_harness::gpu::device_info().is_err()) {
            eprintln!("nothing timed: no selected kernel can run on this machine");
            return Ok(ExitCode::from(crate::cli::exit_code::EXIT_UNAVAILABLE));
        }
        eprintln!("nothing timed: no selected kernel has a certificate it can be timed on (see the lines above)");
        return Ok(ExitCode::from(crate::cli::exit_code::EXIT_FAIL));
    }
    let mut markdown = render(&report);
    let slower = match &args.baseline {
        Some(path) => nvfp4_harness::bench::compare_with(path, &report, &mut markdown)?,
        None => false,
    };
    print!("{markdown}");
    write_signed(&report, &markdown, &args.report_dir)?;
    if !report.findings.is_empty() {
        report
            .findings
            .iter()
            .for_each(|finding| eprintln!("{finding}"));
        return Ok(ExitCode::from(crate::cli::exit_code::EXIT_FAIL));
    }
    if slower {
        eprintln!("slower than the baseline beyond the noise of both runs (see the table above)");
        return Ok(ExitCode::from(crate::cli::exit_code::EXIT_REGRESSION));
    }
    Ok(ExitCode::SUCCESS)
}
