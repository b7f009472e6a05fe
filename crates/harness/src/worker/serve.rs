//! The worker side of `nvfp4-oracle gpu-worker`: one process serves one GPU kernel, either a
//! built-in NVRTC variant or a symbol of a user's shared library (the C ABI of
//! `include/nvfp4_oracle.h`), one case per request, with the hardened launch
//! ([`crate::gpu::launch::hardened_launch`]). The protocol is in [`super::protocol`], the
//! parent's side in [`super::parent`].

use super::library_timing::LibraryTiming;
use super::protocol::{CaseFiles, Reply, Request};
use crate::error::{Error, Result};
use crate::gpu::compile::compile_variant;
use crate::gpu::conditions::Conditions;
use crate::gpu::device::{open_device, DeviceInfo};
use crate::gpu::launch::{configure_function, hardened_launch, LaunchBuffers, PreparedLaunch};
use crate::gpu::library::{lmn_to_mnl, LoadedLibrary};
use crate::gpu::variants::{gpu_variants, GpuVariant};
use crate::kernels::manifest::ArchRequirement;
use crate::kernels::{KernelEnvironment, KernelFailure, RunConditions};
use cudarc::driver::{CudaFunction, CudaStream};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// What a worker serves.
pub enum WorkerTarget {
    Variant(String),
    Library {
        path: PathBuf,
        symbol: String,
    },
    /// No kernel at all: serves a timing's requests without the kernel, so that the parent's
    /// clock is set by a process no kernel code has run in.
    Baseline,
}

/// A kernel ready to launch on given buffers.
enum Loaded {
    Variant {
        variant: GpuVariant,
        function: CudaFunction,
        sm_count: u32,
    },
    Library(LoadedLibrary),
    Baseline,
}

fn reply(message: &Reply) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", message.line());
    let _ = out.flush();
}

fn load_variant(
    name: &str,
    stream: &Arc<CudaStream>,
    info: &DeviceInfo,
) -> std::result::Result<Loaded, (bool, String)> {
    let variant = gpu_variants()
        .into_iter()
        .find(|v| v.name == name)
        .ok_or_else(|| (false, format!("no GPU variant '{name}'")))?;
    if let Some(reason) = info.cannot_run(variant.arch) {
        return Err((true, reason));
    }
    let ctx = stream.context();
    let ptx = compile_variant(&variant).map_err(|err| (false, err.to_string()))?;
    let module = ctx
        .load_module(ptx)
        .map_err(|err| (false, format!("loading the module: {err}")))?;
    let function = module
        .load_function(variant.entry)
        .map_err(|err| (false, format!("entry point {}: {err}", variant.entry)))?;
    configure_function(&variant, &function).map_err(|err| (false, err.to_string()))?;
    Ok(Loaded::Variant {
        variant,
        function,
        sm_count: info.sm_count as u32,
    })
}

/// The parent's input socket ([`super::protocol::INPUT_SOCKET_ENV`] names its descriptor), if
/// the worker was started with one: where the descriptors of shared device memory arrive.
fn take_input_socket() -> Option<std::os::unix::net::UnixStream> {
    let fd: std::os::fd::RawFd = std::env::var(super::protocol::INPUT_SOCKET_ENV)
        .ok()?
        .parse()
        .ok()?;
    // SAFETY: fcntl on any number is harmless; a descriptor that is open and a socket is
    // the one the parent placed there (nothing else in this process took it yet).
    unsafe {
        if libc::fcntl(fd, libc::F_GETFD) < 0 {
            return None;
        }
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return None;
        }
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        Some(std::os::fd::FromRawFd::from_raw_fd(fd))
    }
}

/// Compiles or loads once, then serves cases until stdin closes. A library is loaded before the
/// GPU is opened, so a missing file or symbol is reported as such on any machine. `arch`: the
/// architecture a library's manifest requires.
pub fn serve(target: WorkerTarget, arch: Option<ArchRequirement>) -> Result<()> {
    let started = (|| {
        let library = match &target {
            WorkerTarget::Library { path, symbol } => {
                Some(LoadedLibrary::open(path, symbol).map_err(|err| (false, err.to_string()))?)
            }
            WorkerTarget::Variant(_) | WorkerTarget::Baseline => None,
        };
        let (ctx, info) = open_device().map_err(|reason| (true, reason.to_string()))?;
        if let Some(reason) = arch.and_then(|arch| arch.unmet_by(info.compute_capability)) {
            return Err((true, reason));
        }
        let stream = ctx.default_stream();
        let loaded = match (library, &target) {
            (Some(library), _) => Loaded::Library(library),
            (None, WorkerTarget::Variant(name)) => load_variant(name, &stream, &info)?,
            (None, WorkerTarget::Baseline) => Loaded::Baseline,
            (None, WorkerTarget::Library { .. }) => unreachable!("loaded above"),
        };
        Ok((stream, loaded, info))
    })();
    let mut timing_state = LibraryTiming::new(take_input_socket());
    let (stream, loaded, info) = match started {
        Ok(ready) => {
            reply(&Reply::Ready {
                environment: KernelEnvironment {
                    shared_inputs: timing_state.offers_shared_inputs(),
                    ..Default::default()
                },
            });
            ready
        }
        Err((unavailable, reason)) => {
            reply(&Reply::StartFailed {
                unavailable,
                reason,
            });
            return Ok(());
        }
    };
    let mut conditions_kernels: Option<Conditions> = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let request: Request =
            serde_json::from_str(&line).map_err(|err| Error::Protocol(err.to_string()))?;
        let (fatal, message) = match request {
            Request::Run {
                case,
                output,
                conditions,
            } => {
                let made = if conditions != RunConditions::default() && conditions_kernels.is_none()
                {
                    Conditions::new(&stream, &info).map(|made| conditions_kernels = Some(made))
                } else {
                    Ok(())
                };
                let result = made
                    .map_err(|err| {
                        KernelFailure::Crashed(format!("the harness's condition kernels: {err}"))
                    })
                    .and_then(|()| {
                        let around = conditions_kernels.as_ref().map(|c| (c, conditions));
                        run_request(&stream, &loaded, &case, &output, around)
                    });
                (
                    matches!(result, Err(KernelFailure::Crashed(_))),
                    Reply::Done(result),
                )
            }
            Request::RunShared { set, shared } => {
                let shape = nvfp4_model::problem::Shape {
                    m: set.m,
                    n: set.n,
                    k: set.k,
                    l: set.l,
                };
                let result = super::shared_run::serve_shared_run(
                    timing_state.input_socket(),
                    &stream,
                    &shared,
                    |buffers| launch_on(&stream, &loaded, buffers, shape),
                );
                (
                    matches!(result, Err(KernelFailure::Crashed(_))),
                    Reply::Done(result),
                )
            }
            timing => {
                let reply = match &loaded {
                    Loaded::Library(library) => timing_state.serve(&stream, Some(library), timing),
                    Loaded::Baseline => timing_state.serve(&stream, None, timing),
                    Loaded::Variant { .. } => Reply::Done(Err(KernelFailure::Crashed(
                        "built-in variants are timed in process by `bench`".into(),
                    ))),
                };
                let fatal = matches!(
                    &reply,
                    Reply::Done(Err(KernelFailure::Crashed(_)))
                        | Reply::Timed(Err(KernelFailure::Crashed(_)))
                );
                (fatal, reply)
            }
        };
        reply(&message);
        if fatal {
            break; // the CUDA context is unusable after a fault
        }
    }
    Ok(())
}

/// The built-in variants and the C ABI are dual-GEMM kernels.
/// One launch of the loaded kernel on `buffers` (a case on shared memory).
fn launch_on(
    stream: &Arc<CudaStream>,
    loaded: &Loaded,
    buffers: &LaunchBuffers,
    shape: nvfp4_model::problem::Shape,
) -> std::result::Result<(), KernelFailure> {
    match loaded {
        Loaded::Variant {
            variant,
            function,
            sm_count,
        } => PreparedLaunch::new(variant, *buffers, shape, *sm_count)
            .and_then(|prepared| prepared.launch(stream, function))
            .map_err(|err| KernelFailure::Crashed(err.to_string())),
        Loaded::Library(library) => library.call(buffers, shape, stream),
        Loaded::Baseline => Err(KernelFailure::Crashed(
            "the timing baseline serves no cases".into(),
        )),
    }
}

fn dual(
    case: &crate::kernels::KernelCase,
) -> std::result::Result<crate::kernels::DualGemmCase<'_>, KernelFailure> {
    case.dual_or_refuse()
}

fn run_request(
    stream: &Arc<CudaStream>,
    loaded: &Loaded,
    files: &CaseFiles,
    output_path: &std::path::Path,
    around: Option<(&Conditions, RunConditions)>,
) -> std::result::Result<(), KernelFailure> {
    let before = |stream: &Arc<CudaStream>| match around {
        Some((kernels, conditions)) => kernels.before_launch(stream, conditions).map_err(|err| {
            KernelFailure::Crashed(format!("the harness's condition kernels: {err}"))
        }),
        None => Ok(()),
    };
    let owned = files.read_in_worker()?;
    let case = dual(&owned)?;
    let shape = case.inputs.shape;
    let output = match loaded {
        Loaded::Variant {
            variant,
            function,
            sm_count,
        } => hardened_launch(stream, case, |buffers: &LaunchBuffers| {
            let prepared = PreparedLaunch::new(variant, *buffers, shape, *sm_count)
                .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
            before(stream)?;
            prepared
                .launch(stream, function)
                .map_err(|err| KernelFailure::Crashed(err.to_string()))
        })?,
        Loaded::Library(library) => {
            // The C ABI's c is [L][M][N] (GPU MODE's storage); the harness's is [M][N][L].
            let lmn = hardened_launch(stream, case, |buffers: &LaunchBuffers| {
                before(stream)?;
                library.call(buffers, shape, stream)
            })?;
            lmn_to_mnl(lmn, shape)
        }
        Loaded::Baseline => {
            return Err(KernelFailure::Crashed(
                "the timing baseline serves no cases".into(),
            ))
        }
    };
    if let Some((kernels, _)) = around {
        kernels.finish().map_err(|err| {
            KernelFailure::Crashed(format!("the harness's condition kernels: {err}"))
        })?;
    }
    std::fs::write(output_path, output)
        .map_err(|err| KernelFailure::Crashed(format!("worker could not write the output: {err}")))
}
