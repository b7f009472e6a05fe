//! Nothing shared between workers, and nothing that tells them apart: a fake worker
//! (tests/fixtures/fake_worker.py, mode `record`) reports what it sees, in a campaign's worker, in
//! that worker's successor and in a check's copy started under a tool, as a trusted worker
//! (no sandbox, no snapshot) and, where this machine can build the sandbox, as an untrusted
//! one (sandboxed, its compiler cache starting from the build worker's snapshot). No GPU needed.

use crate::common;

use nvfp4_harness::kernels::{KernelUnderTest, ToolWrapper};
use nvfp4_harness::sandbox::dev::{kept_in_dev, DEV_LINKS};
use nvfp4_harness::sandbox::{SandboxPaths, CACHE_INSIDE};
use serde_json::Value;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn python_here() -> bool {
    let here = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !here {
        common::skip("no python3 here to run the fake worker");
    }
    here
}

/// The ways to start a worker on this machine: plainly, and in the sandbox where it holds.
fn sandbox_variants() -> Vec<Option<SandboxPaths>> {
    match common::sandbox_here() {
        Ok(()) => vec![None, Some(SandboxPaths::default())],
        Err(why) => {
            common::skip(&format!(
                "no sandbox on this machine ({why}): plain workers only"
            ));
            vec![None]
        }
    }
}

/// A worker's record of what it saw once it started (`prepare`), and its scratch folder, the
/// parent of its working directory: where the parent put its inputs, outputs and cache.
fn record(kernel: &dyn KernelUnderTest) -> (Value, PathBuf) {
    kernel.prepare().expect("the fake worker starts");
    let text = kernel.environment().python.expect("the record");
    let value: Value = serde_json::from_str(&text).unwrap();
    let cwd = PathBuf::from(value["cwd"].as_str().expect("a working directory"));
    (value, cwd.parent().unwrap().to_path_buf())
}

/// `value` with `scratch` written as `<worker>` and the inode numbers of its pipes and sockets
/// left out: what is left is the same for every worker.
fn without_token(value: &Value, scratch: &Path) -> Value {
    let text = value
        .to_string()
        .replace(scratch.to_str().unwrap(), "<worker>");
    let mut value: Value = serde_json::from_str(&text).unwrap();
    for target in value["descriptors"].as_object_mut().unwrap().values_mut() {
        let kind = target
            .as_str()
            .unwrap()
            .split(":[")
            .next()
            .unwrap()
            .to_string();
        *target = Value::String(kind);
    }
    // Set by a shell between the parent and the worker, if any (python3 may be a pyenv shim):
    // its working directory, compared already.
    value["env"].as_object_mut().unwrap().remove("PWD");
    // The worker's own random marker.
    value.as_object_mut().unwrap().remove("token");
    value
}

/// Equal, or which parts of the records differ.
fn assert_same(a: &Value, b: &Value, what: &str) {
    let differing: Vec<String> = a
        .as_object()
        .unwrap()
        .iter()
        .filter(|(key, value)| b.get(key.as_str()) != Some(value))
        .map(
            |(key, value)| match (value.as_object(), b[key.as_str()].as_object()) {
                // The environment, variable by variable.
                (Some(mine), Some(theirs)) => {
                    let names = mine.keys().chain(theirs.keys());
                    let differ: std::collections::BTreeSet<String> = names
                        .filter(|n| mine.get(n.as_str()) != theirs.get(n.as_str()))
                        .map(|n| {
                            format!(
                                "{n}: {:?} vs {:?}",
                                mine.get(n.as_str()),
                                theirs.get(n.as_str())
                            )
                        })
                        .collect();
                    format!("{key}: {differ:?}")
                }
                _ => format!("{key}: {value} vs {}", b[key.as_str()]),
            },
        )
        .collect();
    assert!(differing.is_empty(), "{what}: {differing:#?}");
    assert_eq!(a, b, "{what}");
}

/// A scratch folder's name is the oracle's process, the kernel's name and a random tag: nothing
/// says what the worker is for, or how many came before it.
fn assert_neutral(scratch: &Path, kernel: &str) {
    let name = scratch.file_name().unwrap().to_str().unwrap();
    let prefix = format!("nvfp4-oracle-{}-{kernel}-", std::process::id());
    let tag = name
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        tag.len() == 16 && tag.chars().all(|c| c.is_ascii_hexdigit()),
        "{name}"
    );
}

#[test]
fn campaign_and_check_workers_see_the_same_world_and_nothing_an_earlier_one_left() {
    if !python_here() {
        return;
    }
    for sandbox in sandbox_variants() {
        let sandboxed = sandbox.is_some();
        let name = format!("record-{}", if sandboxed { "sandboxed" } else { "plain" });
        let kernel = common::fake_worker_kernel(
            &name,
            &["record"],
            Vec::new(),
            sandbox,
            Duration::from_secs(10),
            Duration::from_secs(5),
        );
        let kernel_name = kernel.name().to_string();
        let (campaign, scratch) = record(&kernel);
        assert_eq!(Some(scratch.as_path()), kernel.input_dir().parent());
        assert_neutral(&scratch, &kernel_name);
        // The campaign's worker ends; the next one (after a crash, say) starts from an empty
        // cache and working directory: the marker the first left is gone, and so is its cache.
        kernel.finish();
        assert!(
            !scratch.join("cache").exists(),
            "the cache outlived its worker"
        );
        let (successor, successor_scratch) = record(&kernel);
        assert_eq!(successor_scratch, scratch);
        // A check's copy, started under a tool: a stand-in for compute-sanitizer that takes its
        // options, writes its log and runs the worker's command with the environment it was
        // given (in Python: a shell would drop variables whose names it cannot hold).
        let here = std::env::temp_dir().join(format!("nvfp4-isolation-{}", std::process::id()));
        let logs = here.join("logs");
        std::fs::create_dir_all(&logs).unwrap();
        let program = here.join("fake_tool.py");
        std::fs::write(
            &program,
            "#!/usr/bin/env python3\nimport os, sys\nargs = sys.argv[1:]\n\
             while args[0].startswith('--'):\n    args = args[2:]\nos.execvp(args[0], args)\n",
        )
        .unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let tool = ToolWrapper {
            program,
            args: [
                "--tool",
                "memcheck",
                "--log-file",
                &logs.join("tool.log").display().to_string(),
            ]
            .map(String::from)
            .to_vec(),
            slowdown: 1,
        };
        let check = kernel.under_tool(&tool).expect("a worker-backed kernel");
        let (checked, check_scratch) = record(check.as_ref());
        assert_neutral(&check_scratch, &kernel_name);
        assert_ne!(
            check_scratch, scratch,
            "a check's worker has a scratch folder of its own"
        );
        drop(check);
        drop(kernel);
        let mut start = scratch.clone().into_os_string();
        start.push("-start");
        assert!(
            !Path::new(&start).exists() && !scratch.exists(),
            "{name}: the snapshot or the scratch folder outlived the kernel"
        );
        let _ = std::fs::remove_dir_all(&here);

        // What a worker finds in the places it may write: nothing for the oracle's own
        // (trusted) workers; for an untrusted kernel's, the same snapshot for each, what the
        // build worker left before any of them started (crates/harness/src/worker/fresh_start.rs), never
        // what the campaign's worker wrote.
        let campaign_token = campaign["token"].as_str().unwrap().to_string();
        for (what, seen, scratch) in [
            ("campaign", &campaign, &scratch),
            ("successor", &successor, &scratch),
            ("check", &checked, &check_scratch),
        ] {
            let found = seen["found"].as_object().unwrap();
            assert!(
                found
                    .values()
                    .all(|v| v.as_str() != Some(campaign_token.as_str())),
                "{name}: the {what}'s worker found the campaign's marker: {found:?}"
            );
            let expected: Vec<String> = if sandboxed {
                vec![Path::new(CACHE_INSIDE)
                    .join("marker-from-an-earlier-worker")
                    .display()
                    .to_string()]
            } else {
                Vec::new()
            };
            // Sandboxed, every worker sees its cache at one path: a compiler that records the
            // path (torch's load_inline) finds the snapshot's build its own. Plain, the
            // cache is the worker's scratch folder's.
            let cache = seen["env"]["XDG_CACHE_HOME"].as_str().unwrap().to_string();
            let expected_cache = if sandboxed {
                CACHE_INSIDE.to_string()
            } else {
                scratch.join("cache").display().to_string()
            };
            assert_eq!(cache, expected_cache, "{name}: the {what}'s cache");
            let keys: Vec<String> = found.keys().cloned().collect();
            assert_eq!(keys, expected, "{name}: what the {what}'s worker found");
        }
        let campaign = without_token(&campaign, &scratch);
        let successor = without_token(&successor, &scratch);
        assert_same(
            &campaign,
            &successor,
            &format!("{name}: a successor sees another world"),
        );
        let mut checked = without_token(&checked, &check_scratch);
        // What the tool adds, and no harness can hide from the worker it runs (compute-sanitizer
        // sets its injection variables, and is the worker's parent): in the sandbox, the
        // tool's own folder is bound in read-only, and its log's folder (the parent's FIFO),
        // read-only too, unless it lies inside the tool's.
        if sandboxed {
            let tools = [here.display().to_string(), logs.display().to_string()];
            let mounts = checked["mounts"].as_array_mut().unwrap();
            let before = mounts.len();
            mounts.retain(|m| !tools.iter().any(|t| m.as_str() == Some(t.as_str())));
            assert!(
                (1..=2).contains(&(before - mounts.len())),
                "the tool's folders are mounted once each: {} of them",
                before - mounts.len()
            );
        }
        assert_same(
            &campaign,
            &checked,
            &format!("{name}: a check's worker sees another world"),
        );
        // Nothing the harness gives a worker names its purpose: its command line, working
        // directory, scratch folder and the environment it adds to this process's.
        let added: Vec<String> = checked["env"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(key, _)| std::env::var_os(key.as_str()).is_none())
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        // The repository's own path is where the user cloned it (CI clones under /check):
        // the harness chose none of its words.
        let text = format!(
            "{} {} {} {added:?}",
            checked["argv"], checked["cwd"], checked["scratch"]
        )
        .replace(env!("CARGO_MANIFEST_DIR"), "<repository>")
        .to_lowercase();
        for word in ["sanitiz", "determinism", "check", "memcheck", "tool"] {
            assert!(!text.contains(word), "{name}: '{word}' in {text}");
        }
    }
}

/// Only stdin, stdout, stderr and the input socket reach a worker, however many descriptors the
/// parent leaves inheritable (its libraries may); in the sandbox, /dev holds the
/// NVIDIA nodes and the plain ones only, no disk or terminal of the host.
#[test]
fn only_the_protocols_descriptors_and_cudas_devices_reach_a_worker() {
    if !python_here() {
        return;
    }
    // An inheritable descriptor of the parent's, high enough that no protocol descriptor
    // lands on it. The other tests of this process start children meanwhile and inherit it too:
    // it is /dev/null, read by none of them, and it is closed when this test ends, even by a
    // panic, so that it outlives the test in no child started later.
    let file = std::fs::File::open("/dev/null").unwrap();
    // SAFETY: F_DUPFD makes a new descriptor (not close-on-exec) of an open file.
    let leaked = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD, 200) };
    assert!(leaked >= 200);
    struct Leaked(i32);
    impl Drop for Leaked {
        fn drop(&mut self) {
            // SAFETY: closes the descriptor made above, once.
            unsafe { libc::close(self.0) };
        }
    }
    let _leaked = Leaked(leaked);
    for sandbox in sandbox_variants() {
        let sandboxed = sandbox.is_some();
        let kernel = common::fake_worker_kernel(
            if sandboxed {
                "fds-sandboxed"
            } else {
                "fds-plain"
            },
            &["record"],
            Vec::new(),
            sandbox,
            Duration::from_secs(10),
            Duration::from_secs(5),
        );
        let (seen, _) = record(&kernel);
        let open: Vec<&String> = seen["descriptors"].as_object().unwrap().keys().collect();
        let mut open: Vec<i32> = open.iter().map(|fd| fd.parse().unwrap()).collect();
        open.sort_unstable();
        assert_eq!(
            open,
            [0, 1, 2, 3],
            "sandboxed {sandboxed}: {}",
            seen["descriptors"]
        );
        assert_eq!(
            seen["env"]["NVFP4_ORACLE_INPUT_SOCKET"], "3",
            "the input socket is the protocol's fourth descriptor"
        );
        if sandboxed {
            let dev: Vec<&str> = seen["dev"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            for name in &dev {
                assert!(
                    kept_in_dev(name) || *name == "shm" || DEV_LINKS.iter().any(|(l, _)| l == name),
                    "/dev/{name} in the sandbox: {dev:?}"
                );
            }
            for name in ["null", "zero", "urandom", "fd", "shm"] {
                assert!(dev.contains(&name), "no /dev/{name}: {dev:?}");
            }
        }
    }
}
