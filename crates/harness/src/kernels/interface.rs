//! What the harness knows about a kernel under test: what it solves, which shapes it supports,
//! whether it can run here, and how to run it on one case. Every source of kernels (CPU
//! built-ins, NVRTC variants, Python submissions, shared libraries) implements this one trait,
//! and the campaign knows nothing else. This file depends on no kernel source, so the GPU
//! backend can use its types without an import circle.

use half::f16;
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::problem::{DualGemmInputs, ProblemInputs, ProblemKind, Shape};

/// The shapes a kernel declares it supports. Shapes outside are not fuzzed; the harness checks
/// that the kernel refuses them cleanly instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShapeSupport {
    pub m_multiple: usize,
    pub n_multiple: usize,
    pub k_multiple: usize,
    pub max_l: usize,
}

impl ShapeSupport {
    pub const ANY: ShapeSupport = ShapeSupport {
        m_multiple: 1,
        n_multiple: 1,
        k_multiple: 16,
        max_l: usize::MAX,
    };

    pub fn supports(&self, shape: Shape) -> bool {
        shape.m % self.m_multiple == 0
            && shape.n % self.n_multiple == 0
            && shape.k % self.k_multiple == 0
            && shape.l <= self.max_l
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (name, multiple) in [
            ("M", self.m_multiple),
            ("N", self.n_multiple),
            ("K", self.k_multiple),
        ] {
            if multiple > 1 {
                parts.push(format!("{name} % {multiple} == 0"));
            }
        }
        if self.max_l != usize::MAX {
            parts.push(format!("L <= {}", self.max_l));
        }
        if parts.is_empty() {
            "any shape".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One launch's inputs, in both scale layouts, as a GPU kernel would receive them.
pub struct KernelCase {
    pub inputs: ProblemInputs,
    /// The blocked (permuted) scales of each operand, in [`ProblemInputs::operands`] order,
    /// padding filled with `padding_fill`.
    pub blocked: Vec<Vec<u8>>,
    pub padding_fill: u8,
    /// Device memory for the case's run made before its turn, taken by the run
    /// ([`KernelUnderTest::make_ready`]); empty for a case made and run at once.
    pub ready: ReadyBuffers,
}

/// A case's shared-run buffers made ahead (`crate::gpu::shared_buffers`).
#[cfg(feature = "gpu")]
pub use crate::gpu::shared_buffers::ReadyBuffers;

/// Without the GPU backend nothing is made ahead on a GPU.
#[cfg(not(feature = "gpu"))]
#[derive(Default)]
pub struct ReadyBuffers;

/// A dual-GEMM call's nine input tensors by their data-tuple keys, in the C ABI's order: a, b1,
/// b2, the blocked scales, the plain scales ([`DualGemmCase::abi_inputs`]).
pub const ABI_INPUT_KEYS: [&str; 9] = [
    "a",
    "b1",
    "b2",
    "sfa_permuted",
    "sfb1_permuted",
    "sfb2_permuted",
    "sfa",
    "sfb1",
    "sfb2",
];

/// A dual-GEMM case, borrowed from a [`KernelCase`]: what dual-GEMM kernels read.
#[derive(Clone, Copy)]
pub struct DualGemmCase<'a> {
    pub inputs: &'a DualGemmInputs,
    pub sfa_blocked: &'a [u8],
    pub sfb1_blocked: &'a [u8],
    pub sfb2_blocked: &'a [u8],
    pub padding_fill: u8,
}

impl<'a> DualGemmCase<'a> {
    /// The nine input tensors by their data-tuple keys, in the C ABI's order (the order of a
    /// launch's buffers: `crate::gpu::launch::LaunchBuffers`): a, b1, b2, the blocked scales,
    /// the plain scales.
    pub fn abi_inputs(&self) -> [(&'static str, &'a [u8]); 9] {
        let inputs = self.inputs;
        let bodies = [
            inputs.a.data(),
            inputs.b1.data(),
            inputs.b2.data(),
            self.sfa_blocked,
            self.sfb1_blocked,
            self.sfb2_blocked,
            inputs.a.scales(),
            inputs.b1.scales(),
            inputs.b2.scales(),
        ];
        std::array::from_fn(|i| (ABI_INPUT_KEYS[i], bodies[i]))
    }
}

impl KernelCase {
    pub fn new(inputs: impl Into<ProblemInputs>, padding_fill: u8) -> Self {
        let inputs = inputs.into();
        KernelCase {
            blocked: inputs
                .operands()
                .iter()
                .map(|(_, operand)| operand.blocked_scales(padding_fill))
                .collect(),
            inputs,
            padding_fill,
            ready: ReadyBuffers::default(),
        }
    }

    pub fn problem(&self) -> ProblemKind {
        self.inputs.kind()
    }

    /// The case as a dual-GEMM kernel sees it, if it is one.
    pub fn dual(&self) -> Option<DualGemmCase<'_>> {
        match &self.inputs {
            ProblemInputs::DualGemm(inputs) => Some(DualGemmCase {
                inputs,
                sfa_blocked: &self.blocked[0],
                sfb1_blocked: &self.blocked[1],
                sfb2_blocked: &self.blocked[2],
                padding_fill: self.padding_fill,
            }),
            _ => None,
        }
    }

    /// [`Self::dual`], or the refusal a dual-GEMM kernel gives any other problem.
    pub fn dual_or_refuse(&self) -> Result<DualGemmCase<'_>, KernelFailure> {
        self.dual().ok_or_else(|| {
            KernelFailure::Refused(format!(
                "a {} case: this kernel solves the dual GEMM",
                self.problem().name()
            ))
        })
    }

    /// A shape that names the case in messages: the problem's shape (for the grouped GEMM, the
    /// first group's M, N, K and the number of groups as L).
    pub fn shape(&self) -> Shape {
        match &self.inputs {
            ProblemInputs::DualGemm(d) => d.shape,
            ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => g.shape,
            ProblemInputs::GroupGemm(groups) => Shape {
                l: groups.groups.len(),
                ..groups.groups[0].shape
            },
        }
    }
}

/// How a run went wrong before any output could be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum KernelFailure {
    #[error("the kernel refused the shape: {0}")]
    Refused(String),
    #[error("the kernel crashed: {0}")]
    Crashed(String),
    #[error("the kernel hung (watchdog after {0} s)")]
    Hung(u64),
    #[error("the kernel wrote outside its output: {0}")]
    OutOfBounds(String),
    #[error("the kernel modified its inputs: {0}")]
    ModifiedInputs(String),
    /// The output read on the caller's stream right after the call returned differs from the
    /// output once the whole device is idle: the kernel left work running (on a stream of its
    /// own) that the caller's next operation does not wait for.
    #[error("work not ordered on the caller's stream: {0}")]
    Unordered(String),
    /// A Python submission raised (the message names the exception and its last frame).
    #[error("the kernel raised an exception: {0}")]
    Raised(String),
    /// The output broke the contract (wrong type, shape, dtype or device): a usage error of the
    /// submission, not a numerical verdict (`certify` exits 2).
    #[error("the kernel's output breaks the contract: {0}")]
    BadOutput(String),
}

/// Why a kernel could not be made ready to run its first case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// It cannot run on this machine (no GPU, another architecture, a package only its target
    /// platform has): nothing about the kernel is judged.
    #[error("cannot run here: {0}")]
    Unavailable(String),
    /// The kernel or its environment is broken before any case (a missing file, a syntax error,
    /// no `custom_kernel`, `compile_kernel()` raised, no torch): a usage error (exit 2).
    #[error("{0}")]
    Unusable(String),
}

/// Why a kernel cannot run on this machine (no GPU, another architecture), in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

impl From<String> for Unavailable {
    fn from(reason: String) -> Self {
        Unavailable(reason)
    }
}

impl From<&str> for Unavailable {
    fn from(reason: &str) -> Self {
        Unavailable(reason.to_string())
    }
}

/// What a kernel ran on, for its certificate: filled in by kernels that run in a worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KernelEnvironment {
    /// Python submissions: `python3 --version` and `torch.__version__` as the worker saw them.
    pub python: Option<String>,
    pub torch: Option<String>,
    /// The CUDA version torch was built with.
    pub torch_cuda: Option<String>,
    /// The operating-system boundary its worker ran in, in words (set by the parent, never
    /// taken from the worker).
    #[serde(default)]
    pub isolation: Option<String>,
    /// How the worker placed the tensors it hands the kernel (guard pages after each, or
    /// canaries only), as the worker reported it.
    #[serde(default)]
    pub guard_pages: Option<String>,
    /// The worker can map device memory the parent shares with it and be timed on inputs the
    /// parent copies there just before each call (`crate::bench::per_call`).
    #[serde(default)]
    pub shared_inputs: bool,
    /// The worker serves several cases in one request ([`crate::worker::protocol::Request::RunBatch`]).
    #[serde(default)]
    pub batches: bool,
}

/// What else happens on the GPU around one run: the determinism and shared-memory checks
/// (crates/harness/src/certify/checks/determinism.rs; the conditions are made on the GPU by crates/harness/src/gpu/conditions.rs) run a
/// case again under other conditions and compare the bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunConditions {
    /// Just before the launch, fill as much of every SM's shared memory as a kernel can hold
    /// with this byte: a kernel that reads shared memory it never wrote then reads it.
    pub shared_memory_fill: Option<u8>,
    /// Keep other work running on the GPU (on another stream) while the kernel runs, so that
    /// its CTAs are scheduled on fewer SMs and in another order.
    pub concurrent_load: bool,
}

impl RunConditions {
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(fill) = self.shared_memory_fill {
            parts.push(format!(
                "shared memory filled with 0x{fill:02X} before the launch"
            ));
        }
        if self.concurrent_load {
            parts.push("other work running on the GPU".to_string());
        }
        if parts.is_empty() {
            "an idle GPU".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// A program (compute-sanitizer) a worker-backed kernel can be started under: the worker's
/// command line follows `args`.
#[derive(Debug, Clone)]
pub struct ToolWrapper {
    pub program: std::path::PathBuf,
    pub args: Vec<String>,
    // No environment of its own: a worker under a tool sees the environment of a plain run (a
    // kernel must not be able to tell the two apart by it).
    /// How much longer than usual the worker may take to start and to run a case.
    pub slowdown: u32,
    // No writable directory either: the tool's log is a FIFO the parent reads
    // (crates/harness/src/certify/checks/tool_log.rs), which a read-only file system lets the tool write into, and a
    // directory the tool could write the kernel could write too.
}

/// SHA-256 of a kernel's source text, in hex: what certificates record and `bench` compares.
pub fn source_hash_of(source: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(source.as_bytes()))
}

/// A kernel under test. `run` writes `[M, N, L]` fp16 into `output`, which the harness has filled
/// with the poison NaN ([`nvfp4_model::problem::POISON`]).
pub trait KernelUnderTest: Sync {
    fn name(&self) -> &str;
    /// One line for `variants`: what the kernel is (for a mutant, its bug). By default none.
    fn description(&self) -> String {
        String::new()
    }
    /// Deliberately broken kernels (mutants, harness tests) are never selected by default.
    fn is_deliberately_broken(&self) -> bool {
        false
    }
    /// Hash of the kernel's source, for kernels built from source at run time.
    /// Where a user's kernel came from (its manifest's or code's path): two kernels of one name
    /// from different places never share a certificate. `None` for a built-in kernel.
    fn source_path(&self) -> Option<String> {
        None
    }

    fn source_hash(&self) -> Option<String> {
        None
    }
    /// The problem it computes; by default the dual GEMM.
    fn problem(&self) -> ProblemKind {
        ProblemKind::DualGemm
    }
    /// The shapes it takes; by default every shape.
    fn support(&self) -> ShapeSupport {
        ShapeSupport::ANY
    }
    /// `Err(reason)` when it cannot run on this machine (no GPU, wrong architecture). By
    /// default it runs wherever this process does (a kernel in this process, on the CPU).
    fn availability(&self) -> Result<(), Unavailable> {
        Ok(())
    }
    /// Gets the kernel ready for its first case (a worker started, a module imported, a kernel
    /// compiled) and says why it cannot be. By default: [`Self::availability`].
    fn prepare(&self) -> Result<(), PrepareError> {
        self.availability()
            .map_err(|why| PrepareError::Unavailable(why.0))
    }
    /// Whether it runs on the GPU (its certificate then records the GPU).
    fn runs_on_gpu(&self) -> bool {
        false
    }
    /// What it ran on beyond the GPU, once [`Self::prepare`] succeeded.
    fn environment(&self) -> KernelEnvironment {
        KernelEnvironment::default()
    }
    /// Makes what its run of `case` needs before the case's turn (a worker's shared memory,
    /// filled: [`KernelCase::ready`]), on a thread that makes a campaign's inputs ahead while
    /// the kernel runs earlier cases. By default nothing.
    fn make_ready(&self, _case: &KernelCase) {}
    /// Runs one case (of [`Self::problem`]); `output` has [`ProblemInputs::output_len`]
    /// elements.
    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure>;
    /// [`Self::run`] for a case the harness judges on the GPU (its reference kept there): the
    /// output may stay there too. `output` comes empty. `Ok(Some(kept))`: the output is `kept`,
    /// in this process's GPU memory, and `output` stays empty; `Ok(None)`: `output` holds it,
    /// as after `run` (poisoned before it). A worker's kernel on shared memory keeps it
    /// (`crate::worker::shared_run`); by default every kernel writes `output`.
    fn run_keeping_output(
        &self,
        case: &KernelCase,
        output: &mut Vec<f16>,
    ) -> Result<Option<KeptOutput>, KernelFailure> {
        *output = poisoned_output(case.inputs.output_len());
        self.run(case, output).map(|()| None)
    }
    /// Runs `cases` one after another, each output into its own buffer of `outputs`: one
    /// result per case, in order. A worker's kernel takes small cases in one request
    /// (`crate::worker::isolated`), and a crash there is narrowed to its case; every other
    /// kernel runs them one by one.
    fn run_batch(
        &self,
        cases: &[&KernelCase],
        outputs: &mut [Vec<f16>],
    ) -> Vec<Result<(), KernelFailure>> {
        run_one_by_one(self, cases, outputs)
    }
    /// Runs one case under `conditions` (other work on the GPU, shared memory filled first):
    /// the determinism checks. A kernel that does not run on a GPU has none to honour.
    fn run_under(
        &self,
        case: &KernelCase,
        _conditions: RunConditions,
        output: &mut [f16],
    ) -> Result<(), KernelFailure> {
        self.run(case, output)
    }
    /// The same kernel in a fresh worker started under `tool`; None for a kernel that does not
    /// run in a worker process.
    fn under_tool(&self, _tool: &ToolWrapper) -> Option<Box<dyn KernelUnderTest>> {
        None
    }
    /// Ends what [`Self::prepare`] started, letting a worker exit on its own (a tool it runs
    /// under then writes its last reports). Dropping the kernel also ends it, at once.
    fn finish(&self) {}
    /// Whether its outputs may legitimately differ between runs (atomics-based split-K, declared
    /// in its manifest): the determinism check is then skipped and the certificate says so.
    fn declares_nondeterminism(&self) -> bool {
        false
    }
    /// The accumulation the kernel declares when it is not the default contract's (blocks of 16
    /// summed before each rounding), e.g. [`KOrder::PerProduct`](nvfp4_model::model::bounds::KOrder::PerProduct): its campaign's intervals are
    /// then that order's, whatever `--k-order` says.
    fn declared_order(&self) -> Option<nvfp4_model::model::bounds::KOrder> {
        None
    }
    /// Shapes the kernel declares it will run at (a manifest's `[shapes] production`): every
    /// campaign runs them beside the problem's benchmark and test shapes.
    fn declared_production_shapes(&self) -> Vec<Shape> {
        Vec::new()
    }
    /// The accumulation schedule the kernel declares, if any: `certify --exact` replays it.
    fn schedule(&self) -> Option<Schedule> {
        None
    }
}

/// An output left in this process's GPU memory by a run ([`KernelUnderTest::run_keeping_output`]).
#[cfg(feature = "gpu")]
pub use crate::gpu::kept_output::KeptOutput;

/// Without the GPU backend no output is ever kept on a GPU.
#[cfg(not(feature = "gpu"))]
pub enum KeptOutput {}

#[cfg(not(feature = "gpu"))]
impl KeptOutput {
    pub fn len(&self) -> usize {
        match *self {}
    }
    pub fn is_empty(&self) -> bool {
        match *self {}
    }
    pub fn download(&self) -> Result<Vec<f16>, crate::gpu::GpuError> {
        match *self {}
    }
}

/// An output buffer of `len` elements, poison everywhere ([`nvfp4_model::problem::POISON`]),
/// written on every core: a deployment case's output is gigabytes, and filling it on one
/// thread (each page faulted in on the way) took a tenth of a second per 2^28 elements on the
/// H100 host.
pub fn poisoned_output(len: usize) -> Vec<f16> {
    use rayon::iter::ParallelExtend;
    let mut output = Vec::with_capacity(len);
    output.par_extend(rayon::iter::repeat_n(nvfp4_model::problem::POISON, len));
    output
}

/// `cases` run by `kernel` one after another, each output into its own buffer of `outputs`:
/// [`KernelUnderTest::run_batch`] of a kernel that takes no batch in one request.
pub fn run_one_by_one<K: KernelUnderTest + ?Sized>(
    kernel: &K,
    cases: &[&KernelCase],
    outputs: &mut [Vec<f16>],
) -> Vec<Result<(), KernelFailure>> {
    cases
        .iter()
        .zip(outputs.iter_mut())
        .map(|(case, output)| kernel.run(case, output))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::CpuKernel;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::Distribution;

    /// A kernel that cannot leave its output on a GPU writes it into the buffer it is given,
    /// as its `run` does, from poison: where it writes nothing, the poison is what is judged.
    #[test]
    fn an_output_not_kept_is_written_into_the_buffer_given() {
        let shape = Shape::new(3, 40, 64, 2).unwrap();
        let case = KernelCase::new(
            generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 4),
            0,
        );
        let mut run = vec![f16::ZERO; case.inputs.output_len()];
        CpuKernel::correct().run(&case, &mut run).unwrap();
        let mut kept = Vec::new();
        let on_device = CpuKernel::correct()
            .run_keeping_output(&case, &mut kept)
            .unwrap();
        assert!(on_device.is_none());
        let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&kept), bits(&run));

        struct WritesNothing;
        impl KernelUnderTest for WritesNothing {
            fn name(&self) -> &str {
                "writes-nothing"
            }
            fn run(&self, _: &KernelCase, _: &mut [f16]) -> Result<(), KernelFailure> {
                Ok(())
            }
        }
        let mut left = Vec::new();
        assert!(WritesNothing
            .run_keeping_output(&case, &mut left)
            .unwrap()
            .is_none());
        assert_eq!(left.len(), case.inputs.output_len());
        assert!(left
            .iter()
            .all(|x| x.to_bits() == nvfp4_model::problem::POISON.to_bits()));
    }
}
