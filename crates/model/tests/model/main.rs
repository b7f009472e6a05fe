//! The model's integration tests, one binary (one link) with a module per subject: conformance
//! against the committed vectors, the tensor-core models, the intervals and the generators. Only
//! nvfp4-model is linked; the harness's and the tool's tests live with their crates.

mod common;

mod blackwell_mmasim_vectors;
mod blackwell_mxf8f6f4_vectors;
mod conformance_formats;
mod conformance_mma;
mod conformance_mx_fp8;
mod conformance_quant;
mod exact_grid;
mod fuzz_inputs;
mod generators_and_layouts;
mod interval_properties;
mod mma_fast;
mod model_algebra;
mod scaled_gemm;
