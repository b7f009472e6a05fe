//! `nvfp4-oracle variants`: every kernel under test, what it solves, whether it can run here.

use crate::certify::cpu_kernels::Bug;
use crate::certify::registry;
use crate::error::Result;
use std::process::ExitCode;

pub fn run() -> Result<ExitCode> {
    println!("| kernel | problem | supported shapes | runs here | what it is |");
    println!("|---|---|---|---|---|");
    for kernel in registry() {
        let runs = match kernel.availability() {
            Ok(()) => "yes".to_string(),
            Err(reason) => format!("no: {reason}"),
        };
        let what = Bug::ALL
            .iter()
            .find(|bug| kernel.name().ends_with(bug.slug()) && kernel.name().contains("mutant"))
            .map_or(
                "correct reference kernel: f32 accumulation in a blocked K order",
                |bug| bug.description(),
            );
        println!(
            "| {} | {} | {} | {runs} | {what} |",
            kernel.name(),
            kernel.problem().name(),
            kernel.support().describe()
        );
    }
    Ok(ExitCode::SUCCESS)
}
