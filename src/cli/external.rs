//! The command-line flags that name external kernels, shared by `certify` and `bench`.

use clap::Args;
use nvfp4_harness::kernels::{KernelCode, Manifest};
use nvfp4_harness::worker::external_kernel;
use nvfp4_harness::worker::IsolatedKernel;
use nvfp4_harness::{Error, Result};
use nvfp4_model::problem::ProblemKind;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ExternalArgs {
    /// A GPU MODE submission.py, as it is (repeatable): run by python3 with torch in a worker
    /// process (NVFP4_ORACLE_PYTHON names another interpreter); `custom_kernel(data)` is called
    /// with the competition's data tuple holding the oracle's inputs. Without a manifest: any
    /// shape, no declared schedule, the per-product intervals (they hold fp32 kernels that add
    /// product by product as well as block-summing ones; a kernel.toml beside it is read only
    /// with --manifest).
    #[arg(long = "submission", value_name = "FILE")]
    pub submissions: Vec<PathBuf>,
    /// A shared library exporting the C ABI of include/nvfp4_oracle.h (repeatable; needs --symbol).
    #[arg(long = "library", value_name = "FILE", requires = "symbol")]
    pub libraries: Vec<PathBuf>,
    /// The entry point of every --library.
    #[arg(long, requires = "libraries")]
    pub symbol: Option<String>,
    /// A kernel manifest (TOML: name, problem, submission or library and symbol, shapes, arch,
    /// schedule; see examples/submissions/*/kernel.toml). Repeatable.
    #[arg(long = "manifest", value_name = "FILE")]
    pub manifests: Vec<PathBuf>,
    /// Seconds a submission's worker may take to start (python's imports, torch's load_inline or
    /// Triton builds, compile_kernel()) before it counts as hung, which is then a usage error
    /// (exit 2): a submission that blocks at import is stopped after it. While it starts, a line
    /// on stderr says how long it has waited.
    #[arg(long, value_name = "SECONDS", default_value_t = 600, allow_negative_numbers = true,
          value_parser = super::value_parsers::whole::<u64>(1, 86_400))]
    pub start_timeout: u64,
    /// The problem a --submission or --library solves.
    #[arg(long, default_value = "dual-gemm", value_parser = super::value_parsers::named::<ProblemKind>())]
    pub problem: ProblemKind,
    /// Hand the parent's environment variable NAME to the kernel's workers (repeatable). They
    /// start from an allow-list (PATH, LD_LIBRARY_PATH, the locale, CUDA's, Triton's, torch's
    /// and CuTe DSL's settings), HOME their own scratch folder, and nothing else of the
    /// caller's; the names passed (never their values) are recorded in the certificate.
    #[arg(long = "pass-env", value_name = "NAME")]
    pub pass_env: Vec<String>,
}

impl ExternalArgs {
    pub fn is_empty(&self) -> bool {
        self.submissions.is_empty() && self.libraries.is_empty() && self.manifests.is_empty()
    }

    /// The kernels named, in the order given (manifests, submissions, libraries).
    pub fn kernels(&self) -> Result<Vec<IsolatedKernel>> {
        nvfp4_harness::worker::pass_env(&self.pass_env).map_err(Error::Usage)?;
        nvfp4_harness::worker::set_start_timeout(std::time::Duration::from_secs(
            self.start_timeout,
        ));
        let mut manifests = Vec::new();
        for path in &self.manifests {
            manifests.push(Manifest::read(path)?);
        }
        for path in &self.submissions {
            manifests.push(Manifest::for_code(
                KernelCode::Submission(path.clone()),
                self.problem,
            )?);
        }
        for path in &self.libraries {
            let symbol = self
                .symbol
                .clone()
                .ok_or_else(|| Error::Usage("--library needs --symbol".into()))?;
            manifests.push(Manifest::for_code(
                KernelCode::Library {
                    path: path.clone(),
                    symbol,
                },
                self.problem,
            )?);
        }
        let mut kernels: Vec<IsolatedKernel> = Vec::new();
        let built_in: Vec<String> = if manifests.is_empty() {
            Vec::new()
        } else {
            nvfp4_harness::worker::registry()
                .iter()
                .map(|k| k.name().to_string())
                .collect()
        };
        for manifest in &manifests {
            // Its certificate would replace the built-in kernel's, and bench would take one
            // for the other.
            if built_in.contains(&manifest.name) {
                return Err(Error::Usage(format!(
                    "'{}' is the name of a built-in kernel (nvfp4-oracle variants); give this \
                     kernel another name (a manifest's `name`)",
                    manifest.name
                )));
            }
            if kernels.iter().any(|k| k.info.name == manifest.name) {
                return Err(Error::Usage(format!(
                    "two kernels are named '{}'; give one a manifest with another name",
                    manifest.name
                )));
            }
            kernels.push(external_kernel(manifest)?);
        }
        Ok(kernels)
    }
}
