//! The `gpu-worker` command line, both ways: the parent writes it for a worker of a built-in
//! variant, of a C-ABI library or of the timing baseline, and the worker reads it back. One
//! list of flags, so the two sides cannot drift.

use super::serve::WorkerTarget;
use crate::error::{Error, Result};
use crate::kernels::manifest::ArchRequirement;
use std::path::PathBuf;

/// The subcommand that serves one kernel's launches.
pub const GPU_WORKER_COMMAND: &str = "gpu-worker";

impl WorkerTarget {
    /// The worker's arguments: `gpu-worker --variant NAME`, `gpu-worker --library PATH --symbol
    /// NAME` or `gpu-worker --timing-baseline`, then `--arch ARCH` where one is given.
    pub fn worker_args(&self, arch: Option<&str>) -> Vec<String> {
        let mut args = vec![GPU_WORKER_COMMAND.to_string()];
        match self {
            WorkerTarget::Variant(name) => args.extend(["--variant".into(), name.clone()]),
            WorkerTarget::Library { path, symbol } => args.extend([
                "--library".into(),
                path.display().to_string(),
                "--symbol".into(),
                symbol.clone(),
            ]),
            WorkerTarget::Baseline => args.push("--timing-baseline".into()),
        }
        if let Some(arch) = arch {
            args.extend(["--arch".into(), arch.to_string()]);
        }
        args
    }

    /// Reads what [`WorkerTarget::worker_args`] wrote, after the subcommand.
    pub fn parse_worker_args(args: &[String]) -> Result<(WorkerTarget, Option<ArchRequirement>)> {
        let usage = |what: String| Error::Usage(format!("gpu-worker: {what}"));
        let (mut variant, mut library, mut symbol, mut arch) = (None, None, None, None);
        let mut baseline = false;
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            if arg == "--timing-baseline" {
                baseline = true;
                continue;
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            let value = inline
                .or_else(|| rest.next().cloned())
                .ok_or_else(|| usage(format!("{flag} needs a value")))?;
            match flag {
                "--variant" => variant = Some(value),
                "--library" => library = Some(PathBuf::from(value)),
                "--symbol" => symbol = Some(value),
                "--arch" => arch = Some(value),
                _ => return Err(usage(format!("unexpected argument '{arg}'"))),
            }
        }
        if baseline && (variant.is_some() || library.is_some()) {
            return Err(usage(
                "--timing-baseline serves no kernel: no --variant or --library".into(),
            ));
        }
        if variant.is_some() && library.is_some() {
            return Err(usage("--variant or --library, not both".into()));
        }
        let target = match (variant, library, symbol) {
            _ if baseline => WorkerTarget::Baseline,
            (Some(name), _, _) => WorkerTarget::Variant(name),
            (None, Some(path), Some(symbol)) => WorkerTarget::Library { path, symbol },
            _ => {
                return Err(Error::Usage(
                    "gpu-worker needs --variant or --library and --symbol".into(),
                ))
            }
        };
        let arch = arch
            .map(|text| {
                ArchRequirement::parse(&text)
                    .ok_or_else(|| Error::Usage(format!("bad --arch '{text}'")))
            })
            .transpose()?;
        Ok((target, arch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_parent_writes_the_worker_reads() {
        let targets = [
            WorkerTarget::Variant("hopper-baseline".into()),
            WorkerTarget::Library {
                path: "/lib/libk.so".into(),
                symbol: "nvfp4_dual_gemm".into(),
            },
            WorkerTarget::Baseline,
        ];
        for target in targets {
            let args = target.worker_args(None);
            assert_eq!(args[0], GPU_WORKER_COMMAND);
            let (read, arch) = WorkerTarget::parse_worker_args(&args[1..]).unwrap();
            assert_eq!(read.worker_args(None), args);
            assert!(arch.is_none());
        }
        let with_arch = WorkerTarget::Baseline.worker_args(Some("sm_90a"));
        let (_, arch) = WorkerTarget::parse_worker_args(&with_arch[1..]).unwrap();
        assert_eq!(arch.map(|a| a.to_string()).as_deref(), Some("sm_90a"));
        let bad = ["--library".to_string(), "/lib/libk.so".into()];
        assert!(WorkerTarget::parse_worker_args(&bad).is_err(), "no symbol");
    }
}
