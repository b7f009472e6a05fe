//! The command-line interface: one module per subcommand, each parsing its arguments, calling
//! the harness and the model, printing, and returning an exit code ([`exit_code`]; the table is
//! docs/reference/exit-codes.md).

mod bench;
mod certify;
mod check;
pub mod exit_code;
mod external;
mod gate;
mod generate;
mod golden;
mod merge;
mod preflight;
mod progress;
mod reference;
mod scaled_gemm;
mod value_parsers;
mod variants;
mod verify;

use clap::{Parser, Subcommand};
use nvfp4_harness::{Error, Result};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "nvfp4-oracle",
    version,
    about = "Bit-exact NVFP4 reference model and correctness oracle for block-scaled GEMM kernels",
    long_about = "nvfp4-oracle models NVFP4 (e2m1 data, e4m3 block scales per 16 elements) exactly on \
the CPU, generates deterministic inputs and reference cases, and judges kernel outputs against \
per-element acceptance intervals.\n\nExit codes: docs/reference/exit-codes.md."
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
    /// Judge a kernel's output (tensor `c`) against a reference case (exit codes:
    /// docs/reference/exit-codes.md).
    Check(check::CheckArgs),
    /// The block-scaled family as the libraries ship it (NVFP4, MXFP4, MXFP8, FP8 and bf16
    /// operands; a global scale, a bias, fp16/bf16/fp32 output): write a case with its
    /// reference, or judge an output against one.
    #[command(subcommand)]
    ScaledGemm(scaled_gemm::ScaledGemmCommand),
    /// Fuzz kernels against the model, shrink and diagnose the first failure, write certificates.
    ///
    /// Exit codes: docs/reference/exit-codes.md.
    Certify(certify::CertifyArgs),
    /// Combine the certificates of `certify --shard I/N` into one per kernel.
    Merge(merge::MergeArgs),
    /// Check that a certificate is this oracle's (signature, model version, a whole campaign)
    /// and is of the kernel's files as they are now (source hash), and what its verdict is. Exit
    /// codes follow the verdict as certify's did (docs/reference/exit-codes.md).
    Verify(verify::VerifyArgs),
    /// What a kernel's compiled code shows before any GPU runs it: its MMA kind and scale block,
    /// a CTA pair, warp roles, TMA, the cluster, which variant it is.
    ///
    /// Exit codes: docs/reference/exit-codes.md.
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
    /// milliseconds, the median of 3 batches is reported. Every timed call's output is judged
    /// (a dual GEMM's batches are made and judged on the GPU, from the parent's own copy of
    /// each call's inputs). The cold-call latency is the parent's too: its clock over
    /// lone-call batches (each call alone, the L2 flushed and the device synchronized before
    /// it and synchronized after it, fresh inputs), less the baseline's same request, over the
    /// calls, the fastest of 3 (of 6, 3 more on fresh inputs, before a finding against the
    /// events stands). The kernel's own CUDA-event latency (calls one at a time) is a
    /// cross-check: not trusted where it lies below the parent's lone call by more than 1.75%
    /// of it plus 2 us (C-ABI libraries only: a Python worker's lone loop proved too noisy),
    /// or below the batch figure by more than 5%. Measured on the H100 (results/bench-clock/,
    /// the four examples 10 times each beside three other benches): the batch figure's spread
    /// across runs 0.6-1.5% in 15 of 16 rows (5.6% in one); 1 "timing not trusted" in 156
    /// honest rows. Forged events move only the latency column: 5% was found at 6 of 9
    /// shapes tried, 20 us at 3 of 9 (the library's honest gap to its lone call runs to 16
    /// us; a Python worker's 20 us is under the 5% rule at every benchmark call).
    ///
    /// Exit codes: docs/reference/exit-codes.md.
    Bench(bench::BenchArgs),
    /// Generate or verify the golden files (regression without a GPU).
    Golden(golden::GoldenArgs),
    /// Internal: serve one GPU kernel's launches for `certify` (one process per kernel): a
    /// built-in variant, or a symbol of a shared library (C ABI). Its arguments are the
    /// harness's (`WorkerTarget::worker_args`), which writes them.
    #[command(hide = true)]
    GpuWorker {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Internal: run a worker inside the sandbox (crates/harness/src/sandbox/); `--probe` builds the
    /// sandbox, checks it from inside and says what holds. Its arguments are the harness's
    /// (`sandbox::launcher_args`), which writes them.
    #[command(hide = true)]
    Sandbox {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
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
        Command::Sandbox { args } => {
            let args = nvfp4_harness::sandbox::LauncherArgs::parse(&args).map_err(Error::Usage)?;
            let code = nvfp4_harness::sandbox::launch(&args);
            Ok(ExitCode::from(u8::try_from(code).unwrap_or(125)))
        }
        Command::GpuWorker { args } => {
            use nvfp4_harness::worker::{serve, WorkerTarget};
            let (target, arch) = WorkerTarget::parse_worker_args(&args)?;
            serve(target, arch).map(|()| ExitCode::SUCCESS)
        }
    }
}

/// Ends the process as a Unix tool ends when the reader of its stdout has gone (`certify --plan |
/// head -1`): killed by SIGPIPE, with nothing printed, its private temporary folder removed.
pub fn end_on_closed_stdout() -> ! {
    nvfp4_harness::private_tmp::remove();
    // SAFETY: restoring the default disposition and raising the signal in this process only;
    // nothing else runs after it.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Where the signal could not end the process: the status a shell gives it.
    std::process::exit(128 + libc::SIGPIPE);
}

/// A write to stdout that failed: a closed pipe ends the process quietly
/// ([`end_on_closed_stdout`]); any other failure is an error.
pub(crate) fn stdout_error(err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        end_on_closed_stdout();
    }
    Error::Usage(format!("stdout: {err}"))
}
