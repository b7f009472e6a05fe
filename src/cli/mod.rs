//! The command-line interface: one module per subcommand, all returning an exit code.
//!
//! Exit codes are stable for CI: 0 success (or pass), 1 a verdict of failure, 2 bad usage or bad
//! input (unreadable file, wrong shape, unknown name), 3 (`certify --exact` only) every output
//! inside the intervals but some kernel not certified exact, 4 (`certify`) a kernel named on the
//! command line cannot run on this machine, or (`bench`) nothing could be timed here, 5
//! (`--baseline` of certify, merge, bench and preflight) worse than the baseline, 6
//! (`preflight`) a step did not end within `--timeout` and was killed, 7 (`certify`) a harness
//! error: the GPU reference differed from the CPU model (every case was still judged by the CPU
//! model). clap's own usage errors also exit 2.

mod bench;
mod certify;
mod certify_gpus;
mod check;
mod external;
mod gate;
mod generate;
mod golden;
mod merge;
mod preflight;
mod progress;
mod reference;
mod scaled_gemm;
mod variants;
mod verify;

use clap::{Parser, Subcommand};
use nvfp4_harness::error::Result;
use std::process::ExitCode;

pub const EXIT_FAIL: u8 = 1;
pub const EXIT_BAD_INPUT: u8 = 2;
/// `certify --exact`: no interval failure, but some kernel's outputs differ from the replay of
/// its declared schedule, or it declares none.
pub const EXIT_NOT_EXACT: u8 = 3;
/// `certify`: nothing failed, but a kernel named on the command line (--kernel, --submission,
/// --library, --manifest) cannot run on this machine (no GPU, another architecture, a package
/// only its platform has, no torch), so nothing about it was judged. `bench`: nothing could be
/// timed on this machine.
pub const EXIT_UNAVAILABLE: u8 = 4;
pub const EXIT_REGRESSION: u8 = 5;
/// `preflight`: a step (the submission's compilation, ptxas) did not end within `--timeout`
/// and was killed; not bad input, so not 2: the same command may pass with more time.
pub const EXIT_TIMEOUT: u8 = 6;
/// `certify`: the harness failed its own check: the GPU reference differed from the CPU model
/// on some case (that case and the rest were judged by the CPU model, so the verdicts stand,
/// but the harness needs a fix).
pub const EXIT_HARNESS_ERROR: u8 = 7;

#[derive(Parser, Debug)]
#[command(
    name = "nvfp4-oracle",
    version,
    about = "Bit-exact NVFP4 reference model and correctness oracle for block-scaled GEMM kernels",
    long_about = "nvfp4-oracle models NVFP4 (e2m1 data, e4m3 block scales per 16 elements) exactly on \
the CPU, generates deterministic inputs and reference cases, and judges kernel outputs against \
per-element acceptance intervals.\n\nExit codes: 0 success, 1 failed verdict, 2 bad usage or input, 3 (certify --exact) \
correct within the intervals but not certified exact, 4 (certify) a kernel named on the command \
line cannot run on this machine, 5 (--baseline of certify, merge, bench, preflight) worse than the baseline, \
6 (preflight) a step did not end within --timeout and was killed, 7 (certify) a harness error: \
the GPU reference differed from the CPU model."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Write deterministic problem inputs (FP4 data, plain and permuted scales) to a safetensors file.
    Generate(generate::GenerateArgs),
    /// Write a case: inputs (generated, or yours with --inputs) plus the model's expected fp16
    /// output and acceptance interval.
    Reference(reference::ReferenceArgs),
    /// Judge a kernel's output (tensor `c`) against a reference case. Exit 0 pass, 1 fail, 2 bad input.
    Check(check::CheckArgs),
    /// The block-scaled family as the libraries ship it (NVFP4, MXFP4, MXFP8, FP8 and bf16
    /// operands; a global scale, a bias, fp16/bf16/fp32 output): write a case with its
    /// reference, or judge an output against one.
    #[command(subcommand)]
    ScaledGemm(scaled_gemm::ScaledGemmCommand),
    /// Fuzz kernels against the model, shrink and diagnose the first failure, write certificates.
    ///
    /// Exit codes: 0 every selected kernel certified; 1 some kernel failed; 2 bad usage or input
    /// (an unknown kernel, a broken submission, manifest or library); 3 (--exact only) none failed
    /// but some kernel is not certified exact; 4 none failed but a kernel named on the command
    /// line (--kernel, --submission, --library, --manifest) cannot run on this machine, so nothing
    /// about it was judged; 7 a harness error (the GPU reference differed from the CPU model).
    Certify(certify::CertifyArgs),
    /// Combine the certificates of `certify --shard I/N` into one per kernel.
    Merge(merge::MergeArgs),
    /// Check that a certificate is this oracle's (signature, model version, a whole campaign)
    /// and is of the kernel's files as they are now (source hash), and what its verdict is. Exit
    /// codes follow the verdict as certify's did: 0 every check holds and every kernel is
    /// certified; 1 a check fails or a kernel failed; 3 a schedule differs; 4 a certificate of a
    /// kernel that could not run.
    Verify(verify::VerifyArgs),
    /// What a kernel's compiled code shows before any GPU runs it: its MMA kind and scale block,
    /// a CTA pair, warp roles, TMA, the cluster, which variant it is.
    ///
    /// Exit codes: 0 no finding; 1 a finding (or the compiler or ptxas refused the code); 2 bad
    /// usage or input; 5 (--baseline) worse than the baseline; 6 a step (the compilation,
    /// ptxas) did not end within --timeout and was killed.
    Preflight(preflight::PreflightArgs),
    /// List every kernel under test, what it solves and whether it can run on this machine.
    Variants,
    /// Time certified kernels: built-in variants in process (CUDA events, L2 flushed, rotating
    /// inputs) against torch; external kernels in their worker, by the parent's batch clock.
    ///
    /// An external kernel's time per call is the parent's own clock over a batch: fresh inputs
    /// for every call (together at least 4x the L2, which the parent flushes after writing
    /// them), the kernel run on all of them in one request, less the same request served by a
    /// baseline worker without the kernel, divided by the calls; a batch lasts tens of
    /// milliseconds, the median of 3 batches is reported. Every timed call's output is judged.
    /// The per-call CUDA-event time (each call alone, L2 flushed first) is reported beside it
    /// as the cold-call latency, trusted only where it is not below the batch figure by more
    /// than 5%. Measured on the H100 (results/bench-clock/): no false alarm in 48 honest rows
    /// beside three other benches, the batch figure's spread under 1% in 15 of 16; a latency
    /// forged 10% low found, the reported time unmoved; a smaller forgery of the latency passes
    /// (by the honest latencies: up to 4-13% at the benchmark shapes, as a lone call is 0-9%
    /// slower than in a stream).
    ///
    /// Exit codes: 0 timed, 1 a timing not trusted (a wrong timed output, a latency below the
    /// batch figure, a crash or hang while timed) or nothing selected has a certificate to be
    /// timed on, 2 bad usage or input, 4 nothing could be timed on this machine (no GPU).
    Bench(bench::BenchArgs),
    /// Generate or verify the golden files (regression without a GPU).
    Golden(golden::GoldenArgs),
    /// Internal: serve one GPU kernel's launches for `certify` (one process per kernel): a
    /// built-in variant, or a symbol of a shared library (C ABI).
    #[command(hide = true)]
    GpuWorker {
        #[arg(long, required_unless_present_any = ["library", "timing_baseline"])]
        variant: Option<String>,
        #[arg(long, requires = "symbol", conflicts_with = "variant")]
        library: Option<std::path::PathBuf>,
        #[arg(long)]
        symbol: Option<String>,
        #[arg(long)]
        arch: Option<String>,
        /// Serve no kernel: the requests without the kernel that set a timing's clock.
        #[arg(long, conflicts_with_all = ["variant", "library"])]
        timing_baseline: bool,
    },
    /// Internal: run a worker inside the sandbox (crates/harness/src/sandbox/); `--probe` builds the
    /// sandbox, checks it from inside and says what holds.
    #[command(hide = true)]
    Sandbox {
        /// A directory the worker may write (bound in at the same path); repeatable.
        #[arg(long)]
        writable: Vec<std::path::PathBuf>,
        /// A directory the worker may read (bound in read-only at the same path); repeatable.
        #[arg(long)]
        readable: Vec<std::path::PathBuf>,
        /// A directory the worker must not see (covered by an empty tmpfs); repeatable.
        #[arg(long)]
        hide: Vec<std::path::PathBuf>,
        #[arg(long)]
        workdir: Option<std::path::PathBuf>,
        /// The worker's compiler cache, bound in read-write at the one path every worker sees.
        #[arg(long)]
        cache: Option<std::path::PathBuf>,
        #[arg(long)]
        probe: bool,
        /// The worker's program and arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

/// A named enum of the model that the command line takes, listed by the same `ALL` (or `NAMED`)
/// and `name` that parse it elsewhere: clap's help ("possible values") and its error for an
/// unknown value then say what the library accepts, with no list written out by hand to drift.
/// (clap's `ValueEnum` cannot be implemented here for the model's types.)
pub(crate) trait Named: Copy + Send + Sync + 'static {
    const ALL: &'static [Self];
    fn name(self) -> &'static str;
}

macro_rules! named_values {
    ($($type:ty => $list:expr),* $(,)?) => {$(
        impl Named for $type {
            const ALL: &'static [Self] = &$list;
            fn name(self) -> &'static str {
                <$type>::name(self)
            }
        }
    )*};
}

named_values!(
    nvfp4_model::model::bounds::KOrder => nvfp4_model::model::bounds::KOrder::ALL,
    nvfp4_model::problem::ProblemKind => nvfp4_model::problem::ProblemKind::ALL,
    nvfp4_model::problem::Distribution => nvfp4_model::problem::Distribution::NAMED,
    nvfp4_model::problem::scaled_gemm::OperandFormat => nvfp4_model::problem::scaled_gemm::OperandFormat::ALL,
    nvfp4_model::problem::scaled_gemm::OutDtype => nvfp4_model::problem::scaled_gemm::OutDtype::ALL,
    nvfp4_model::problem::scaled_gemm::Epilogue => nvfp4_model::problem::scaled_gemm::Epilogue::ALL,
);

/// clap's parser of a whole number from `min` to `max`, in words where it is not one: a
/// negative number, one past the range (a count that would overflow the campaign's
/// arithmetic), or no number at all. With `allow_negative_numbers` on the flag, `-1` reaches it
/// instead of reading as an unknown flag: `#[arg(allow_negative_numbers = true, value_parser =
/// whole::<usize>(0, MAX))]`.
pub(crate) fn whole<T>(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text: &str| {
        let range = format!("a whole number from {min} to {max}");
        let text = text.trim();
        if text.starts_with('-') {
            return Err(format!("{text} is negative: expected {range}"));
        }
        let value: u64 = text.parse().map_err(|_| {
            if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
                format!("{text} is too large: expected {range}")
            } else {
                format!("expected {range}")
            }
        })?;
        if value < min || value > max {
            return Err(format!("{value} is out of range: expected {range}"));
        }
        T::try_from(value).map_err(|_| format!("{value} is too large for this machine"))
    }
}

/// The most cases a campaign may be asked for: far beyond any run's time, and far from where
/// a count of cases could overflow.
pub(crate) const MAX_CASES: u64 = 100_000_000;

/// clap's parser of a [`Named`] enum: `#[arg(value_parser = named::<T>())]`.
#[derive(Clone)]
pub(crate) struct NamedParser<T>(std::marker::PhantomData<T>);

pub(crate) fn named<T: Named>() -> NamedParser<T> {
    NamedParser(std::marker::PhantomData)
}

impl<T: Named> clap::builder::TypedValueParser for NamedParser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<T, clap::Error> {
        let names = T::ALL.iter().map(|v| v.name());
        // clap's own parser of a list of names, for its error (the possible values, a
        // suggestion for a near miss).
        let text = clap::builder::PossibleValuesParser::new(names).parse_ref(cmd, arg, value)?;
        Ok(*T::ALL
            .iter()
            .find(|v| v.name() == text)
            .expect("clap accepted one of the names"))
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            T::ALL
                .iter()
                .map(|v| clap::builder::PossibleValue::new(v.name())),
        ))
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Generate(args) => generate::run(args),
        Command::Reference(args) => reference::run(args),
        Command::Check(args) => check::run(args),
        Command::ScaledGemm(command) => scaled_gemm::run(command),
        Command::Certify(args) => certify::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Preflight(args) => preflight::run(args),
        Command::Variants => variants::run(),
        Command::Bench(args) => bench::run(args),
        Command::Golden(args) => golden::run(args),
        Command::Sandbox {
            writable,
            readable,
            hide,
            workdir,
            cache,
            probe,
            command,
        } => {
            let args = nvfp4_harness::sandbox::LauncherArgs {
                paths: nvfp4_harness::sandbox::SandboxPaths {
                    writable,
                    readable,
                    hidden: hide,
                    workdir,
                    cache,
                    declared: Vec::new(),
                },
                probe,
                program: command[0].clone().into(),
                args: command[1..].to_vec(),
            };
            let code = nvfp4_harness::sandbox::launch(&args);
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(125)))
        }
        Command::GpuWorker {
            variant,
            library,
            symbol,
            arch,
            timing_baseline,
        } => {
            use nvfp4_harness::worker::serve::{serve, WorkerTarget};
            let target = match (variant, library, symbol) {
                _ if timing_baseline => WorkerTarget::Baseline,
                (Some(name), _, _) => WorkerTarget::Variant(name),
                (None, Some(path), Some(symbol)) => WorkerTarget::Library { path, symbol },
                _ => {
                    return Err(nvfp4_harness::Error::Usage(
                        "gpu-worker needs --variant or --library and --symbol".into(),
                    ))
                }
            };
            let arch = arch.as_deref().map(|text| {
                nvfp4_harness::kernels::manifest::ArchRequirement::parse(text)
                    .ok_or_else(|| nvfp4_harness::Error::Usage(format!("bad --arch '{text}'")))
            });
            serve(target, arch.transpose()?).map(|()| ExitCode::SUCCESS)
        }
    }
}
