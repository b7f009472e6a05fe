//! The lists of names the tools take come from one place, the enums' `ALL` and `name`: the CLI's
//! help and errors are made from them, and the Python package's tuples must equal them. And the
//! help points only to what is there.

use crate::common;

use crate::common::{code_and_text, repo_path};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::scaled_gemm::{Epilogue, OperandFormat, OutDtype};
use nvfp4_model::problem::{Distribution, ProblemKind};

fn help(args: &[&str]) -> String {
    let out = common::oracle_command()
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    let (code, text) = code_and_text(out);
    assert_eq!(code, 0, "{args:?} --help: {text}");
    text
}

/// clap's "[possible values: a, b, c]" after `flag` in `text` (the first such list after it).
fn possible_values(text: &str, flag: &str) -> Vec<String> {
    let after = &text[text
        .find(flag)
        .unwrap_or_else(|| panic!("no {flag} in {text}"))..];
    let list = after
        .split("[possible values: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no possible values after {flag}"));
    list[..list.find(']').unwrap()]
        .split(", ")
        .map(str::to_string)
        .collect()
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> Vec<String> {
    all.iter().map(|&x| name(x).to_string()).collect()
}

#[test]
fn the_help_lists_every_name_the_library_accepts() {
    let orders = names(&KOrder::ALL, KOrder::name);
    let problems = names(&ProblemKind::ALL, ProblemKind::name);
    let dists = names(&Distribution::NAMED, Distribution::name);
    for command in [&["reference"][..], &["certify"][..]] {
        assert_eq!(
            possible_values(&help(command), "--k-order"),
            orders,
            "{command:?}"
        );
    }
    for command in [&["reference"][..], &["generate"][..]] {
        let text = help(command);
        assert_eq!(possible_values(&text, "--problem"), problems, "{command:?}");
        assert_eq!(possible_values(&text, "--dist"), dists, "{command:?}");
    }
    let scaled = help(&["scaled-gemm", "reference"]);
    assert_eq!(
        possible_values(&scaled, "--a-format"),
        names(&OperandFormat::ALL, OperandFormat::name)
    );
    assert_eq!(
        possible_values(&scaled, "--out-dtype"),
        names(&OutDtype::ALL, OutDtype::name)
    );
    assert_eq!(
        possible_values(&scaled, "--epilogue"),
        names(&Epilogue::ALL, Epilogue::name)
    );
}

/// `scaled-gemm reference --help` sends --inputs users to `scaled-gemm check --help` for the
/// layout: it must be there.
#[test]
fn the_scaled_gemm_layout_is_where_the_help_points() {
    let reference = help(&["scaled-gemm", "reference"]);
    assert!(
        reference.contains("`scaled-gemm check --help` gives the layout"),
        "{reference}"
    );
    let check = help(&["scaled-gemm", "check"]);
    for words in [
        "a_scale and b_scale",
        "[rows, K/2]",
        "F64 [M, N]",
        "bias (F32 [N]",
    ] {
        assert!(check.contains(words), "no '{words}' in: {check}");
    }
}

/// The help says what a time budget does not cut short.
#[test]
fn the_time_budget_help_says_the_fixed_cases_always_run() {
    let certify = help(&["certify"]);
    let budget = &certify[certify.find("--time-budget").unwrap()..];
    let budget = &budget[..budget.find("\n      --").unwrap_or(budget.len())];
    assert!(budget.contains("fixed cases"), "{budget}");
    assert!(budget.contains("always run"), "{budget}");
}

/// The Python package's tuple `name = (...)` in `file` (a `+ (...)` continuation included).
fn python_tuple(file: &str, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo_path(file)).unwrap();
    let line = text
        .lines()
        .find(|line| line.starts_with(&format!("{name} = ")))
        .unwrap_or_else(|| panic!("{file} has no {name}"));
    let mut values = Vec::new();
    for part in line[name.len() + 3..].split('+') {
        let part = part.trim();
        if let Some(inner) = part.strip_prefix('(') {
            values.extend(
                inner
                    .trim_end_matches(')')
                    .split(',')
                    .map(|v| v.trim().trim_matches('"').to_string())
                    .filter(|v| !v.is_empty()),
            );
        } else {
            values.extend(python_tuple(file, part));
        }
    }
    values
}

#[test]
fn the_python_package_takes_the_same_names() {
    let init = "python/nvfp4_oracle/__init__.py";
    let gemm = "python/nvfp4_oracle/gemm.py";
    let mut problems = names(&ProblemKind::ALL, ProblemKind::name);
    let mut python_problems = python_tuple(init, "PROBLEMS");
    problems.sort();
    python_problems.sort();
    assert_eq!(python_problems, problems);
    assert_eq!(
        python_tuple(init, "DISTRIBUTIONS"),
        names(&Distribution::ALL, Distribution::name)
    );
    assert_eq!(
        python_tuple(init, "GENERATED_DISTRIBUTIONS"),
        names(&Distribution::NAMED, Distribution::name)
    );
    assert_eq!(
        python_tuple(init, "K_ORDERS"),
        names(&KOrder::ALL, KOrder::name)
    );
    assert_eq!(
        python_tuple(gemm, "OPERAND_FORMATS"),
        names(&OperandFormat::ALL, OperandFormat::name)
    );
    assert_eq!(
        python_tuple(gemm, "OUT_DTYPES"),
        names(&OutDtype::ALL, OutDtype::name)
    );
    assert_eq!(
        python_tuple(gemm, "EPILOGUES"),
        names(&Epilogue::ALL, Epilogue::name)
    );
}
