//! `nvfp4-oracle certify`: fuzz kernels against the model, shrink and diagnose the first failure,
//! write certificates. The sequence for one kernel is the harness's
//! ([`nvfp4_harness::certify::certify_kernel`]); this module parses, selects the kernels, prints
//! one row per certificate and sums the outcomes into the exit code.

mod gpus;
mod help;
mod outcomes;
mod plan;
mod reference_choice;
mod select;

use super::external::ExternalArgs;
use super::gate::{gate_reports, GateArgs};
use clap::Args;
use nvfp4_harness::certify::{
    certify_kernel, CampaignLimits, CaseSpec, Certificate, CertifyRequest, KernelOutcome,
    ModelShapes, Shard,
};
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::{Error, Result};
use nvfp4_model::model::bounds::KOrder;
use outcomes::Outcomes;
use reference_choice::ReferenceChoice;
pub(crate) use select::{matches, selects};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CertifyArgs {
    /// Kernels to certify, by name or with `*` wildcards (e.g. 'cpu-mutant-*'); repeatable.
    /// Default: every kernel that can run here, deliberately broken ones (mutants, test kernels)
    /// excluded. See `nvfp4-oracle variants`.
    #[arg(long = "kernel")]
    pub kernels: Vec<String>,
    #[arg(long, help = help::cases(), allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, super::value_parsers::MAX_CASES))]
    pub cases: Option<usize>,
    #[arg(long, help = help::regime_cases(), value_name = "CASES", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, super::value_parsers::MAX_CASES))]
    pub regime_cases: Option<usize>,
    #[arg(long, help = help::range_cases(), value_name = "CASES")]
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
    /// certified on the intervals only and reported "no schedule declared". A kernel not
    /// certified exact is exit 3 (docs/reference/exit-codes.md).
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
    /// worker), and the CPU model recomputes 3 rows x 64 columns x 4 batches of every such
    /// case: a single differing bit is a harness error (exit 7), and the rest of the run is
    /// judged by the CPU model.
    #[arg(long, value_enum, default_value_t = ReferenceChoice::Auto)]
    pub reference: ReferenceChoice,
    /// No progress bar, and where stderr is not a terminal (a CI log) none of the lines that
    /// stand for it there (one every 15 s: the kernel, its cases done, the seconds).
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

impl CertifyArgs {
    /// The campaign these arguments ask for: the defaults for where the reference is computed
    /// (`on_gpu`), with what was given in their place.
    fn limits(
        &self,
        on_gpu: bool,
        seed: u64,
        shard: Option<Shard>,
        models: Vec<ModelShapes>,
    ) -> CampaignLimits {
        let defaults = CampaignLimits::defaults(on_gpu, seed);
        CampaignLimits {
            shard,
            cases: self.cases.unwrap_or(defaults.cases),
            range_cases: self.range_cases.unwrap_or(defaults.range_cases),
            models,
            regime_cases: self.regime_cases.unwrap_or(defaults.regime_cases),
            time_budget: self.time_budget.map(Duration::from_secs),
            order: self.k_order,
            only_gpumode: self.gpumode_only,
            exact: self.exact,
            quick: self.quick,
            ..defaults
        }
    }

    /// The shapes of each `--model`, up to `--max-tokens`.
    fn models(&self) -> Result<Vec<ModelShapes>> {
        self.models
            .iter()
            .map(|given| {
                nvfp4_harness::certify::load_model(given)
                    .map(|config| config.shapes(self.max_tokens as usize))
                    .map_err(Error::Usage)
            })
            .collect()
    }

    /// `--shard`, else a scheduler's variables; a shard needs `--seed`.
    fn shard(&self) -> Result<Option<Shard>> {
        let shard = match &self.shard {
            Some(text) => Some(Shard::parse(text)?),
            None => Shard::from_env(|name| {
                if name == nvfp4_harness::certify::SHARD_COUNT_ENV {
                    if let Some(count) = self.shard_count {
                        return Some(count.to_string());
                    }
                }
                std::env::var(name).ok()
            })?,
        };
        if shard.is_some() && self.seed.is_none() {
            // Each shard would draw its own seed, and so the cases of another campaign.
            return Err(Error::Usage(
                "a shard needs --seed: every shard of a campaign must draw the same cases. Draw one \
                 seed for the whole campaign (e.g. `od -An -N8 -tu8 /dev/urandom`) and give it to \
                 every shard; a seed fixed once and reused makes every campaign's inputs public"
                    .into(),
            ));
        }
        Ok(shard)
    }

    /// Whether the model's reference is computed on the GPU; `Err` (exit 4) where `--reference
    /// gpu` cannot be had.
    fn reference_on_gpu(&self, kernels: &[Box<dyn KernelUnderTest>]) -> Result<bool, String> {
        if self.plan && self.reference != ReferenceChoice::Auto {
            // A plan runs nothing: it is a GPU campaign's wherever it is asked for.
            return Ok(self.reference == ReferenceChoice::Gpu);
        }
        reference_choice::choose_reference(self.reference, kernels)
    }
}

/// The golden cases every campaign runs first (`--golden`, `--no-golden`).
fn golden_cases(args: &CertifyArgs) -> Result<Vec<CaseSpec>> {
    Ok(match &args.golden {
        _ if args.no_golden => Vec::new(),
        Some(dir) => {
            nvfp4_harness::certify::golden_campaign_cases(&nvfp4_model::golden::read_manifest(dir)?)
        }
        None => nvfp4_harness::certify::builtin_golden_campaign_cases(),
    })
}

/// The kernels a run certifies: the external ones (`--submission`, `--library`, `--manifest`)
/// alone unless built-in ones are asked for with `--kernel` too.
struct Selection {
    kernels: Vec<Box<dyn KernelUnderTest>>,
    /// Per external kernel, the preflight that reads its code where it cannot run.
    preflights: Vec<(String, String)>,
    external: Vec<String>,
    /// Kernels were named on the command line: one that cannot run here is exit 4.
    explicit: bool,
}

impl Selection {
    fn of(args: &CertifyArgs) -> Result<Selection> {
        let external = args.external.kernels()?;
        let preflights = external
            .iter()
            .filter_map(|k| Some((k.name().to_string(), k.preflight()?.to_string())))
            .collect();
        let external_names = external.iter().map(|k| k.name().to_string()).collect();
        let explicit = !external.is_empty() || !args.kernels.is_empty();
        let mut kernels = if external.is_empty() || !args.kernels.is_empty() {
            select::select(nvfp4_harness::worker::registry(), &args.kernels, args.exact)?
        } else {
            Vec::new()
        };
        kernels.extend(
            external
                .into_iter()
                .map(|k| Box::new(k) as Box<dyn KernelUnderTest>),
        );
        Ok(Selection {
            kernels,
            preflights,
            external: external_names,
            explicit,
        })
    }

    /// What the harness is asked for `kernel`.
    fn request<'a>(
        &'a self,
        kernel: &dyn KernelUnderTest,
        args: &'a CertifyArgs,
        limits: &CampaignLimits,
        golden: &'a [CaseSpec],
    ) -> CertifyRequest<'a> {
        CertifyRequest {
            limits: limits.clone(),
            golden,
            report_dir: &args.report_dir,
            sanitize_cases: args.sanitize,
            determinism_cases: args.determinism,
            // An external kernel's worker is always started: it reports a broken submission
            // or library on any machine. A built-in kernel that cannot run here is not started.
            start_when_unavailable: self.external.iter().any(|n| n == kernel.name()),
            preflight: self
                .preflights
                .iter()
                .find(|(name, _)| name == kernel.name())
                .map(|(_, command)| command.as_str()),
            write: true,
        }
    }
}

/// The run's first line on stderr: what is certified, how, and the seed that repeats it.
fn announce(
    args: &CertifyArgs,
    kernels: &[Box<dyn KernelUnderTest>],
    limits: &CampaignLimits,
    on_gpu: bool,
) {
    if nvfp4_harness::worker::registry()
        .iter()
        .all(|k| k.name().starts_with("cpu-"))
    {
        eprintln!("note: no GPU backend in this build; certifying CPU kernels only (a GPU run adds the hopper-* variants)");
    }
    let seed = limits.seed;
    eprintln!(
        "certifying {} kernel(s), {} cases each{}, seed {seed} (repeat with --seed {seed}){}{}{}{}",
        kernels.len(),
        limits.cases,
        // --quick skips every production-size case, the regimes' with them.
        regime_clause(
            kernels,
            if limits.quick { 0 } else { limits.regime_cases },
            on_gpu
        ),
        limits
            .shard
            .map_or(String::new(), |s| format!(", shard {s}")),
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
}

/// What the first line says of deployment-regime cases: only GPU kernels draw them, and as many
/// as this run will draw (fewer where the CPU model is the reference, none under --quick).
fn regime_clause(
    kernels: &[Box<dyn KernelUnderTest>],
    regime_cases: usize,
    on_gpu: bool,
) -> String {
    let gpu_kernels = kernels.iter().filter(|k| k.runs_on_gpu()).count();
    match (gpu_kernels, regime_cases) {
        (0, _) | (_, 0) => String::new(),
        _ if on_gpu => format!(" (and, for each GPU kernel, {regime_cases} in deployment regimes)"),
        _ => format!(
            " (and, for each GPU kernel, {regime_cases} in deployment regimes: one per regime, \
             the CPU model being the reference)"
        ),
    }
}

/// Refuses a kernel whose certificate in `dir` is another kernel's of the same name, then locks
/// each kernel's certificate there ([`nvfp4_harness::certify::ReportLock`]).
fn claim_certificates(
    kernels: &[Box<dyn KernelUnderTest>],
    dir: &std::path::Path,
    shard: Option<Shard>,
) -> Result<Vec<nvfp4_harness::certify::ReportLock>> {
    let mut locks = Vec::new();
    for kernel in kernels {
        let stem = shard.map_or(kernel.name().to_string(), |s| s.file_stem(kernel.name()));
        let source = kernel.source_path();
        nvfp4_harness::certify::refuse_another_kernels(
            dir,
            &stem,
            kernel.problem().name(),
            source.as_deref(),
        )?;
        locks.push(nvfp4_harness::certify::ReportLock::take(dir, &stem)?);
    }
    Ok(locks)
}

/// One kernel's campaign, with its bar on a terminal, else (unless `quiet`) a line every 15 s.
fn certify_with_progress(
    kernel: &dyn KernelUnderTest,
    request: &CertifyRequest,
    quiet: bool,
) -> Result<KernelOutcome> {
    let planned = request.limits.cases;
    let bar = super::progress::cases_bar(kernel.name(), planned, quiet);
    let counts = std::sync::Arc::new([AtomicUsize::new(0), AtomicUsize::new(planned)]);
    let _notes = (!quiet && !super::progress::stderr_is_terminal()).then(|| {
        let (counts, name) = (counts.clone(), kernel.name().to_string());
        super::progress::Heartbeat::start(move |elapsed| {
            format!(
                "certify: {name}: {}/{} cases, {} s",
                counts[0].load(Ordering::Relaxed),
                counts[1].load(Ordering::Relaxed),
                elapsed.as_secs()
            )
        })
    });
    let outcome = certify_kernel(kernel, request, |done, planned| {
        bar.set_length(planned as u64);
        bar.set_position(done as u64);
        counts[0].store(done, Ordering::Relaxed);
        counts[1].store(planned, Ordering::Relaxed);
    });
    bar.finish_and_clear();
    outcome
}

pub fn run(args: CertifyArgs) -> Result<ExitCode> {
    nvfp4_harness::trace_step("certify: started");
    // Before any worker starts: this process's memory out of a worker's reach, and the key that
    // signs certificates made (so that every sandbox hides it).
    nvfp4_harness::sandbox::protect_parent();
    nvfp4_harness::certify::ensure_key()?;
    // Before any parallel work: this campaign's share of the host's cores.
    let cores = nvfp4_harness::cores::use_budget();
    if cores.shared {
        eprintln!("cores: {}", cores.why);
    }
    let selection = Selection::of(&args)?;
    nvfp4_harness::trace_step("certify: kernels selected");
    // Before the campaign: a baseline that cannot be read is known now, not after it.
    let names: Vec<&str> = selection.kernels.iter().map(|k| k.name()).collect();
    args.gate.check_baseline(&names)?;
    // Drawn per run, not read from the clock: a campaign's inputs follow from its seed, and a
    // kernel must not be able to know them in advance (the time of a run is easy to guess).
    let seed = args
        .seed
        .unwrap_or_else(nvfp4_harness::secrets::unpredictable_seed);
    // The command line read whole before the report directory is made: a usage error leaves
    // no empty folder behind.
    let (shard, models) = match args.gpus {
        Some(_) => (None, Vec::new()),
        None => (args.shard()?, args.models()?),
    };
    // Before the campaign: a report directory that cannot be written is known now (a plan
    // writes none).
    if !args.plan {
        nvfp4_harness::certify::check_dir_writable(&args.report_dir)?;
    }
    if let Some(list) = &args.gpus {
        return gpus::run_on_gpus(list, seed, &args);
    }
    // Held until the certificates are written: a second run certifying one of these kernels
    // into this directory meanwhile is refused, not left to lose a certificate.
    let _locks = if args.plan {
        Vec::new()
    } else {
        claim_certificates(&selection.kernels, &args.report_dir, shard)?
    };
    nvfp4_harness::trace_step("certify: choosing the reference");
    let on_gpu = match args.reference_on_gpu(&selection.kernels) {
        Ok(on_gpu) => on_gpu,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(super::exit_code::EXIT_UNAVAILABLE));
        }
    };
    nvfp4_harness::trace_step("certify: reference chosen");
    let limits = args.limits(on_gpu, seed, shard, models);
    if args.plan {
        return plan::print_plans(&selection.kernels, &limits, &golden_cases(&args)?, seed);
    }
    announce(&args, &selection.kernels, &limits, on_gpu);
    let golden = golden_cases(&args)?;
    let mut outcomes = Outcomes::default();
    let mut certificates = Vec::new();
    for kernel in &selection.kernels {
        let request = selection.request(kernel.as_ref(), &args, &limits, &golden);
        let outcome = certify_with_progress(kernel.as_ref(), &request, args.quiet);
        let certificate = match outcome? {
            KernelOutcome::Unusable(reason) => {
                outcomes.unusable(kernel.name(), &reason);
                continue;
            }
            KernelOutcome::Certificate(certificate) => *certificate,
        };
        outcomes.add(&certificate);
        if certificates.is_empty() {
            println!("{}", Certificate::SUMMARY_HEADER);
        }
        println!("{}", certificate.summary_row());
        certificates.push(certificate);
    }
    outcomes.worse = gate_reports(&args.gate, &certificates)?;
    outcomes.say_written(&args.report_dir, selection.explicit);
    outcomes.harness_errors = reference_choice::say_what_the_reference_did();
    Ok(outcomes.exit_code(selection.explicit))
}
