//! Writes every GPU variant's PTX (as NVRTC makes it for the variant's architecture) into a
//! directory, one `<variant>.ptx` each, for reading or for `ptxas -arch=sm_90a -v` (register
//! counts and spills) on a machine without a GPU. Needs libnvrtc on LD_LIBRARY_PATH.
//!
//!     cargo run --release --example kernel_ptx -- /tmp/ptx

use nvfp4_harness::gpu::compile_variant;
use nvfp4_harness::gpu::gpu_variants;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "kernel-ptx".to_string());
    std::fs::create_dir_all(&dir).expect("the output directory can be created");
    for variant in gpu_variants() {
        match compile_variant(&variant) {
            Ok(ptx) => {
                let path = format!("{dir}/{}.ptx", variant.name);
                std::fs::write(&path, ptx.to_src()).expect("the PTX file can be written");
                println!("{path}");
            }
            Err(err) => {
                eprintln!("{err}");
                std::process::exit(1);
            }
        }
    }
}
