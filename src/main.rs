use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = nvfp4_oracle::cli::Cli::parse();
    match nvfp4_oracle::cli::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::from(nvfp4_oracle::cli::EXIT_BAD_INPUT)
        }
    }
}
