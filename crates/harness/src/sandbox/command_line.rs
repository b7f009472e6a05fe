//! The launcher's command line, both ways: the parent writes it for every sandboxed worker
//! (`nvfp4-oracle sandbox [PATHS] -- PROGRAM ARGS`) and the launcher reads it back. One list of
//! flags, so the two sides cannot drift.

use super::{LauncherArgs, SandboxPaths};
use std::path::{Path, PathBuf};

/// The subcommand that runs the launcher.
pub const SANDBOX_COMMAND: &str = "sandbox";

/// The launcher's arguments for `paths` and the worker's `program` and `args`, to run as
/// `launcher ARGS`.
pub fn launcher_args(paths: &SandboxPaths, program: &Path, args: &[String]) -> Vec<String> {
    let mut out = vec![SANDBOX_COMMAND.to_string()];
    for dir in &paths.writable {
        out.extend(["--writable".into(), dir.display().to_string()]);
    }
    for dir in &paths.readable {
        out.extend(["--readable".into(), dir.display().to_string()]);
    }
    for dir in &paths.hidden {
        out.extend(["--hide".into(), dir.display().to_string()]);
    }
    if let Some(dir) = &paths.workdir {
        out.extend(["--workdir".into(), dir.display().to_string()]);
    }
    if let Some(dir) = &paths.cache {
        out.extend(["--cache".into(), dir.display().to_string()]);
    }
    out.push("--".into());
    out.push(program.display().to_string());
    out.extend(args.iter().cloned());
    out
}

impl LauncherArgs {
    /// Reads what [`launcher_args`] wrote, after the subcommand: `--writable DIR`, `--readable
    /// DIR` and `--hide DIR` (each repeatable), `--workdir DIR`, `--cache DIR`, `--probe`, then
    /// `--` and the worker's program and arguments.
    pub fn parse(args: &[String]) -> Result<LauncherArgs, String> {
        let mut parsed = LauncherArgs::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--" {
                let command: Vec<String> = rest.cloned().collect();
                let Some((program, args)) = command.split_first() else {
                    break;
                };
                parsed.program = PathBuf::from(program);
                parsed.args = args.to_vec();
                return Ok(parsed);
            }
            if arg == "--probe" {
                parsed.probe = true;
                continue;
            }
            if !arg.starts_with('-') {
                // A command line parser that took a leading `--` as its own escape hands the
                // worker's program over without it.
                parsed.program = PathBuf::from(arg);
                parsed.args = rest.cloned().collect();
                return Ok(parsed);
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            let mut value = || {
                inline
                    .clone()
                    .or_else(|| rest.next().cloned())
                    .map(PathBuf::from)
                    .ok_or_else(|| format!("sandbox: {flag} needs a directory"))
            };
            let paths = &mut parsed.paths;
            match flag {
                "--writable" => paths.writable.push(value()?),
                "--readable" => paths.readable.push(value()?),
                "--hide" => paths.hidden.push(value()?),
                "--workdir" => paths.workdir = Some(value()?),
                "--cache" => paths.cache = Some(value()?),
                _ => return Err(format!("sandbox: unexpected argument '{arg}'")),
            }
        }
        Err("sandbox: the worker's program is missing: `sandbox [PATHS] -- PROGRAM ARGS`".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_parent_writes_the_launcher_reads() {
        let paths = SandboxPaths {
            writable: vec!["/w1".into(), "/w2".into()],
            readable: vec!["/r".into()],
            hidden: vec!["/secrets".into()],
            declared: Vec::new(),
            workdir: Some("/w1".into()),
            cache: Some("/cache".into()),
        };
        let args = launcher_args(
            &paths,
            Path::new("/bin/worker"),
            &["--x".into(), "1".into()],
        );
        assert_eq!(args[0], SANDBOX_COMMAND);
        let parsed = LauncherArgs::parse(&args[1..]).unwrap();
        assert_eq!(parsed.paths.writable, paths.writable);
        assert_eq!(parsed.paths.readable, paths.readable);
        assert_eq!(parsed.paths.hidden, paths.hidden);
        assert_eq!(parsed.paths.workdir, paths.workdir);
        assert_eq!(parsed.paths.cache, paths.cache);
        assert_eq!(parsed.program, PathBuf::from("/bin/worker"));
        assert_eq!(parsed.args, ["--x", "1"]);
        assert!(!parsed.probe);
        let probe: Vec<String> = ["--probe", "--", "true"].map(String::from).into();
        assert!(LauncherArgs::parse(&probe).unwrap().probe);
        assert!(
            LauncherArgs::parse(&["--probe".into()]).is_err(),
            "no program"
        );
        assert!(LauncherArgs::parse(&["--bogus".into()]).is_err());
        let bare: Vec<String> = ["/bin/worker", "-x"].map(String::from).into();
        let parsed = LauncherArgs::parse(&bare).unwrap();
        assert_eq!(
            (parsed.program, parsed.args),
            ("/bin/worker".into(), vec!["-x".into()])
        );
    }
}
