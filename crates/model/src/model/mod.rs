//! The exact model: exact dot products, the declared reference answer, and acceptance intervals.

pub mod bounds;
pub mod exact;
pub mod exact_grid;
pub mod mma;
pub mod portable_math;
pub mod reference;
pub mod replay;
pub mod scaled_gemm;

pub use reference::{
    dual_gemm_reference, gemm_reference, group_gemm_reference, output_rows, problem_reference,
    problem_reference_with_progress, Reference, MODEL_VERSION,
};
