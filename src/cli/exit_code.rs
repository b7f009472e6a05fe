//! The exit codes, stable for CI: what each command's status means is tabled in
//! docs/reference/exit-codes.md, which `--help` and the README link to. clap's own usage
//! errors also exit 2.

/// A verdict of failure: a kernel failed, a check did not hold, an output was judged wrong.
pub const EXIT_FAIL: u8 = 1;
/// Bad usage or bad input: an unreadable file, a wrong shape, an unknown name.
pub const EXIT_BAD_INPUT: u8 = 2;
/// `certify --exact`: no interval failure, but some kernel's outputs differ from the replay of
/// its declared schedule, or it declares none.
pub const EXIT_NOT_EXACT: u8 = 3;
/// `certify`: nothing failed, but a kernel named on the command line (--kernel, --submission,
/// --library, --manifest) cannot run on this machine (no GPU, another architecture, a package
/// only its platform has, no torch), so nothing about it was judged. `bench`: nothing could be
/// timed on this machine.
pub const EXIT_UNAVAILABLE: u8 = 4;
/// `--baseline` (certify, merge, bench, preflight): worse than the baseline.
pub const EXIT_REGRESSION: u8 = 5;
/// `preflight`: a step (the submission's compilation, ptxas) did not end within `--timeout`
/// and was killed; not bad input, so not 2: the same command may pass with more time.
pub const EXIT_TIMEOUT: u8 = 6;
/// `certify`: the harness failed its own check: the GPU reference differed from the CPU model
/// on some case (that case and the rest were judged by the CPU model, so the verdicts stand,
/// but the harness needs a fix).
pub const EXIT_HARNESS_ERROR: u8 = 7;
