//! `nvfp4_oracle._core`: the Rust model behind the Python package. Thin on purpose: every
//! function turns Python values into the crate's types, calls the crate, and turns the answer
//! (or the crate's error, as `ValueError`) back. The package's `__init__.py` is the API users
//! see; it converts torch tensors to these numpy arrays and documents each call.

use half::f16;
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use nvfp4_oracle::certify::campaign::{case_runner, case_strategy, edge_cases};
use nvfp4_oracle::compare::{judge, OutputShape};
use nvfp4_oracle::kernels::interface::{KernelCase, ShapeSupport};
use nvfp4_oracle::kernels::process::CaseFiles;
use nvfp4_oracle::layout::BlockedScaleLayout;
use nvfp4_oracle::model::bounds::KOrder;
use nvfp4_oracle::model::problem_reference;
use nvfp4_oracle::problem::generate::generate_problem;
use nvfp4_oracle::problem::tensors::{problem_inputs_from_tensors, ByteType, TensorMap};
use nvfp4_oracle::problem::{Distribution, ProblemInputs, ProblemKind, Shape};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;

fn value_error(err: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(err.to_string())
}

fn parse<T: std::str::FromStr>(text: &str) -> PyResult<T>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(value_error)
}

/// The case-file tensors of `inputs` as numpy uint8 arrays: `X` `[L, rows, K/2]`, `sfX`
/// `[L, rows, K/16]`, `sfX_permuted` `[L, M/128, K/64, 32, 4, 4]` (padding `padding_fill`).
fn tensors_dict<'py>(
    py: Python<'py>,
    inputs: &ProblemInputs,
    padding_fill: u8,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, operand) in inputs.operands() {
        dict.set_item(&name, operand.data_array().to_owned().into_pyarray(py))?;
        dict.set_item(
            format!("sf{name}"),
            operand.scales_array().to_owned().into_pyarray(py),
        )?;
        let blocked = ndarray::Array::from_shape_vec(
            ndarray::IxDyn(&BlockedScaleLayout(operand.scale_dims()).storage_shape()),
            operand.blocked_scales(padding_fill),
        )
        .expect("the blocked layout's size");
        dict.set_item(format!("sf{name}_permuted"), blocked.into_pyarray(py))?;
    }
    Ok(dict)
}

/// `generate(problem, shape, dist, seed) -> (tensors, padding_fill)`.
#[pyfunction]
fn generate<'py>(
    py: Python<'py>,
    problem: &str,
    shape: &str,
    dist: &str,
    seed: u64,
) -> PyResult<(Bound<'py, PyDict>, u8)> {
    let (problem, shape, dist): (ProblemKind, Shape, Distribution) =
        (parse(problem)?, parse(shape)?, parse(dist)?);
    let inputs = generate_problem(problem, shape, dist, seed);
    let fill = dist.blocked_padding_fill();
    Ok((tensors_dict(py, &inputs, fill)?, fill))
}

/// Reads `{name: (dtype name, uint8 array)}` into a problem's inputs.
fn inputs_from_arrays(
    problem: ProblemKind,
    tensors: HashMap<String, (String, PyReadonlyArrayDyn<'_, u8>)>,
) -> PyResult<ProblemInputs> {
    let mut views = TensorMap::new();
    for (name, (dtype, array)) in &tensors {
        let bytes = array.as_slice().map_err(|_| {
            PyValueError::new_err(format!(
                "tensor '{name}' is not contiguous: pass a contiguous array (np.ascontiguousarray, or .contiguous() in torch)"
            ))
        })?;
        let dtype = match dtype.as_str() {
            "uint8" => ByteType::U8,
            "float4_e2m1fn_x2" => ByteType::Fp4x2,
            "float8_e4m3fn" => ByteType::E4m3,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "tensor '{name}' is {other}: nvfp4_oracle reads uint8, float4_e2m1fn_x2 or float8_e4m3fn"
                )))
            }
        };
        views.insert(name.clone(), (dtype, array.shape().to_vec(), bytes));
    }
    problem_inputs_from_tensors(problem, &views, "the tensors given").map_err(value_error)
}

type Fp16Array<'py> = Bound<'py, PyArrayDyn<f16>>;

/// `reference(problem, tensors, k_order) -> (expected, lo, hi)`, float16 `[M, N, L]`.
#[pyfunction]
fn reference<'py>(
    py: Python<'py>,
    problem: &str,
    tensors: HashMap<String, (String, PyReadonlyArrayDyn<'py, u8>)>,
    k_order: &str,
) -> PyResult<(Fp16Array<'py>, Fp16Array<'py>, Fp16Array<'py>)> {
    let (problem, order): (ProblemKind, KOrder) = (parse(problem)?, parse(k_order)?);
    let inputs = inputs_from_arrays(problem, tensors)?;
    // The model releases the GIL: it runs on rayon's threads for seconds on large shapes.
    let (reference, dims) = py.detach(|| (problem_reference(&inputs, order), inputs.output_dims()));
    let [expected, lo, hi] = reference
        .into_arrays(dims)
        .map(|a| a.into_dyn().into_pyarray(py));
    Ok((expected, lo, hi))
}

fn fp16_values(name: &str, array: &PyReadonlyArrayDyn<'_, f16>) -> PyResult<Vec<f16>> {
    Ok(array
        .as_slice()
        .map_err(|_| PyValueError::new_err(format!("'{name}' is not contiguous")))?
        .to_vec())
}

/// `check(expected, lo, hi, output) -> (pass, verdict JSON, report text)`; all float16
/// `[M, N, L]` arrays of one shape.
#[pyfunction]
fn check(
    expected: PyReadonlyArrayDyn<'_, f16>,
    lo: PyReadonlyArrayDyn<'_, f16>,
    hi: PyReadonlyArrayDyn<'_, f16>,
    output: PyReadonlyArrayDyn<'_, f16>,
) -> PyResult<(bool, String, String)> {
    let dims = expected.shape().to_vec();
    let [m, n, l] = dims[..] else {
        return Err(PyValueError::new_err(format!(
            "the reference is {dims:?}; expected [M, N, L]"
        )));
    };
    for (name, array) in [("lo", &lo), ("hi", &hi), ("output", &output)] {
        if array.shape() != dims.as_slice() {
            return Err(PyValueError::new_err(format!(
                "{name} has shape {:?}, the reference {dims:?}",
                array.shape()
            )));
        }
    }
    let verdict = judge(
        OutputShape { m, n, l },
        &fp16_values("output", &output)?,
        &fp16_values("expected", &expected)?,
        &fp16_values("lo", &lo)?,
        &fp16_values("hi", &hi)?,
    );
    let json = serde_json::to_string(&verdict).map_err(value_error)?;
    Ok((verdict.pass, json, verdict.render()))
}

/// `write_case_dir(problem, tensors, padding_fill, dir) -> case JSON`: the files the submission
/// worker builds GPU MODE's data tuple from (the package's `to_gpumode` uses the worker's own
/// code on them).
#[pyfunction]
fn write_case_dir(
    problem: &str,
    tensors: HashMap<String, (String, PyReadonlyArrayDyn<'_, u8>)>,
    padding_fill: u8,
    dir: &str,
) -> PyResult<String> {
    let inputs = inputs_from_arrays(parse(problem)?, tensors)?;
    let files = CaseFiles::write(&KernelCase::new(inputs, padding_fill), dir.as_ref())
        .map_err(|err| value_error(format!("{dir}: {err}")))?;
    serde_json::to_string(&files).map_err(value_error)
}

/// The submission worker's source (the door's code that builds GPU MODE's data tuple).
#[pyfunction]
fn worker_source() -> &'static str {
    nvfp4_oracle::kernels::external::SUBMISSION_WORKER
}

/// `campaign(cases, seed, m_multiple, n_multiple, k_multiple, max_l)`: the CLI campaign's edge
/// cases, then `cases` random ones, as `(shape, dist, seed)` tuples.
#[pyfunction]
fn campaign(
    cases: usize,
    seed: u64,
    m_multiple: usize,
    n_multiple: usize,
    k_multiple: usize,
    max_l: usize,
) -> PyResult<Vec<(String, String, u64)>> {
    use proptest::strategy::{Strategy, ValueTree};
    if m_multiple == 0 || n_multiple == 0 || k_multiple == 0 || k_multiple % 16 != 0 || max_l == 0 {
        return Err(PyValueError::new_err(
            "shape support: multiples must be positive, k_multiple a multiple of 16, max_l >= 1",
        ));
    }
    let support = ShapeSupport {
        m_multiple,
        n_multiple,
        k_multiple,
        max_l,
    };
    let mut runner = case_runner(seed);
    let strategy = case_strategy(support, Distribution::ALL.to_vec());
    let mut specs = edge_cases(support);
    for _ in 0..cases {
        specs.push(
            strategy
                .new_tree(&mut runner)
                .map_err(value_error)?
                .current(),
        );
    }
    Ok(specs
        .into_iter()
        .map(|c| (c.shape.to_string(), c.dist.name().to_string(), c.seed))
        .collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(reference, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(write_case_dir, m)?)?;
    m.add_function(wrap_pyfunction!(worker_source, m)?)?;
    m.add_function(wrap_pyfunction!(campaign, m)?)?;
    m.add("MODEL_VERSION", nvfp4_oracle::model::MODEL_VERSION)?;
    Ok(())
}
