//! How the submission worker judges a submission before it runs it: a word in a comment never
//! makes it Blackwell-only, and a module it imports that nobody has is its own error, not this
//! machine's. The worker's functions are called by python3 itself (what a GPU would reach).

use crate::common;

/// Runs `body` in python3 with the worker script loaded as `w`; its stdout.
fn with_worker(body: &str) -> Option<String> {
    let script = common::repo_path("crates/harness/src/worker/submission_worker.py");
    let program = format!(
        "import importlib.util\nspec = importlib.util.spec_from_file_location('w', {:?})\n\
         w = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(w)\n{body}",
        script.display().to_string()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &program])
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn tcgen05_in_a_comment_or_docstring_does_not_make_a_submission_blackwell_only() {
    let body = r#"
import json
sources = {
    "comment": "import torch  # a tcgen05 version later\n",
    "docstring": '"""Runs tcgen05 on a B200 one day."""\ndef f():\n    """sm_100 later"""\n    return 1\n',
    "cuda comment": 'src = """\n// tcgen05 one day\nvoid k() {}\n/* sm_100\n */\n"""\n',
    "code": 'src = """\nvoid k() {\n  asm("tcgen05.mma.cta_group::1");\n}\n"""\n',
    "code with a hopper path": 'src = """\nasm("tcgen05.mma"); asm("wgmma.mma_async");\n"""\n',
}
print(json.dumps({k: w.blackwell_only(v) for k, v in sources.items()}))
"#;
    let Some(out) = with_worker(body) else {
        common::skip("no python3");
        return;
    };
    let verdicts: serde_json::Value = serde_json::from_str(&out).unwrap();
    for runs_on_hopper in [
        "comment",
        "docstring",
        "cuda comment",
        "code with a hopper path",
    ] {
        assert!(
            verdicts[runs_on_hopper].is_null(),
            "{runs_on_hopper}: {out}"
        );
    }
    assert_eq!(verdicts["code"], "`tcgen05` (line 3)", "{out}");
}

#[test]
fn a_misspelt_import_is_the_submissions_error_and_a_missing_platform_package_is_not() {
    let body = r#"
import json
verdicts = {}
for name in ["my_helperz", "cutlass.cute"]:
    try:
        __import__(name)
    except ModuleNotFoundError as exc:
        reason, unavailable = w.missing_module_failure(exc, "/s/kernel/submission.py")
        verdicts[name] = {"reason": reason, "unavailable": unavailable}
print(json.dumps(verdicts))
"#;
    let Some(out) = with_worker(body) else {
        common::skip("no python3");
        return;
    };
    let verdicts: serde_json::Value = serde_json::from_str(&out).unwrap();
    let typo = &verdicts["my_helperz"];
    assert_eq!(typo["unavailable"], false, "{out}");
    let reason = typo["reason"].as_str().unwrap();
    assert!(
        reason.contains("/s/kernel/my_helperz.py does not exist") && reason.contains("misspelt"),
        "{reason}"
    );
    if verdicts.get("cutlass.cute").is_some() {
        assert_eq!(verdicts["cutlass.cute"]["unavailable"], true, "{out}");
    }
}
