//! `nvfp4-oracle variants`: every kernel under test, what it solves, whether it can run here.

use nvfp4_harness::gpu::device_info;
use nvfp4_harness::worker::registry;
use nvfp4_harness::Result;
use std::process::ExitCode;

pub fn run() -> Result<ExitCode> {
    match device_info() {
        Ok(info) => println!("GPU: {}", info.describe()),
        Err(reason) => println!("GPU: none ({reason})"),
    }
    println!(
        "| kernel | problem | supported shapes | runs here | declared schedule (certify --exact) | what it is |"
    );
    println!("|---|---|---|---|---|---|");
    for kernel in registry() {
        let runs = match kernel.availability() {
            Ok(()) => "yes".to_string(),
            Err(reason) => format!("no: {reason}"),
        };
        let schedule = kernel
            .schedule()
            .map_or_else(|| "-".to_string(), |s| s.to_string());
        println!(
            "| {} | {} | {} | {runs} | {schedule} | {} |",
            kernel.name(),
            kernel.problem().name(),
            kernel.support().describe(),
            kernel.description()
        );
    }
    Ok(ExitCode::SUCCESS)
}
