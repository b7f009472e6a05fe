//! The hardened launch, run inside the worker process: a kernel under test may be buggy or
//! dishonest, so every launch gets fresh allocations, the output starts as poison, canary bytes
//! surround every buffer, and inputs are compared before and after.

use super::variants::GpuVariant;
use crate::certify::{KernelCase, KernelFailure};
use crate::compare::diagnosis::POISON;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// Guard bytes before and after every buffer.
const CANARY: usize = 4096;
const CANARY_BYTE: u8 = 0xA5;

fn crashed(err: impl std::fmt::Display) -> KernelFailure {
    KernelFailure::Crashed(err.to_string())
}

/// Host bytes with canaries around `body`, and the device copy.
struct Guarded {
    host: Vec<u8>,
    device: CudaSlice<u8>,
}

impl Guarded {
    fn upload(stream: &Arc<CudaStream>, body: &[u8]) -> Result<Self, KernelFailure> {
        let mut host = vec![CANARY_BYTE; body.len() + 2 * CANARY];
        host[CANARY..CANARY + body.len()].copy_from_slice(body);
        let device = stream.clone_htod(&host).map_err(crashed)?;
        Ok(Guarded { host, device })
    }

    fn body_len(&self) -> usize {
        self.host.len() - 2 * CANARY
    }

    /// The device bytes after the launch.
    fn download(&self, stream: &Arc<CudaStream>) -> Result<Vec<u8>, KernelFailure> {
        stream.clone_dtoh(&self.device).map_err(crashed)
    }
}

/// Launches `function` on `case` and returns the `[M, N, L]` fp16 output bits.
pub fn hardened_launch(
    stream: &Arc<CudaStream>,
    variant: &GpuVariant,
    function: &CudaFunction,
    case: &KernelCase,
) -> Result<Vec<u16>, KernelFailure> {
    let inputs = &case.inputs;
    let shape = inputs.shape;
    let named_inputs = [
        ("a", inputs.a.data()),
        ("b1", inputs.b1.data()),
        ("b2", inputs.b2.data()),
        ("sfa_permuted", &case.sfa_blocked[..]),
        ("sfb1_permuted", &case.sfb1_blocked[..]),
        ("sfb2_permuted", &case.sfb2_blocked[..]),
    ];
    let guarded: Vec<Guarded> = named_inputs
        .iter()
        .map(|(_, bytes)| Guarded::upload(stream, bytes))
        .collect::<Result<_, _>>()?;
    let elements = shape.m * shape.n * shape.l;
    let poison: Vec<u8> = std::iter::repeat_n(POISON.to_bits().to_le_bytes(), elements)
        .flatten()
        .collect();
    let mut output = Guarded::upload(stream, &poison)?;

    let output_len = output.body_len();
    let (m, n, k, l) = (
        shape.m as i32,
        shape.n as i32,
        shape.k as i32,
        shape.l as i32,
    );
    let (grid_dim, block_dim) = variant.launch_dims(shape);
    {
        // The views borrow the buffers only for the launch.
        let views: Vec<_> = guarded
            .iter()
            .map(|g| g.device.slice(CANARY..CANARY + g.body_len()))
            .collect();
        let mut output_view = output.device.slice_mut(CANARY..CANARY + output_len);
        let mut launch = stream.launch_builder(function);
        for view in &views {
            launch.arg(view);
        }
        launch.arg(&mut output_view).arg(&m).arg(&n).arg(&k).arg(&l);
        // SAFETY: the argument list matches the variants' shared signature; every pointer is a
        // live device allocation of the size the shape implies, plus canaries.
        unsafe {
            launch.launch(LaunchConfig {
                grid_dim,
                block_dim,
                shared_mem_bytes: 0,
            })
        }
        .map_err(crashed)?;
    }
    stream.synchronize().map_err(crashed)?;

    let after = output.download(stream)?;
    let canaries_intact = |bytes: &[u8]| {
        bytes[..CANARY]
            .iter()
            .chain(&bytes[bytes.len() - CANARY..])
            .all(|&b| b == CANARY_BYTE)
    };
    if !canaries_intact(&after) {
        let first = after
            .iter()
            .enumerate()
            .find(|&(i, &b)| (i < CANARY || i >= after.len() - CANARY) && b != CANARY_BYTE)
            .map(|(i, _)| i);
        let position = first.map_or(String::new(), |i| {
            if i < CANARY {
                format!(" ({} bytes before c)", CANARY - i)
            } else {
                format!(" (byte {} past the end of c)", i - (after.len() - CANARY))
            }
        });
        return Err(KernelFailure::OutOfBounds(format!(
            "the canary around c was overwritten{position}"
        )));
    }
    for ((name, _), buffer) in named_inputs.iter().zip(&guarded) {
        let now = buffer.download(stream)?;
        if now != buffer.host {
            let kind = if canaries_intact(&now) {
                "its contents changed"
            } else {
                "its canary was overwritten"
            };
            return Err(KernelFailure::ModifiedInputs(format!(
                "input {name}: {kind}"
            )));
        }
    }
    output.host = after;
    Ok(output.host[CANARY..CANARY + output_len]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect())
}
