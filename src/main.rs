use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = nvfp4_oracle::cli::Cli::parse();
    let result = nvfp4_oracle::cli::run(cli);
    // Whatever the outcome: the private temporary folder (worker scripts, scratch) goes.
    nvfp4_harness::private_tmp::remove();
    // Interrupted while it ran: whatever the interrupted work returned, the process ends as the
    // signal says (the removal thread raises it too; whichever comes first).
    if let Some(signal) = nvfp4_harness::private_tmp::signalled() {
        return end_by_signal(signal);
    }
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            match err {
                nvfp4_harness::Error::Timeout { .. } => {
                    ExitCode::from(nvfp4_oracle::cli::exit_code::EXIT_TIMEOUT)
                }
                nvfp4_harness::Error::Interrupted { signal } => end_by_signal(signal),
                _ => ExitCode::from(nvfp4_oracle::cli::exit_code::EXIT_BAD_INPUT),
            }
        }
    }
}

/// Ends the process as `signal` would have, once what it interrupted is cleaned up: a shell or
/// a CI runner sees the usual status (killed by SIGTERM), not an error of this program.
fn end_by_signal(signal: i32) -> ExitCode {
    // SAFETY: restoring the default disposition and raising the signal in this process only.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}

/// A reader that stops reading (`nvfp4-oracle variants | head -1`) is not an error of this
/// program. Rust ignores SIGPIPE, so `println!` then panics on EPIPE; instead, the process ends
/// as Unix tools do when their reader goes away: killed by SIGPIPE, with nothing printed.
///
/// SIGPIPE is not simply restored to its default at start: `certify` writes requests into its
/// workers' pipes, and a worker that died must be a verdict (EPIPE on that write), not the
/// death of the parent. Only a failed write to this process's own stdout ends it.
fn exit_quietly_on_broken_pipe() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        // std's wording for a print that failed: "failed printing to stdout: <io error>".
        let broken = std::io::Error::from_raw_os_error(libc::EPIPE).to_string();
        if message.starts_with("failed printing to stdout") && message.ends_with(&broken) {
            nvfp4_oracle::cli::end_on_closed_stdout();
        }
        default_hook(info);
    }));
}
