//! The GPU backend: device discovery, NVRTC compilation with a cache, the variant registry, the
//! hardened launch, the C-ABI library loader, the determinism check's conditions, the
//! in-process bench of the built-in variants and the parent's L2 reset before a worker's timed
//! calls ([`l2`]). CUDA is loaded at run time: on a machine without
//! it every GPU variant reports why it cannot run. The worker processes that run each GPU kernel
//! in isolation, and the `gpu-worker` serving loop built on this module, are in the `worker`
//! module, which uses this one.

pub mod bench;
pub mod compile;
pub mod conditions;
pub mod device;
pub mod fenced;
pub mod l2;
pub mod launch;
pub mod library;
pub mod roofline;
pub mod variants;
