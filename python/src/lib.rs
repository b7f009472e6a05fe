//! `nvfp4_oracle._core`: the Rust model behind the Python package. Thin on purpose: every
//! function turns Python values into the crate's types, calls the crate, and turns the answer
//! (or the crate's error, as `ValueError`) back. The package's `__init__.py` is the API users
//! see; it converts torch tensors to these numpy arrays and documents each call.

use half::f16;
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use nvfp4_harness::certify::{certify_kernel, CampaignLimits, CertifyRequest, KernelOutcome};
use nvfp4_harness::certify::{Certificate, Status};
use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest, ShapeSupport};
use nvfp4_harness::worker::CaseFiles;
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::layout::BlockedScaleLayout;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::problem_reference;
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::memory::check_fits;
use nvfp4_model::problem::tensors::{problem_inputs_from_tensors, ByteType, TensorMap};
use nvfp4_model::problem::{Distribution, ProblemInputs, ProblemKind, Shape};
use pyo3::exceptions::{PyMemoryError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

mod scaled;

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
    check_fits(problem, shape, false).map_err(|err| PyMemoryError::new_err(err.to_string()))?;
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

/// The output tensors a kernel of `inputs` returns, as `(M, N, L)` each: one, or for the grouped
/// GEMM one per group (`(M_g, N_g, 1)`; the reference holds them one after another).
fn output_tensor_dims(inputs: &ProblemInputs) -> Vec<(usize, usize, usize)> {
    match inputs {
        ProblemInputs::GroupGemm(groups) => groups
            .groups
            .iter()
            .map(|g| (g.shape.m, g.shape.n, 1))
            .collect(),
        inputs => vec![inputs.output_dims()],
    }
}

/// `reference(problem, tensors, k_order) -> (expected, lo, hi, k, outputs)`: float16 `[M, N, L]`
/// arrays, the problem's K (the first group's for the grouped GEMM), and the output tensors'
/// `(M, N, L)` shapes (one per group for the grouped GEMM).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn reference<'py>(
    py: Python<'py>,
    problem: &str,
    tensors: HashMap<String, (String, PyReadonlyArrayDyn<'py, u8>)>,
    k_order: &str,
) -> PyResult<(
    Fp16Array<'py>,
    Fp16Array<'py>,
    Fp16Array<'py>,
    usize,
    Vec<(usize, usize, usize)>,
)> {
    let (problem, order): (ProblemKind, KOrder) = (parse(problem)?, parse(k_order)?);
    let inputs = inputs_from_arrays(problem, tensors)?;
    let (m, n, l) = inputs.output_dims();
    let k = inputs.operands()[0].1.k();
    check_fits(problem, Shape { m, n, k, l }, true)
        .map_err(|err| PyMemoryError::new_err(err.to_string()))?;
    // The model releases the GIL: it runs on rayon's threads for seconds on large shapes.
    let (reference, dims) = py.detach(|| (problem_reference(&inputs, order), inputs.output_dims()));
    let [expected, lo, hi] = reference
        .into_arrays(dims)
        .map(|a| a.into_dyn().into_pyarray(py));
    let k = inputs.operands()[0].1.k();
    Ok((expected, lo, hi, k, output_tensor_dims(&inputs)))
}

/// The elements of a contiguous array, or a ValueError naming it.
fn contiguous<T: Copy + numpy::Element>(
    name: &str,
    array: &PyReadonlyArrayDyn<'_, T>,
) -> PyResult<Vec<T>> {
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
        &contiguous("output", &output)?,
        &contiguous("expected", &expected)?,
        &contiguous("lo", &lo)?,
        &contiguous("hi", &hi)?,
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
    nvfp4_harness::worker::SUBMISSION_WORKER
}

/// A Python callable as a kernel under test: the package's `certify` hands the Rust campaign
/// (edge cases, random cases, shrinking, diagnosis, data shrinking: `certify_kernel`, as the
/// CLI's `certify`) this kernel, whose every run takes the GIL and calls `runner`.
///
/// `runner(tensors, padding_fill, outputs, shape) -> (outcome, value)` (`outputs`: each output
/// tensor's `(M, N, L)`, one per group for the grouped GEMM; `shape`: the reference's) is the
/// package's `_Runner`: it builds what the user's callable takes (GPU MODE's data tuple, or a
/// `Case`), calls it, and answers `("ok", float16 array of the output's elements)` or
/// `(failure, message)` with failure one of `Raised`, `BadOutput`, `OutOfBounds`,
/// `ModifiedInputs` (the [`KernelFailure`] variants). An exception out of `runner` itself (a
/// `KeyboardInterrupt`, or a bug of the package) is not a verdict on the kernel: it stops the
/// campaign ([`Stop`]) and `certify` raises it.
struct PyCallableKernel {
    name: String,
    problem: ProblemKind,
    support: ShapeSupport,
    runner: Py<PyAny>,
    stopped: Mutex<Option<PyErr>>,
}

/// The unwinding payload that stops a campaign from inside [`PyCallableKernel::run`] (raised
/// with `resume_unwind`, so no panic message is printed; caught in [`certify`]).
struct Stop;

impl PyCallableKernel {
    fn call(
        &self,
        py: Python<'_>,
        case: &KernelCase,
        output: &mut [f16],
    ) -> PyResult<Result<(), KernelFailure>> {
        // Ctrl-C between cases (the campaign runs on the thread that called certify).
        py.check_signals()?;
        let tensors = tensors_dict(py, &case.inputs, case.padding_fill)?;
        let reply = self.runner.bind(py).call1((
            tensors,
            case.padding_fill,
            output_tensor_dims(&case.inputs),
            case.inputs.output_dims(),
        ))?;
        let (outcome, value): (String, Bound<'_, PyAny>) = reply.extract()?;
        let message = || value.extract::<String>();
        Ok(match outcome.as_str() {
            "ok" => {
                let array: PyReadonlyArrayDyn<'_, f16> = value.extract()?;
                let values = array.as_slice()?;
                if values.len() != output.len() {
                    return Err(PyRuntimeError::new_err(format!(
                        "nvfp4_oracle internal error: the runner gave {} output elements, the case has {}",
                        values.len(),
                        output.len()
                    )));
                }
                output.copy_from_slice(values);
                Ok(())
            }
            "Raised" => Err(KernelFailure::Raised(message()?)),
            "BadOutput" => Err(KernelFailure::BadOutput(message()?)),
            "OutOfBounds" => Err(KernelFailure::OutOfBounds(message()?)),
            "ModifiedInputs" => Err(KernelFailure::ModifiedInputs(message()?)),
            other => {
                return Err(PyRuntimeError::new_err(format!(
                    "nvfp4_oracle internal error: the runner answered {other:?}"
                )))
            }
        })
    }
}

impl KernelUnderTest for PyCallableKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        format!("the Python callable {}", self.name)
    }

    fn problem(&self) -> ProblemKind {
        self.problem
    }

    fn support(&self) -> ShapeSupport {
        self.support
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        if self.stopped.lock().expect("not poisoned").is_some() {
            std::panic::resume_unwind(Box::new(Stop));
        }
        match Python::attach(|py| self.call(py, case, output)) {
            Ok(result) => result,
            Err(err) => {
                *self.stopped.lock().expect("not poisoned") = Some(err);
                std::panic::resume_unwind(Box::new(Stop))
            }
        }
    }
}

/// One line: the certificate's status, cases, and for a failure the first and the minimal
/// failing case, the verdict and the diagnosis.
fn certificate_summary(c: &Certificate) -> String {
    let mut line = format!(
        "{} ({}): {:?} after {} cases (seed {}, {}, {:.1} s)",
        c.kernel,
        c.problem,
        c.status,
        c.coverage.cases,
        c.seed,
        c.supported_shapes,
        c.elapsed_seconds
    );
    if let Some(f) = &c.failure {
        line.push_str(&format!(
            "; first failing case {} {} seed {}; minimal repro {} {} seed {} ({} shrink steps): {}; diagnosis: {}",
            f.first_case.shape,
            f.first_case.dist.name(),
            f.first_case.seed,
            f.minimal_case.shape,
            f.minimal_case.dist.name(),
            f.minimal_case.seed,
            f.shrink_steps,
            f.verdict,
            f.diagnosis
        ));
    }
    line
}

/// `certify(runner, name, problem, support, cases, seed, only_gpumode, k_order, time_budget,
/// report_dir, write_certificate) -> (passed, certificate JSON, certificate Markdown, summary)`:
/// the CLI's certify sequence (`certify_kernel`, no golden cases) on a Python callable
/// ([`PyCallableKernel`]); `support` is `(m_multiple, n_multiple, k_multiple, max_l)`. A
/// failure's repro files go into `report_dir`; with `write_certificate` the certificate's JSON
/// and Markdown too.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn certify(
    py: Python<'_>,
    runner: Py<PyAny>,
    name: String,
    problem: &str,
    support: (usize, usize, usize, usize),
    cases: usize,
    seed: u64,
    only_gpumode: bool,
    k_order: &str,
    time_budget: Option<f64>,
    report_dir: &str,
    write_certificate: bool,
) -> PyResult<(bool, String, String, String)> {
    let (problem, order): (ProblemKind, KOrder) = (parse(problem)?, parse(k_order)?);
    let (m_multiple, n_multiple, k_multiple, max_l) = support;
    if m_multiple == 0 || n_multiple == 0 || k_multiple == 0 || k_multiple % 16 != 0 || max_l == 0 {
        return Err(PyValueError::new_err(
            "shape support: multiples must be positive, k_multiple a multiple of 16, max_l >= 1",
        ));
    }
    let time_budget = time_budget
        .map(Duration::try_from_secs_f64)
        .transpose()
        .map_err(|err| value_error(format!("time_budget: {err}")))?;
    let kernel = PyCallableKernel {
        name,
        problem,
        support: ShapeSupport {
            m_multiple,
            n_multiple,
            k_multiple,
            max_l,
        },
        runner,
        stopped: Mutex::new(None),
    };
    let request = CertifyRequest {
        // The command line's defaults for a campaign judged by the CPU model (a Python callable
        // runs in this process, beside it), with what the caller gave.
        limits: CampaignLimits {
            cases,
            time_budget,
            order,
            only_gpumode,
            ..CampaignLimits::defaults(false, seed)
        },
        golden: &[],
        report_dir: Path::new(report_dir),
        // A Python callable runs in this process: no GPU checks of a worker.
        sanitize_cases: 0,
        determinism_cases: 0,
        start_when_unavailable: false,
        preflight: None,
        write: write_certificate,
    };
    // The campaign runs without the GIL; each of the kernel's runs takes it.
    let campaign = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let certificate = match certify_kernel(&kernel, &request, |_, _| {})
                .map_err(|err| err.to_string())?
            {
                KernelOutcome::Certificate(certificate) => certificate,
                KernelOutcome::Unusable(reason) => return Err(reason),
            };
            let json = serde_json::to_string(&certificate).map_err(|err| err.to_string())?;
            Ok::<_, String>((
                certificate.status != Status::Failed,
                json,
                certificate.markdown(),
                certificate_summary(&certificate),
            ))
        }))
    });
    match campaign {
        Ok(answer) => answer.map_err(PyOSError::new_err),
        Err(payload) if payload.is::<Stop>() => Err(kernel
            .stopped
            .lock()
            .expect("not poisoned")
            .take()
            .expect("a stopped campaign keeps its exception")),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(reference, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(write_case_dir, m)?)?;
    m.add_function(wrap_pyfunction!(worker_source, m)?)?;
    m.add_function(wrap_pyfunction!(certify, m)?)?;
    m.add_function(wrap_pyfunction!(scaled::scaled_gemm_check, m)?)?;
    m.add("MODEL_VERSION", nvfp4_model::model::MODEL_VERSION)?;
    Ok(())
}
