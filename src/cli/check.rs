//! `nvfp4-oracle check`: judge a kernel's output against a reference case.

use super::exit_code::EXIT_FAIL;
use clap::Args;
use nvfp4_harness::{Error, Result};
use nvfp4_model::case_file::fp16_from_bytes;
use nvfp4_model::case_file::{check_intervals, CaseReader};
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::model::MODEL_VERSION;
use safetensors::Dtype;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Reference case written by `nvfp4-oracle reference` (or the golden set).
    #[arg(long)]
    pub case: PathBuf,
    /// The kernel's output: a safetensors file with tensor `c`, fp16, shape [M, N, L].
    #[arg(long)]
    pub output: PathBuf,
    /// Print the verdict as JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CheckArgs) -> Result<ExitCode> {
    let case = CaseReader::open(&args.case)?;
    // `generate` writes the inputs and their provenance, and no reference.
    if !case.has_tensor("expected")? && case.metadata()?.contains_key("distribution") {
        return Err(Error::file(
            &args.case,
            "is an inputs file (no expected, lo, hi): run `nvfp4-oracle reference` first (with \
             --inputs on this file, or with the --problem, --shape, --dist and --seed that made \
             it) and pass its output as --case",
        ));
    }
    let shape = case.shape()?;
    let version = case.meta("model_version")?;
    if version != MODEL_VERSION {
        return Err(Error::file(
            &args.case,
            format!("was written by model version {version}; this tool is version {MODEL_VERSION}: regenerate the case"),
        ));
    }
    let dims = [shape.m, shape.n, shape.l];
    let read = |name| {
        case.tensor(name, Dtype::F16, &dims)
            .map(|bytes| fp16_from_bytes(&bytes))
    };
    let (expected, lo, hi) = (read("expected")?, read("lo")?, read("hi")?);
    let wide = |values: &[half::f16]| values.iter().map(|x| x.to_f64()).collect::<Vec<_>>();
    check_intervals(&args.case, &wide(&lo), &wide(&hi), &dims)?;
    let output = CaseReader::open(&args.output)?;
    let got = fp16_from_bytes(&output.tensor("c", Dtype::F16, &dims)?);
    let verdict = judge(
        OutputShape {
            m: shape.m,
            n: shape.n,
            l: shape.l,
        },
        &got,
        &expected,
        &lo,
        &hi,
    );
    if args.json {
        let value = serde_json::to_value(&verdict).expect("verdicts serialize");
        println!("{}", pretty_json(&value, 0));
    } else {
        print!("{}", verdict.render());
    }
    Ok(if verdict.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAIL)
    })
}

/// `value` indented as serde_json's pretty printer does, but with an array of numbers or strings
/// on one line: a tile map or a list of rows is then a line, not one number per line.
pub(crate) fn pretty_json(value: &serde_json::Value, depth: usize) -> String {
    use serde_json::Value;
    let pad = |d: usize| "  ".repeat(d);
    match value {
        Value::Array(items) if items.iter().all(|v| !v.is_array() && !v.is_object()) => {
            format!(
                "[{}]",
                items
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Value::Array(items) => format!(
            "[\n{}\n{}]",
            items
                .iter()
                .map(|v| format!("{}{}", pad(depth + 1), pretty_json(v, depth + 1)))
                .collect::<Vec<_>>()
                .join(",\n"),
            pad(depth)
        ),
        Value::Object(map) if !map.is_empty() => format!(
            "{{\n{}\n{}}}",
            map.iter()
                .map(|(k, v)| format!(
                    "{}{}: {}",
                    pad(depth + 1),
                    Value::String(k.clone()),
                    pretty_json(v, depth + 1)
                ))
                .collect::<Vec<_>>()
                .join(",\n"),
            pad(depth)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn arrays_of_numbers_are_one_line_and_the_json_is_the_same() {
        let value =
            serde_json::json!({"pass": false, "rows": [1, 2, 3], "map": [[0, 1], [1, 0]], "e": {}});
        let text = super::pretty_json(&value, 0);
        assert!(text.contains("\"rows\": [1, 2, 3]"), "{text}");
        assert!(text.contains("[0, 1]"), "{text}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            value
        );
    }
}
