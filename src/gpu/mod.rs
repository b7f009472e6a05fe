//! The GPU backend: device discovery, NVRTC compilation with a cache, the variant registry, the
//! hardened launch, and the worker processes that isolate each variant. CUDA is loaded at run
//! time: on a machine without it every GPU variant reports why it cannot run.

pub mod bench;
pub mod compile;
pub mod conditions;
pub mod device;
pub mod launch;
pub mod library;
pub mod library_timing;
pub mod variants;
pub mod worker;
