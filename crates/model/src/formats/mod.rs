//! The number formats of NVFP4: e2m1 data, e4m3fn block scales, their packing, and the shared
//! rounding core; UE8M0, the MX formats' block scale; e5m2, MXFP8's other element format; every
//! value decoded exactly (`exact_value`) for the block-scaled family's model. fp16 and bf16 come
//! from the `half` crate, with our single-rounding conversions from f64.

pub mod bf16;
pub mod e2m1;
pub mod e4m3;
pub mod e5m2;
pub mod exact_value;
pub mod fp16;
pub mod minifloat;
pub mod packing;
pub mod ue8m0;

pub use bf16::{bf16_from_f64_rne, bf16_to_exact};
pub use e2m1::{E2m1, E2M1_MAX};
pub use e4m3::{
    E4m3, E4m3Overflow, E4M3_MAX, E4M3_MAX_CODE, E4M3_MIN_NORMAL, E4M3_NAN_CODE, E4M3_ONE_CODE,
};
pub use e5m2::E5m2;
pub use exact_value::ExactValue;
pub use fp16::fp16_from_f64_rne;
pub use packing::{e2m1_at, pack_e2m1, unpack_e2m1};
pub use ue8m0::Ue8m0;
