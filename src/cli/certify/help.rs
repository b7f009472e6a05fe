//! The help of certify's case counts, written from the constants the campaign uses, so that
//! `certify --help` cannot say one default while the code draws another.

use nvfp4_harness::certify::{
    DEFAULT_CASES, DEFAULT_CPU_REGIME_CASES, DEFAULT_GPU_CASES, DEFAULT_GPU_RANGE_CASES,
    DEFAULT_GPU_REGIME_CASES,
};

pub(super) fn cases() -> String {
    format!(
        "Random cases per kernel (after the golden and the fixed edge cases). Default: \
         {DEFAULT_GPU_CASES} where the model's reference is computed on the GPU (see \
         --reference), else {DEFAULT_CASES}."
    )
}

pub(super) fn regime_cases() -> String {
    format!(
        "GPU kernels: cases drawn in the deployment regimes (decode, narrow-wide, wide N, tall \
         M, many batches, deep K, outputs past 2^30, past 16,384 tiles, public models' shapes): \
         one at each regime's wide end, the rest at modest shapes inside the regimes, in turn. \
         Default: {DEFAULT_GPU_REGIME_CASES} where the model's reference is computed on the GPU, \
         else one per regime ({DEFAULT_CPU_REGIME_CASES}). A CPU kernel draws none."
    )
}

pub(super) fn range_cases() -> String {
    format!(
        "GPU kernels: cases drawn so that every pair of shape ranges (each of M, N, K and L cut \
         into octaves: M 1-131071, N 1-262143, K 16-131071, L 1-511) holds at least one case \
         that one GPU can run, then band triples (two octaves a dimension) up to this many \
         cases in all; values at the places kernels branch (multiples of 64, 128, 256, 1024 and \
         one either side, odd tile counts, K not a multiple of 64). The certificate lists the \
         cells reached and those left (outside the kernel's support, past the per-case bound), \
         and bench refuses a shape in a pair no case reached. Default: \
         {DEFAULT_GPU_RANGE_CASES} where the model's reference is computed on the GPU, else 0 \
         (the CPU model cannot judge them in time). See docs/guides/coverage.md."
    )
}
