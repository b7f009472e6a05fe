//! `nvfp4-oracle variants`: every kernel under test, what it solves, whether it can run here.

use crate::certify::registry;
use crate::error::Result;
use crate::gpu::device::device_info;
use std::process::ExitCode;

pub fn run() -> Result<ExitCode> {
    match device_info() {
        Ok(info) => println!("GPU: {}", info.describe()),
        Err(reason) => println!("GPU: none ({reason})"),
    }
    println!("| kernel | problem | supported shapes | runs here | what it is |");
    println!("|---|---|---|---|---|");
    for kernel in registry() {
        let runs = match kernel.availability() {
            Ok(()) => "yes".to_string(),
            Err(reason) => format!("no: {reason}"),
        };
        println!(
            "| {} | {} | {} | {runs} | {} |",
            kernel.name(),
            kernel.problem().name(),
            kernel.support().describe(),
            kernel.description()
        );
    }
    Ok(ExitCode::SUCCESS)
}
