//! A GPU MODE submission's CuTe DSL kernels compiled for a named architecture without running
//! anything: `compile_worker.py` (embedded) runs the submission's compilation in the worker
//! sandbox with CuTe DSL told to keep every kernel's PTX and the host code, and this side reads
//! what it wrote: the PTX for the census, each launch's dynamic shared memory and block size from
//! the host code (the kernel's own files do not hold them), or the compiler's refusal in words.

use super::bounded::{self, Deadline};
use crate::error::{Error, Result};
use crate::worker::external::python_program;
use crate::worker::parent::WorkerCommand;
use crate::worker::sandbox::{cache_env, secrets_dir, wrap, SandboxPaths};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The script that drives the compilation, embedded so the binary alone can preflight.
pub const COMPILE_WORKER: &str = include_str!("compile_worker.py");

/// How long a compilation may take unless the caller says: imports (torch, CuTe DSL) and every
/// kernel's compile.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(600);

/// One kernel launch found in the host code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    pub dynamic_shared: Option<u64>,
    pub threads: Option<u32>,
}

/// What came of compiling a submission.
pub enum Compilation {
    /// Compiled: each PTX file's text, the launches of the host code.
    Compiled {
        ptx: Vec<(String, String)>,
        launches: Vec<Launch>,
        /// How the compilation was driven (`compile_kernel()`).
        driven_by: String,
        /// torch was not installed and a placeholder stood in for it.
        torch_placeholder: bool,
    },
    /// The compiler (or the submission) refused: in which phase, its message, what it means.
    Refused {
        phase: String,
        message: String,
        meaning: Option<&'static str>,
    },
}

#[derive(serde::Deserialize)]
struct WorkerResult {
    phase: Option<String>,
    error: Option<String>,
    torch: String,
    driven_by: Option<String>,
    files: Vec<String>,
}

/// Compiles `submission` for `arch` in the sandbox and reads what the compilation wrote; a
/// compilation past `deadline` is killed with everything it started.
pub fn compile(submission: &Path, arch: &str, deadline: &Deadline) -> Result<Compilation> {
    let submission = std::path::absolute(submission).map_err(|err| Error::file(submission, err))?;
    if !submission.is_file() {
        return Err(Error::file(&submission, "no such file"));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let scratch = std::env::temp_dir().join(format!(
        "nvfp4-oracle-preflight-{}-{nanos}",
        std::process::id()
    ));
    let dump = scratch.join("dump");
    let script_dir = scratch.join("script");
    for dir in [&dump, &script_dir] {
        std::fs::create_dir_all(dir).map_err(|err| Error::file(dir, err))?;
    }
    let script = script_dir.join("compile_worker.py");
    std::fs::write(&script, COMPILE_WORKER).map_err(|err| Error::file(&script, err))?;
    let outcome =
        run_worker(&submission, arch, &script, &dump, deadline).and_then(|log| read(&dump, &log));
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

/// Runs the compile worker in the sandbox; its combined output, for a failure's message.
fn run_worker(
    submission: &Path,
    arch: &str,
    script: &Path,
    dump: &Path,
    deadline: &Deadline,
) -> Result<String> {
    let folder = |path: &Path| path.parent().map(Path::to_path_buf);
    let command = WorkerCommand {
        program: python_program(),
        args: vec![
            "-u".into(),
            script.display().to_string(),
            "--submission".into(),
            submission.display().to_string(),
            "--arch".into(),
            arch.into(),
            // Relative: its working directory is the dump folder, the one it may write (the
            // sandbox binds every folder named on the command line read-only).
            "--dump".into(),
            ".".into(),
        ],
        env: Vec::new(),
        start_timeout: deadline.limit(),
        sandbox: None,
    };
    let paths = SandboxPaths {
        readable: [folder(submission), folder(script)]
            .into_iter()
            .flatten()
            .collect(),
        hidden: vec![secrets_dir()],
        ..SandboxPaths::default()
    };
    // Its own empty compiler cache, removed with the scratch folder: nothing a compilation
    // writes reaches a later worker.
    let cache = dump.with_file_name("cache");
    std::fs::create_dir_all(&cache).map_err(|err| Error::file(&cache, err))?;
    let mut command = command;
    command.env.extend(cache_env(&cache));
    let (wrapped, isolation) = wrap(&command, &paths, dump, &cache);
    if !isolation.sandboxed {
        eprintln!(
            "warning: the submission's compilation runs NOT sandboxed: {}",
            isolation.description
        );
    }
    let log = dump.with_extension("log");
    let log_file = std::fs::File::create(&log).map_err(|err| Error::file(&log, err))?;
    let mut worker = Command::new(&wrapped.program);
    worker
        .args(&wrapped.args)
        .envs(wrapped.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log_file.try_clone().map_err(|err| Error::file(&log, err))?)
        .stderr(log_file);
    bounded::run(&mut worker, "the submission's compilation", deadline, |err| {
        Error::Usage(format!(
            "cannot start {} for the compilation: {err} (NVFP4_ORACLE_PYTHON names the \
             interpreter with nvidia-cutlass-dsl installed)",
            command.program.display()
        ))
    })?;
    Ok(std::fs::read_to_string(&log).unwrap_or_default())
}

/// What the worker left in `dump`.
fn read(dump: &Path, log: &str) -> Result<Compilation> {
    let result_path = dump.join("result.json");
    let Ok(text) = std::fs::read_to_string(&result_path) else {
        let tail: Vec<&str> = log.lines().rev().take(12).collect();
        return Err(Error::Usage(format!(
            "the compilation ended without a result (the interpreter failed, or the submission \
             ended its process); its last lines:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )));
    };
    let result: WorkerResult = serde_json::from_str(&text)
        .map_err(|err| Error::file(&result_path, format!("unreadable result: {err}")))?;
    if let Some(phase) = result.phase {
        let message = result.error.unwrap_or_default();
        if phase == "no-cute-dsl" {
            return Err(Error::Usage(message));
        }
        return Ok(Compilation::Refused {
            meaning: meaning(&message),
            phase,
            message,
        });
    }
    // The files were written by untrusted code: only regular files, never a link it planted to
    // something this process may read and it may not (the certificate key, another user's file).
    let read_file = |name: &str| {
        let path = dump.join(name);
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if !regular {
            return Err(Error::Usage(format!(
                "the compilation left {name}, which is not a regular file: refused"
            )));
        }
        std::fs::read_to_string(&path).map_err(|err| Error::file(&path, err))
    };
    let mut ptx = Vec::new();
    let mut launches = Vec::new();
    for name in &result.files {
        // Names come from an untrusted process: only plain names in the dump folder.
        if name.contains('/') || name.starts_with('.') {
            continue;
        }
        if name.ends_with(".ptx") {
            ptx.push((name.clone(), read_file(name)?));
        } else if name.starts_with("host-") && name.ends_with(".mlir") {
            launches.extend(host_launches(&read_file(name)?));
        }
    }
    let Some(driven_by) = result.driven_by.filter(|_| !ptx.is_empty()) else {
        return Err(Error::Usage(
            "the submission was imported but nothing was compiled: preflight drives CuTe DSL \
             through a `compile_kernel()` without parameters (GPU MODE's template), and a \
             kernel compiled only inside custom_kernel needs inputs on a GPU of that \
             architecture; compile it to PTX yourself and use --ptx"
                .into(),
        ));
    };
    Ok(Compilation::Compiled {
        ptx,
        launches,
        driven_by,
        torch_placeholder: result.torch == "placeholder",
    })
}

/// The launches in CuTe DSL's lowered host code: each `cudaLaunchConfig_t` it fills (grid,
/// block, dynamic shared memory, stream, attributes), read where its block size and dynamic
/// shared memory are stored as constants.
pub fn host_launches(ir: &str) -> Vec<Launch> {
    const CONFIG: &str = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>";
    let mut constants = std::collections::HashMap::new();
    // (config base, field) of each field pointer.
    let mut fields = std::collections::HashMap::new();
    // config base -> (block extents, dynamic shared memory), in order of appearance.
    let mut configs: Vec<(String, [Option<u64>; 3], Option<u64>)> = Vec::new();
    for line in ir.lines().map(str::trim) {
        let Some((name, rest)) = line.split_once(" = ") else {
            if let Some(stored) = line.strip_prefix("llvm.store ") {
                let mut parts = stored.split([',', ' ']).filter(|s| !s.is_empty());
                let (Some(value), Some(pointer)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let (Some((base, field)), Some(&value)) =
                    (fields.get(pointer), constants.get(value))
                else {
                    continue;
                };
                if let Some(config) = configs.iter_mut().find(|c| &c.0 == base) {
                    match field {
                        Field::Block(i) => config.1[*i] = Some(value),
                        Field::DynamicShared => config.2 = Some(value),
                    }
                }
            }
            continue;
        };
        if let Some(constant) = rest.strip_prefix("llvm.mlir.constant(") {
            let value = constant.split([' ', ':', ')']).next().unwrap_or("");
            if let Ok(value) = value.parse::<u64>() {
                constants.insert(name.to_string(), value);
            }
        } else if let Some(gep) = rest.strip_prefix("llvm.getelementptr ") {
            if !gep.ends_with(CONFIG) {
                continue;
            }
            let Some((base, indices)) = gep.split_once('[') else {
                continue;
            };
            let indices = indices.split(']').next().unwrap_or("");
            let field = match indices.split(", ").collect::<Vec<_>>()[..] {
                ["0", "2"] => Field::DynamicShared,
                ["0", "1", i] => match i.parse::<usize>() {
                    Ok(i) if i < 3 => Field::Block(i),
                    _ => continue,
                },
                _ => continue,
            };
            if !configs.iter().any(|c| c.0 == base) {
                configs.push((base.to_string(), [None; 3], None));
            }
            fields.insert(name.to_string(), (base.to_string(), field));
        }
    }
    configs
        .into_iter()
        .map(|(_, block, dynamic_shared)| Launch {
            dynamic_shared,
            threads: match block {
                [Some(x), Some(y), Some(z)] => u32::try_from(x * y * z).ok(),
                _ => None,
            },
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
enum Field {
    Block(usize),
    DynamicShared,
}

/// The compiler's refusal in words, for the messages CuTe DSL gives for the Blackwell MMA.
pub fn meaning(message: &str) -> Option<&'static str> {
    let rules: [(&str, &str); 6] = [
        (
            "expects the M-mode to be 128, but got",
            "the block-scaled MMA (NVFP4, MXFP4) takes an M tile of 128 per CTA; 256 needs a \
             CTA pair (cta_group::2)",
        ),
        (
            "expects the M-mode to be 128 or 256",
            "with a CTA pair (cta_group::2) the MMA takes an M tile of 128 or 256",
        ),
        (
            "expects the N-mode to satisfy",
            "the MMA's N tile is out of its range: 8 to 256 in steps of 8 on one CTA, 16 to 256 \
             in steps of 16 with a CTA pair (the message gives the rule for this MMA)",
        ),
        (
            "expects the scale factor vector size to be 16 or 32",
            "a scale covers 16 elements (NVFP4) or 32 (MXFP4, MXFP8), nothing else",
        ),
        (
            "expects the instruction extent in the K-mode",
            "the MMA's K extent is fixed by its operand type (64 for FP4 operands)",
        ),
        (
            "expects arch to be one of",
            "this instruction does not exist on the architecture compiled for: name the \
             target (--arch sm_100a)",
        ),
    ];
    rules
        .iter()
        .find(|(pattern, _)| message.contains(pattern))
        .map(|(_, meaning)| *meaning)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CuTe DSL 4.8.1's lowered host code for GPU MODE's dual-GEMM submission, cut to the
    /// launch configuration's stores (names and values as compiled).
    const HOST: &str = r#"
    %21 = llvm.mlir.constant(55424 : i64) : i64
    %23 = llvm.mlir.constant(1 : i32) : i32
    %43 = llvm.mlir.constant(128 : i32) : i32
    %338 = llvm.alloca %337 x !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)> : (i32) -> !llvm.ptr
    %341 = llvm.getelementptr %338[0, 1, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %43, %341 : i32, !llvm.ptr
    %342 = llvm.getelementptr %338[0, 1, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %23, %342 : i32, !llvm.ptr
    %343 = llvm.getelementptr %338[0, 1, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %23, %343 : i32, !llvm.ptr
    %344 = llvm.getelementptr %338[0, 2] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %21, %344 : i64, !llvm.ptr
    %345 = llvm.getelementptr %338[0, 0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>
    llvm.store %68, %345 : i32, !llvm.ptr
    "#;

    #[test]
    fn a_launch_reads_its_block_and_dynamic_shared_memory() {
        assert_eq!(
            host_launches(HOST),
            vec![Launch {
                dynamic_shared: Some(55424),
                threads: Some(128)
            }]
        );
        // A size computed at run time (not a constant) is unknown, not guessed.
        let dynamic = HOST.replace("llvm.store %21, %344", "llvm.store %99, %344");
        assert_eq!(host_launches(&dynamic)[0].dynamic_shared, None);
        assert_eq!(host_launches("llvm.store %1, %2 : i64, !llvm.ptr"), vec![]);
    }

    #[test]
    fn the_compilers_refusals_in_words() {
        let m = meaning("DSLUserCodeError: expects the M-mode to be 128, but got 64").unwrap();
        assert!(m.contains("128 per CTA"), "{m}");
        assert!(meaning("expects the N-mode to satisfy 8 <= N <= 256 and N % 8 == 0").is_some());
        assert_eq!(meaning("NameError: name 'x' is not defined"), None);
    }
}
