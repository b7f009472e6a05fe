//! `nvfp4-oracle certify`: fuzz kernels against the model, shrink and diagnose the first failure,
//! write certificates.

use super::exit_code::{EXIT_FAIL, EXIT_NOT_EXACT};
use super::external::ExternalArgs;
use super::gate::{gate_reports, GateArgs};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use nvfp4_harness::certify::Shard;
use nvfp4_harness::certify::{certify_kernel, CampaignLimits, CertifyRequest, KernelOutcome};
use nvfp4_harness::certify::{ExactOutcome, Status};
use nvfp4_harness::error::{Error, Result};
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::worker::registry;
use nvfp4_model::model::bounds::KOrder;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CertifyArgs {
    /// Kernels to certify, by name or with `*` wildcards (e.g. 'cpu-mutant-*'); repeatable.
    /// Default: every kernel that can run here, deliberately broken ones (mutants, test kernels)
    /// excluded. See `nvfp4-oracle variants`.
    #[arg(long = "kernel")]
    pub kernels: Vec<String>,
    /// Random cases per kernel (after the golden and the fixed edge cases). Default: 2000 where
    /// the model's reference is computed on the GPU (see --reference), else 200.
    #[arg(long, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, super::value_parsers::MAX_CASES))]
    pub cases: Option<usize>,
    /// GPU kernels: cases drawn in the deployment regimes (decode, narrow-wide, wide N, tall M,
    /// many batches, deep K, outputs past 2^30, past 16,384 tiles, public models' shapes): one
    /// at each regime's wide end, the rest at modest shapes inside the regimes, in turn.
    /// Default: 100 where the model's reference is computed on the GPU, else one per regime.
    #[arg(long, value_name = "CASES", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, super::value_parsers::MAX_CASES))]
    pub regime_cases: Option<usize>,
    /// GPU kernels: cases drawn so that every pair of shape ranges (each of M, N, K and L cut
    /// into octaves: M 1-131071, N 1-262143, K 16-131071, L 1-511) holds at least one case that
    /// one GPU can run, then band triples (two octaves a dimension) up to this many cases in
    /// all; values at the places kernels branch (multiples of 64, 128, 256, 1024 and one either
    /// side, odd tile counts, K not a multiple of 64). The certificate lists the cells reached
    /// and those left (outside the kernel's support, past the per-case bound), and bench refuses
    /// a shape in a pair no case reached. Default: 700 where the model's reference is computed
    /// on the GPU, else 0 (the CPU model cannot judge them in time). See docs/coverage.md.
    #[arg(long, value_name = "CASES")]
    pub range_cases: Option<usize>,
    /// Also run a model's own feed-forward shapes, densely: a built-in name (llama-3-8b,
    /// llama-3-70b, llama-3.1-405b, mistral-7b, mixtral-8x7b, deepseek-v3, qwen2.5-7b,
    /// qwen2.5-72b, qwen3-235b-a22b; no network needed) or a Hugging Face config.json
    /// (hidden_size, intermediate_size, moe_intermediate_size, n_routed_experts /
    /// num_local_experts / num_experts). Gate and up are B1 and B2 (N the feed-forward width, K
    /// the hidden size); experts run as L, every power of two up to the model's count; M is
    /// 1-16 tokens, then every power of two and one either side up to --max-tokens. Shapes past
    /// what one GPU holds are listed in the certificate, not run. Repeatable.
    #[arg(long = "model", value_name = "NAME|CONFIG.JSON")]
    pub models: Vec<String>,
    /// The most tokens (per expert, for experts) a --model shape has: a full prefill.
    #[arg(long, value_name = "TOKENS", default_value_t = nvfp4_harness::certify::DEFAULT_MAX_TOKENS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_tokens: u64,
    /// Print the cases each kernel's campaign would run, one JSON object a line (index, m, n,
    /// k, l, dist, seed, class, source, regime, and for a range case the cell it was drawn
    /// for), and run nothing. With --reference gpu the plan is a GPU campaign's, whether or not
    /// this machine has a GPU. Give --seed to plan the campaign you will run.
    #[arg(long)]
    pub plan: bool,
    /// Stop drawing each kernel's random cases after this many seconds, even before --cases.
    /// The fixed cases (edge, golden, production-size, stagnation) always run first, whatever
    /// the budget: a campaign lasts at least their time (about 15 s for a CPU kernel on 2 cores;
    /// --quick skips the production-size ones).
    #[arg(long, value_name = "SECONDS", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, 10 * 365 * 86_400))]
    pub time_budget: Option<u64>,
    /// Seed of the case generator (every random, large and production-shape case's inputs);
    /// printed and recorded in the certificate, so any run can be repeated. Default: drawn from
    /// the operating system's random source, so that no kernel knows a campaign's inputs in
    /// advance. Shards of one campaign need one seed: --shard requires it.
    #[arg(long, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, u64::MAX))]
    pub seed: Option<u64>,
    /// K orders the intervals accept (see `reference --help`).
    #[arg(long, default_value = "contiguous", value_parser = super::value_parsers::named::<KOrder>())]
    pub k_order: KOrder,
    /// Draw only the competition's gpumode distribution (shows what its weak inputs miss).
    #[arg(long)]
    pub gpumode_only: bool,
    /// Skip the production-size cases (the benchmark and test shapes, the random large shapes,
    /// on a GPU the deployment-regime cases):
    /// a quick loop while writing a kernel, seconds instead of a minute or more on a GPU. The
    /// certificate says so, and bench will not time the kernel on it.
    #[arg(long)]
    pub quick: bool,
    /// Zero tolerance for kernels that declare their accumulation schedule (MMA adder model, K
    /// order, epilogue): every output inside the intervals must also equal, bit for bit, the
    /// replay of that schedule (a NaN matches any NaN; where the f64 epilogue is a near-tie
    /// either fp16 neighbour is accepted, and counted). Outcomes: certified exact; "correct
    /// within interval, schedule differs from declared" (status schedule-differs, with the
    /// first differing element, shrunk); or the usual interval failure. Default selection: the
    /// kernels that declare a schedule. A kernel named with --kernel that declares none is
    /// certified on the intervals only and reported "no schedule declared". Exit codes: 1 if any
    /// kernel failed the intervals, else 3 if any kernel is not certified exact (schedule
    /// differs, or none declared), else 0.
    #[arg(long)]
    pub exact: bool,
    /// GPU kernels: how many sampled cases each compute-sanitizer tool (memcheck, racecheck,
    /// synccheck, initcheck) runs, in a worker started under it; 0 skips the tools. A report
    /// (a shared-memory race, an out-of-bounds or uninitialized read, barrier misuse) fails the
    /// certificate, which quotes it, and so does a tool run that cannot complete (the kernel
    /// raised, crashed or hung under it) or a log that does not read as the tool's. Found on
    /// PATH, in the CUDA toolkit, or named by NVFP4_ORACLE_SANITIZER; where none is installed
    /// the certificate says so and bench still times it.
    #[arg(long, value_name = "CASES", default_value_t = 2, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, 10_000))]
    pub sanitize: usize,
    /// GPU kernels: how many sampled cases are run four times each (shared memory filled with
    /// 0x00 first; again; again with other work on the GPU; with shared memory filled with 0xFF
    /// first); any bit that moves fails the certificate ("nondeterministic output", or "reads shared memory it never
    /// wrote"), and so does a run that fails (raises, crashes, hangs) when checked. 0 skips it;
    /// a manifest's `nondeterministic = true` skips it and says so.
    #[arg(long, value_name = "CASES", default_value_t = 2, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, 10_000))]
    pub determinism: usize,
    #[command(flatten)]
    pub external: ExternalArgs,
    /// A golden directory (its manifest.json) whose small dual-GEMM cases every campaign runs
    /// first. Default: the golden set built into this binary, the same wherever it runs.
    #[arg(long, value_name = "DIR")]
    pub golden: Option<PathBuf>,
    /// Run no golden cases (only the edge and random ones).
    #[arg(long, conflicts_with = "golden")]
    pub no_golden: bool,
    /// Where certificates (JSON, Markdown) and minimal repros are written.
    #[arg(long, default_value = "certify-report")]
    pub report_dir: PathBuf,
    /// Run shard I of N: the campaign's cases whose index is I - 1 modulo N (the same seed
    /// draws the same cases in every shard, so the N shards together run the unsharded
    /// campaign). Certificates are written as `<kernel>.shard-I-of-N.json`; `nvfp4-oracle
    /// merge` combines them into `<kernel>.json`. Without it, a scheduler's variables are read:
    /// NVFP4_ORACLE_SHARD=I/N, a Slurm job array (SLURM_ARRAY_TASK_ID, _MIN and _COUNT), or a
    /// Kubernetes indexed Job (JOB_COMPLETION_INDEX with --shard-count). Compute-sanitizer and
    /// the determinism check run in shard 1.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// The number of shards where the scheduler gives only an index (JOB_COMPLETION_INDEX);
    /// also NVFP4_ORACLE_SHARD_COUNT.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(1, 1_000_000))]
    pub shard_count: Option<usize>,
    #[command(flatten)]
    pub gate: GateArgs,
    /// Spread the campaign over GPUs of this machine: `all`, or indices such as 0,1. Each GPU
    /// runs one shard in a process that sees only it; the shards are then merged into the
    /// report directory (their own certificates and logs stay under gpu-shards/).
    #[arg(long, value_name = "all|LIST", conflicts_with_all = ["shard", "shard_count"])]
    pub gpus: Option<String>,
    /// Where the model's answer and intervals are computed. `auto`: on the GPU when a kernel
    /// certified here is not a built-in CPU kernel and a GPU can be used, else the CPU model;
    /// `gpu`: on the GPU, or exit 4 saying why not; `cpu`: the CPU model alone. On the GPU every
    /// case that fits half its free memory is judged whole (the CPU model judges cases past 2^36
    /// products on sampled rows), by a kernel of the harness's own in this process (never in a
    /// worker), and the CPU model recomputes 3 rows of every such case: a single differing bit is
    /// a harness error (exit 7), and the rest of the run is judged by the CPU model.
    #[arg(long, value_enum, default_value_t = ReferenceChoice::Auto)]
    pub reference: ReferenceChoice,
    /// No progress bar (there is none either where stderr is not a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `certify --reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReferenceChoice {
    Auto,
    Gpu,
    Cpu,
}

/// Switches the GPU reference on as `choice` asks, and says whether it is on: `Err` (exit 4)
/// only for `gpu` where no GPU can be used.
fn choose_reference(
    choice: ReferenceChoice,
    kernels: &[Box<dyn KernelUnderTest>],
) -> Result<bool, String> {
    use nvfp4_harness::certify::use_gpu_reference;
    let wanted = match choice {
        ReferenceChoice::Cpu => false,
        ReferenceChoice::Gpu => true,
        ReferenceChoice::Auto => kernels.iter().any(|k| !k.name().starts_with("cpu-")),
    };
    if !wanted {
        return Ok(false);
    }
    match use_gpu_reference() {
        Ok(device) => {
            eprintln!(
                "reference: computed on {device}, whole, and checked against the CPU model on \
                 3 rows of every case"
            );
            Ok(true)
        }
        Err(why) if choice == ReferenceChoice::Gpu => Err(format!("--reference gpu: {why}")),
        Err(why) => {
            eprintln!("reference: the CPU model (the GPU reference cannot be used: {why})");
            Ok(false)
        }
    }
}

/// The golden cases every campaign runs first (`--golden`, `--no-golden`).
fn golden_cases(args: &CertifyArgs) -> Result<Vec<nvfp4_harness::certify::CaseSpec>> {
    Ok(match &args.golden {
        _ if args.no_golden => Vec::new(),
        Some(dir) => {
            nvfp4_harness::certify::golden_campaign_cases(&nvfp4_model::golden::read_manifest(dir)?)
        }
        None => nvfp4_harness::certify::builtin_golden_campaign_cases(),
    })
}

/// `certify --plan`: each kernel's cases as JSON Lines on stdout, what they reach of the shape
/// space on stderr.
fn print_plans(
    kernels: &[Box<dyn KernelUnderTest>],
    limits: &CampaignLimits,
    golden: &[nvfp4_harness::certify::CaseSpec],
    seed: u64,
) -> Result<ExitCode> {
    use nvfp4_harness::certify::CampaignPlan;
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for kernel in kernels {
        let mut coverage = nvfp4_harness::certify::Coverage::default();
        let plan = CampaignPlan::new(kernel.as_ref(), limits, golden, &mut coverage);
        let rows = plan.rows();
        let mut ranges = coverage.ranges.clone().unwrap_or_default();
        for row in &rows {
            let mut line = serde_json::to_value(row).expect("a plan row serializes");
            line["kernel"] = kernel.name().into();
            ranges.record(nvfp4_model::problem::Shape {
                m: row.m,
                n: row.n,
                k: row.k,
                l: row.l,
            });
            writeln!(out, "{line}").map_err(|err| Error::Usage(format!("stdout: {err}")))?;
        }
        eprintln!(
            "plan: {}: {} cases (seed {seed}), {} range cases; pairs of ranges reached {} of {} \
             ({} left: outside the support or past the per-case bound), band triples {} of {}",
            kernel.name(),
            rows.len(),
            ranges.planned_cases,
            ranges.pairs_covered,
            ranges.pairs_total,
            ranges.pairs_left.len(),
            ranges.triples_covered,
            ranges.triples_total,
        );
    }
    out.flush()
        .map_err(|err| Error::Usage(format!("stdout: {err}")))?;
    Ok(ExitCode::SUCCESS)
}

/// Whether `name` is what `pattern` names (`*` stands for any text); bench selects alike.
pub(super) fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            name.starts_with(prefix) && name[prefix.len()..].ends_with(rest.trim_start_matches('*'))
        }
    }
}

fn select(
    all: Vec<Box<dyn KernelUnderTest>>,
    patterns: &[String],
    exact: bool,
) -> Result<Vec<Box<dyn KernelUnderTest>>> {
    if patterns.is_empty() {
        return Ok(all
            .into_iter()
            .filter(|k| !k.is_deliberately_broken() && k.availability().is_ok())
            .filter(|k| !exact || k.schedule().is_some())
            .collect());
    }
    for pattern in patterns {
        if !all.iter().any(|k| matches(pattern, k.name())) {
            let names: Vec<&str> = all.iter().map(|k| k.name()).collect();
            return Err(nvfp4_model::Error::UnknownName {
                what: "kernel",
                given: pattern.clone(),
                expected: names.join(", "),
            }
            .into());
        }
    }
    Ok(all
        .into_iter()
        .filter(|k| patterns.iter().any(|p| matches(p, k.name())))
        .collect())
}

pub fn run(args: CertifyArgs) -> Result<ExitCode> {
    // Before any worker starts: this process's memory out of a worker's reach, and the key that
    // signs certificates made (so that every sandbox hides it).
    nvfp4_harness::sandbox::protect_parent();
    nvfp4_harness::certify::ensure_key()?;
    let external = args.external.kernels()?;
    // Per external kernel, the preflight that reads its code where it cannot run.
    let preflights: Vec<(String, String)> = external
        .iter()
        .filter_map(|k| Some((k.name().to_string(), k.preflight()?.to_string())))
        .collect();
    let external: Vec<Box<dyn KernelUnderTest>> = external
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect();
    // External kernels alone unless built-in ones are asked for with --kernel too.
    let explicit = !external.is_empty() || !args.kernels.is_empty();
    let mut kernels = if external.is_empty() || !args.kernels.is_empty() {
        select(registry(), &args.kernels, args.exact)?
    } else {
        Vec::new()
    };
    let external_names: Vec<String> = external.iter().map(|k| k.name().to_string()).collect();
    kernels.extend(external);
    // Before the campaign: a baseline that cannot be read is known now, not after it.
    let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
    args.gate.check_baseline(&names)?;
    // Drawn per run, not read from the clock: a campaign's inputs follow from its seed, and a
    // kernel must not be able to know them in advance (the time of a run is easy to guess).
    let seed = args
        .seed
        .unwrap_or_else(nvfp4_harness::secrets::unpredictable_seed);
    // Before the campaign: a report directory that cannot be written is known now (a plan
    // writes none).
    if !args.plan {
        nvfp4_harness::certify::check_dir_writable(&args.report_dir)?;
    }
    if let Some(list) = &args.gpus {
        let gpus = super::certify_gpus::gpu_list(list)?;
        return super::certify_gpus::run(&gpus, seed, &args.report_dir, |shards| {
            super::merge::MergeArgs {
                shards,
                report_dir: args.report_dir.clone(),
                gate: args.gate.clone(),
            }
        });
    }
    let shard = match &args.shard {
        Some(text) => Some(Shard::parse(text)?),
        None => Shard::from_env(|name| {
            if name == nvfp4_harness::certify::SHARD_COUNT_ENV {
                if let Some(count) = args.shard_count {
                    return Some(count.to_string());
                }
            }
            std::env::var(name).ok()
        })?,
    };
    if shard.is_some() && args.seed.is_none() {
        // Each shard would draw its own seed, and so the cases of another campaign.
        return Err(Error::Usage(
            "a shard needs --seed: every shard of a campaign must draw the same cases. Draw one \
             seed for the whole campaign (e.g. `od -An -N8 -tu8 /dev/urandom`) and give it to \
             every shard; a seed fixed once and reused makes every campaign's inputs public"
                .into(),
        ));
    }
    let models = args
        .models
        .iter()
        .map(|given| {
            nvfp4_harness::certify::load_model(given)
                .map(|config| config.shapes(args.max_tokens as usize))
                .map_err(Error::Usage)
        })
        .collect::<Result<Vec<_>>>()?;
    if !args.plan {
        for kernel in &kernels {
            let stem = shard.map_or(kernel.name().to_string(), |s| s.file_stem(kernel.name()));
            nvfp4_harness::certify::refuse_another_kernels(
                &args.report_dir,
                &stem,
                kernel.problem().name(),
            )?;
        }
    }
    let on_gpu = if args.plan && args.reference != ReferenceChoice::Auto {
        // A plan runs nothing: it is a GPU campaign's wherever it is asked for.
        args.reference == ReferenceChoice::Gpu
    } else {
        match choose_reference(args.reference, &kernels) {
            Ok(on_gpu) => on_gpu,
            Err(why) => {
                eprintln!("error: {why}");
                return Ok(ExitCode::from(super::exit_code::EXIT_UNAVAILABLE));
            }
        }
    };
    use nvfp4_harness::certify::{DEFAULT_CASES, DEFAULT_GPU_CASES};
    let cases = args.cases.unwrap_or(if on_gpu {
        DEFAULT_GPU_CASES
    } else {
        DEFAULT_CASES
    });
    use nvfp4_harness::certify::{DEFAULT_CPU_REGIME_CASES, DEFAULT_GPU_REGIME_CASES};
    let regime_cases = args.regime_cases.unwrap_or(if on_gpu {
        DEFAULT_GPU_REGIME_CASES
    } else {
        DEFAULT_CPU_REGIME_CASES
    });
    use nvfp4_harness::certify::DEFAULT_GPU_RANGE_CASES;
    let range_cases = args
        .range_cases
        .unwrap_or(if on_gpu { DEFAULT_GPU_RANGE_CASES } else { 0 });
    let limits = CampaignLimits {
        shard,
        cases,
        range_cases,
        models,
        regime_cases,
        time_budget: args.time_budget.map(Duration::from_secs),
        seed,
        order: args.k_order,
        only_gpumode: args.gpumode_only,
        exact: args.exact,
        quick: args.quick,
    };
    if args.plan {
        return print_plans(&kernels, &limits, &golden_cases(&args)?, seed);
    }
    if nvfp4_harness::worker::registry()
        .iter()
        .all(|k| k.name().starts_with("cpu-"))
    {
        eprintln!("note: no GPU backend in this build; certifying CPU kernels only (a GPU run adds the hopper-* variants)");
    }
    eprintln!(
        "certifying {} kernel(s), {} cases each (and, for a GPU kernel, {regime_cases} in deployment regimes), seed {seed} (repeat with --seed {seed}){}{}{}{}",
        kernels.len(),
        cases,
        shard.map_or(String::new(), |s| format!(", shard {s}")),
        if args.gpumode_only {
            ", gpumode distribution only"
        } else {
            ""
        },
        args.time_budget.map_or(String::new(), |budget| format!(
            ", random cases for at most {budget} s (the fixed cases always run first)"
        )),
        if args.exact {
            ", exact: outputs also replayed from each kernel's declared schedule"
        } else {
            ""
        }
    );
    let golden = golden_cases(&args)?;
    let mut any_failed = false;
    let mut any_not_exact = false;
    let mut any_unavailable = false;
    let mut unusable = Vec::new();
    let mut written = 0;
    let mut certificates = Vec::new();
    for kernel in &kernels {
        let bar = ProgressBar::new(cases as u64);
        bar.set_style(
            ProgressStyle::with_template("{prefix:>28} [{bar:30}] {pos}/{len} cases {elapsed}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(kernel.name().to_string());
        // On a terminal (indicatif draws nothing elsewhere), unless --quiet; ticking, so that
        // a long case (a production shape, a shrink) is seen to run.
        if args.quiet {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        } else {
            bar.enable_steady_tick(Duration::from_millis(500));
        }
        let request = CertifyRequest {
            limits: limits.clone(),
            golden: &golden,
            report_dir: &args.report_dir,
            sanitize_cases: args.sanitize,
            determinism_cases: args.determinism,
            // An external kernel's worker is always started: it reports a broken submission
            // or library on any machine. A built-in kernel that cannot run here is not started.
            start_when_unavailable: external_names.iter().any(|n| n == kernel.name()),
            preflight: preflights
                .iter()
                .find(|(name, _)| name == kernel.name())
                .map(|(_, command)| command.as_str()),
            write: true,
        };
        let outcome = certify_kernel(kernel.as_ref(), &request, |done, planned| {
            bar.set_length(planned as u64);
            bar.set_position(done as u64);
        });
        bar.finish_and_clear();
        let certificate = match outcome? {
            KernelOutcome::Unusable(reason) => {
                eprintln!("error: {}: {reason}", kernel.name());
                unusable.push(kernel.name().to_string());
                continue;
            }
            KernelOutcome::Certificate(certificate) => *certificate,
        };
        any_unavailable |= certificate.unavailable_reason.is_some();
        if let Some(kept) = &certificate.kept_instead {
            eprintln!("note: {}: {kept}", kernel.name());
        }
        if certificates.is_empty() {
            println!("| kernel | status | cases | time (s) | minimal repro | diagnosis |");
            println!("|---|---|---|---|---|---|");
        }
        written += usize::from(certificate.kept_instead.is_none());
        if let Some(contract) = certificate.failure.as_ref().and_then(|f| {
            f.verdict
                .starts_with("the kernel's output breaks the contract")
                .then(|| f.verdict.clone())
        }) {
            eprintln!("error: {}: {contract}", kernel.name());
            unusable.push(kernel.name().to_string());
        }
        any_failed |= certificate.status == Status::Failed;
        let exact_outcome = certificate.exact.as_ref().map(|e| e.outcome);
        any_not_exact |= matches!(
            exact_outcome,
            Some(ExactOutcome::ScheduleDiffers | ExactOutcome::NoScheduleDeclared)
        );
        let (repro, diagnosis) = match (&certificate.failure, &certificate.exact) {
            (Some(f), _) => (
                format!("{} {}", f.minimal_case.shape, f.minimal_case.dist.name()),
                f.diagnosis.clone(),
            ),
            (None, Some(exact)) if exact.mismatch.is_some() => {
                let m = exact.mismatch.as_ref().expect("checked");
                (
                    format!(
                        "{} {} seed {}",
                        m.minimal_case.shape,
                        m.minimal_case.dist.name(),
                        m.minimal_case.seed
                    ),
                    format!(
                        "{}: first difference at {}; the first differing output matches: {}",
                        ExactOutcome::ScheduleDiffers.describe(),
                        m.difference,
                        if m.matching_schedules.is_empty() {
                            "no modelled schedule".to_string()
                        } else {
                            m.matching_schedules.join("; ")
                        }
                    ),
                )
            }
            (None, Some(exact)) => (
                "-".to_string(),
                format!(
                    "{}{}",
                    exact.outcome.describe(),
                    exact
                        .schedule_name
                        .as_ref()
                        .map_or(String::new(), |s| format!(
                            " ({s}; {} elements, {} ambiguous)",
                            exact.coverage.elements_compared, exact.coverage.ambiguous_elements
                        ))
                ),
            ),
            (None, None) => (
                "-".to_string(),
                certificate.unavailable_reason.clone().unwrap_or_else(|| {
                    let findings = certificate.check_findings();
                    if findings.is_empty() {
                        "-".to_string()
                    } else {
                        findings.join("; ")
                    }
                }),
            ),
        };
        // In words, as verify and the gate say them.
        let status = match exact_outcome {
            Some(ExactOutcome::NoScheduleDeclared) => {
                "certified (no schedule declared)".to_string()
            }
            _ => nvfp4_harness::certify::verdict(&certificate).0.to_string(),
        };
        println!(
            "| {} | {status} | {} | {:.1} | {repro} | {diagnosis} |",
            certificate.kernel, certificate.coverage.cases, certificate.elapsed_seconds
        );
        certificates.push(certificate);
    }
    let any_worse = gate_reports(&args.gate, &certificates)?;
    if written > 0 {
        eprintln!(
            "{written} certificate(s) written to {}",
            args.report_dir.display()
        );
    } else if !certificates.is_empty() {
        eprintln!("no certificate written: the ones already in the report directory were kept");
    } else {
        eprintln!("no certificate written: no kernel could be started");
    }
    if any_unavailable && explicit {
        eprintln!("note: some kernel named on the command line cannot run on this machine (exit 4 unless a worse outcome)");
    }
    let engine = nvfp4_harness::certify::reference_engine_report();
    if engine.device.is_some() {
        eprintln!(
            "reference: {} case(s) computed whole on the GPU in {:.1} s ({} elements), {} \
             element(s) recomputed by the CPU model in {:.1} s, {} difference(s){}",
            engine.cases,
            engine.gpu_seconds,
            engine.elements,
            engine.elements_cross_checked,
            engine.cross_check_seconds,
            engine.mismatches.len(),
            match engine.declined {
                0 => String::new(),
                n => format!("; {n} case(s) too large for it, computed by the CPU model"),
            }
        );
    }
    for mismatch in &engine.mismatches {
        eprintln!("error: harness error: {mismatch}");
    }
    Ok(if !unusable.is_empty() {
        ExitCode::from(super::exit_code::EXIT_BAD_INPUT)
    } else if !engine.mismatches.is_empty() {
        ExitCode::from(super::exit_code::EXIT_HARNESS_ERROR)
    } else if any_failed {
        ExitCode::from(EXIT_FAIL)
    } else if any_worse {
        ExitCode::from(super::exit_code::EXIT_REGRESSION)
    } else if any_not_exact {
        ExitCode::from(EXIT_NOT_EXACT)
    } else if any_unavailable && explicit {
        ExitCode::from(super::exit_code::EXIT_UNAVAILABLE)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::{matches, select};
    use half::f16;
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};

    /// A registry entry as a GPU machine would list it: a name, whether it is deliberately
    /// broken, whether it can run here.
    struct Listed(&'static str, bool, bool);

    impl KernelUnderTest for Listed {
        fn name(&self) -> &str {
            self.0
        }
        fn is_deliberately_broken(&self) -> bool {
            self.1
        }
        fn availability(&self) -> Result<(), nvfp4_harness::kernels::Unavailable> {
            if self.2 {
                Ok(())
            } else {
                Err("no GPU".into())
            }
        }
        fn run(&self, _: &KernelCase, _: &mut [f16]) -> Result<(), KernelFailure> {
            Ok(())
        }
    }

    fn gpu_registry() -> Vec<Box<dyn KernelUnderTest>> {
        [
            Listed("cpu-tiled", false, true),
            Listed("cpu-mutant-gemm-only", true, true),
            Listed("hopper-baseline", false, true),
            Listed("hopper-test-spin", true, true),
            Listed("hopper-test-oob-write", true, true),
            Listed("hopper-test-persistent-7-ctas", true, true),
            Listed("blackwell-baseline", false, false),
        ]
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect()
    }

    fn names(kernels: &[Box<dyn KernelUnderTest>]) -> Vec<&str> {
        kernels.iter().map(|k| k.name()).collect()
    }

    #[test]
    fn a_bare_certify_selects_no_deliberately_broken_kernel() {
        let chosen = select(gpu_registry(), &[], false).unwrap();
        assert_eq!(names(&chosen), ["cpu-tiled", "hopper-baseline"]);
        // Named, a broken kernel is certified all the same.
        let named = select(gpu_registry(), &["hopper-test-*".into()], false).unwrap();
        assert_eq!(names(&named).len(), 3);
    }

    #[test]
    fn wildcards() {
        assert!(matches("cpu-mutant-*", "cpu-mutant-gemm-only"));
        assert!(matches("*", "cpu-tiled"));
        assert!(matches("cpu-tiled", "cpu-tiled"));
        assert!(!matches("cpu-mutant-*", "cpu-tiled"));
    }
}
