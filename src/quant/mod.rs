//! NVFP4 quantization (placeholder module, filled in below).
