//! The worker side of `nvfp4-oracle gpu-worker`: one process serves one GPU kernel, either a
//! built-in NVRTC variant or a symbol of a user's shared library (the C ABI of
//! `include/nvfp4_oracle.h`), one case per request, with the hardened launch
//! ([`super::launch::hardened_launch`]). The protocol and the parent's side are in
//! `crate::kernels::process`.

use super::compile::compile_variant;
use super::device::open_device;
use super::launch::{configure_function, hardened_launch, LaunchBuffers, PreparedLaunch};
use super::library::LoadedLibrary;
use super::variants::gpu_variants;
use crate::error::{Error, Result};
use crate::kernels::manifest::ArchRequirement;
use crate::kernels::process::{Reply, Request};
use crate::kernels::{KernelEnvironment, KernelFailure};
use cudarc::driver::{CudaFunction, CudaStream};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// What a worker serves.
pub enum WorkerTarget {
    Variant(String),
    Library { path: PathBuf, symbol: String },
}

/// A kernel ready to launch on given buffers.
enum Loaded {
    Variant {
        variant: super::variants::GpuVariant,
        function: CudaFunction,
        sm_count: u32,
    },
    Library(LoadedLibrary),
}

fn reply(message: &Reply) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", message.line());
    let _ = out.flush();
}

fn load_variant(
    name: &str,
    stream: &Arc<CudaStream>,
    info: &super::device::DeviceInfo,
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
    configure_function(&variant, &function).map_err(|err| (false, err))?;
    Ok(Loaded::Variant {
        variant,
        function,
        sm_count: info.sm_count as u32,
    })
}

/// Compiles or loads once, then serves cases until stdin closes. A library is loaded before the
/// GPU is opened, so a missing file or symbol is reported as such on any machine. `arch`: the
/// architecture a library's manifest requires.
pub fn serve(target: WorkerTarget, arch: Option<ArchRequirement>) -> Result<()> {
    let started = (|| {
        let library = match &target {
            WorkerTarget::Library { path, symbol } => {
                Some(LoadedLibrary::open(path, symbol).map_err(|err| (false, err))?)
            }
            WorkerTarget::Variant(_) => None,
        };
        let (ctx, info) = open_device().map_err(|reason| (true, reason))?;
        if let Some(reason) = arch.and_then(|arch| arch.unmet_by(info.compute_capability)) {
            return Err((true, reason));
        }
        let stream = ctx.default_stream();
        let loaded = match (library, &target) {
            (Some(library), _) => Loaded::Library(library),
            (None, WorkerTarget::Variant(name)) => load_variant(name, &stream, &info)?,
            (None, WorkerTarget::Library { .. }) => unreachable!("loaded above"),
        };
        Ok((stream, loaded))
    })();
    let (stream, loaded) = match started {
        Ok(ready) => {
            reply(&Reply::Ready {
                environment: KernelEnvironment::default(),
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
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let request: Request = serde_json::from_str(&line)
            .map_err(|err| Error::Usage(format!("bad worker request: {err}")))?;
        let (fatal, message) = match request {
            Request::Run { case, output } => {
                let result = run_request(&stream, &loaded, &case, &output);
                (
                    matches!(result, Err(KernelFailure::Crashed(_))),
                    Reply::Done(result),
                )
            }
            Request::Time {
                sets,
                fresh,
                reps,
                warmup,
            } => {
                let result = match &loaded {
                    Loaded::Library(library) => {
                        time_library(&stream, library, &sets, &fresh, reps, warmup)
                    }
                    Loaded::Variant { .. } => Err(KernelFailure::Crashed(
                        "built-in variants are timed in process by `bench`".into(),
                    )),
                };
                (
                    matches!(result, Err(KernelFailure::Crashed(_))),
                    Reply::Timed(result),
                )
            }
        };
        reply(&message);
        if fatal {
            break; // the CUDA context is unusable after a fault
        }
    }
    Ok(())
}

fn read_case(
    files: &crate::kernels::process::CaseFiles,
) -> std::result::Result<crate::kernels::KernelCase, KernelFailure> {
    files
        .read()
        .map_err(|err| KernelFailure::Crashed(format!("worker could not read the case: {err}")))
}

/// The built-in variants and the C ABI are dual-GEMM kernels.
fn dual(
    case: &crate::kernels::KernelCase,
) -> std::result::Result<crate::kernels::DualGemmCase<'_>, KernelFailure> {
    case.dual_or_refuse()
}

/// One case's buffers on the device, unguarded (timing only).
struct Uploaded {
    inputs: Vec<cudarc::driver::CudaSlice<u8>>,
    output: cudarc::driver::CudaSlice<u16>,
}

impl Uploaded {
    fn new(
        stream: &Arc<CudaStream>,
        case: crate::kernels::DualGemmCase<'_>,
    ) -> std::result::Result<Self, KernelFailure> {
        let crashed = |err: cudarc::driver::DriverError| KernelFailure::Crashed(err.to_string());
        let inputs = case.inputs;
        let s = inputs.shape;
        let bodies: [&[u8]; 9] = [
            inputs.a.data(),
            inputs.b1.data(),
            inputs.b2.data(),
            case.sfa_blocked,
            case.sfb1_blocked,
            case.sfb2_blocked,
            inputs.a.scales(),
            inputs.b1.scales(),
            inputs.b2.scales(),
        ];
        Ok(Uploaded {
            inputs: bodies
                .iter()
                .map(|b| stream.clone_htod(*b))
                .collect::<std::result::Result<_, _>>()
                .map_err(crashed)?,
            output: stream
                .clone_htod(&vec![
                    crate::compare::diagnosis::POISON.to_bits();
                    s.m * s.n * s.l
                ])
                .map_err(crashed)?,
        })
    }

    fn buffers(&mut self, stream: &Arc<CudaStream>) -> LaunchBuffers {
        use cudarc::driver::{DevicePtr, DevicePtrMut};
        // The raw pointers outlive their guards: sound here, one stream synchronized per call.
        let ptrs: Vec<u64> = self.inputs.iter().map(|b| b.device_ptr(stream).0).collect();
        LaunchBuffers {
            inputs: std::array::from_fn(|i| ptrs[i]),
            plain_scales: std::array::from_fn(|i| ptrs[6 + i]),
            output: self.output.device_ptr_mut(stream).0,
        }
    }
}

/// [`Request::Time`] for a library: CUDA events around each call, L2 flushed before it.
fn time_library(
    stream: &Arc<CudaStream>,
    library: &LoadedLibrary,
    sets: &[crate::kernels::process::CaseFiles],
    fresh: &[crate::kernels::process::FreshCall],
    reps: usize,
    warmup: usize,
) -> std::result::Result<crate::kernels::process::TimedCalls, KernelFailure> {
    use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
    let crashed = |err: cudarc::driver::DriverError| KernelFailure::Crashed(err.to_string());
    let read = read_case;
    let mut uploaded = Vec::new();
    let mut shapes = Vec::new();
    for files in sets {
        let owned = read(files)?;
        let case = dual(&owned)?;
        shapes.push(case.inputs.shape);
        uploaded.push(Uploaded::new(stream, case)?);
    }
    let mut fresh_uploaded = Vec::new();
    for call in fresh {
        let owned = read(&call.case)?;
        let case = dual(&owned)?;
        fresh_uploaded.push((
            call.at_rep,
            case.inputs.shape,
            Uploaded::new(stream, case)?,
            &call.output,
        ));
    }
    let ctx = stream.context();
    let l2 = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(crashed)? as usize;
    let mut flush: cudarc::driver::CudaSlice<u8> = stream.alloc_zeros(4 * l2).map_err(crashed)?;
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(crashed)?;
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(crashed)?;
    for i in 0..warmup {
        let set = i % uploaded.len();
        let buffers = uploaded[set].buffers(stream);
        library.call(&buffers, shapes[set], stream)?;
    }
    stream.synchronize().map_err(crashed)?;
    let wall = std::time::Instant::now();
    let mut samples_us = Vec::with_capacity(reps);
    for rep in 0..reps {
        stream.memset_zeros(&mut flush).map_err(crashed)?;
        let set_count = uploaded.len();
        let (buffers, shape) = match fresh_uploaded.iter_mut().find(|f| f.0 == rep) {
            Some((_, shape, fresh, _)) => (fresh.buffers(stream), *shape),
            None => (
                uploaded[rep % set_count].buffers(stream),
                shapes[rep % set_count],
            ),
        };
        start.record(stream).map_err(crashed)?;
        library.call(&buffers, shape, stream)?;
        end.record(stream).map_err(crashed)?;
        end.synchronize().map_err(crashed)?;
        samples_us.push(f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0);
    }
    let wall_us = wall.elapsed().as_secs_f64() * 1e6;
    for (_, shape, buffers, output) in &fresh_uploaded {
        let lmn = stream.clone_dtoh(&buffers.output).map_err(crashed)?;
        let bytes: Vec<u8> = lmn_to_mnl(&lmn, *shape)
            .iter()
            .flat_map(|bits| bits.to_le_bytes())
            .collect();
        std::fs::write(output, bytes).map_err(|err| KernelFailure::Crashed(err.to_string()))?;
    }
    Ok(crate::kernels::process::TimedCalls {
        samples_us,
        wall_us,
    })
}

/// The C ABI's `[L][M][N]` output in the harness's `[M][N][L]` order.
fn lmn_to_mnl(lmn: &[u16], shape: crate::problem::Shape) -> Vec<u16> {
    let (m, n, l) = (shape.m, shape.n, shape.l);
    let mut mnl = vec![0u16; lmn.len()];
    for b in 0..l {
        for i in 0..m * n {
            mnl[i * l + b] = lmn[b * m * n + i];
        }
    }
    mnl
}

fn run_request(
    stream: &Arc<CudaStream>,
    loaded: &Loaded,
    files: &crate::kernels::process::CaseFiles,
    output_path: &std::path::Path,
) -> std::result::Result<(), KernelFailure> {
    let owned = read_case(files)?;
    let case = dual(&owned)?;
    let shape = case.inputs.shape;
    let output = match loaded {
        Loaded::Variant {
            variant,
            function,
            sm_count,
        } => hardened_launch(stream, case, |buffers: &LaunchBuffers| {
            PreparedLaunch::new(variant, *buffers, shape, *sm_count)
                .and_then(|prepared| prepared.launch(stream, function))
                .map_err(KernelFailure::Crashed)
        })?,
        Loaded::Library(library) => {
            // The C ABI's c is [L][M][N] (GPU MODE's storage); the harness's is [M][N][L].
            let lmn = hardened_launch(stream, case, |buffers: &LaunchBuffers| {
                library.call(buffers, shape, stream)
            })?;
            lmn_to_mnl(&lmn, shape)
        }
    };
    let bytes: Vec<u8> = output.iter().flat_map(|bits| bits.to_le_bytes()).collect();
    std::fs::write(output_path, bytes)
        .map_err(|err| KernelFailure::Crashed(format!("worker could not write the output: {err}")))
}
