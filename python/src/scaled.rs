//! The block-scaled family (`nvfp4_model::problem::scaled_gemm`) for the package's
//! `assert_gemm`: operands as element codes and scale bytes, the output as f64, judged in Rust.

use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use nvfp4_model::layout::{
    blocked_to_plain, tiled8x4_to_plain, BlockedScaleLayout, ScaleDims, Tiled8x4ScaleLayout,
};
use nvfp4_model::model::scaled_gemm::{scaled_gemm_reference, Accepted};
use nvfp4_model::problem::scaled_gemm::{
    Epilogue, OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{contiguous, parse, value_error};

/// One operand from its codes `[rows, K]` and its scale bytes, plain `[rows, K / block]` or in the
/// 128x4 layout (any shape holding `ceil(rows / 128) * ceil(K / block / 4) * 512` bytes).
fn operand(
    name: &str,
    format: &str,
    codes: PyReadonlyArrayDyn<'_, u16>,
    scales: Option<PyReadonlyArrayDyn<'_, u8>>,
    scale_layout: &str,
) -> PyResult<ScaledOperand> {
    let format: OperandFormat = parse(format)?;
    let [rows, k] = codes.shape()[..] else {
        return Err(PyValueError::new_err(format!(
            "'{name}' has shape {:?}; expected [rows, K]",
            codes.shape()
        )));
    };
    let codes = contiguous(name, &codes)?;
    let scales = match (format.scale(), scales) {
        (None, None) => Vec::new(),
        (None, Some(_)) => {
            return Err(PyValueError::new_err(format!(
                "'{name}' is {}, which has no block scales, but scales were given",
                format.name()
            )))
        }
        (Some(_), None) => {
            return Err(PyValueError::new_err(format!(
                "'{name}' is {}: its block scales are needed",
                format.name()
            )))
        }
        (Some((_, block)), Some(scales)) => {
            let shape = scales.shape().to_vec();
            let bytes = contiguous(&format!("{name}_scale"), &scales)?;
            let dims = ScaleDims {
                rows,
                cols: k / block,
                batches: 1,
            };
            match scale_layout {
                "plain" if shape == [rows, k / block] => bytes,
                "plain" => {
                    return Err(PyValueError::new_err(format!(
                        "'{name}_scale' has shape {shape:?}; plain scales of {rows} rows and K = \
                         {k} are [{rows}, {}] (one per {block} elements)",
                        k / block
                    )))
                }
                "128x4" | "8x4" => {
                    let expected = if scale_layout == "8x4" {
                        Tiled8x4ScaleLayout(dims).len()
                    } else {
                        BlockedScaleLayout(dims).len()
                    };
                    if bytes.len() != expected {
                        return Err(PyValueError::new_err(format!(
                            "'{name}_scale' holds {} bytes; the {scale_layout} layout of {rows} \
                             rows and {} scale columns holds {expected}",
                            bytes.len(),
                            dims.cols
                        )));
                    }
                    if scale_layout == "8x4" {
                        tiled8x4_to_plain(&bytes, dims)
                    } else {
                        blocked_to_plain(&bytes, dims)
                    }
                }
                other => {
                    return Err(PyValueError::new_err(format!(
                        "scale_layout '{other}': expected 'plain', '128x4' or '8x4'"
                    )))
                }
            }
        }
    };
    ScaledOperand::new(format, rows, k, codes, scales).map_err(value_error)
}

/// `scaled_gemm_check(a_format, a_codes, a_scales, b_format, b_codes, b_scales, scale_layout,
/// alpha, bias, out_dtype, epilogue, output) -> (expected, lo, hi, rejected, unjudged)`: the
/// exact reference and the interval as f64 `[M, N]` arrays (lo = hi = NaN where NaN is the
/// answer, -inf and inf where the element is not judged), the flat indices of the output's
/// elements outside their interval, and how many were not judged.
#[pyfunction]
#[pyo3(signature = (a_format, a_codes, a_scales, b_format, b_codes, b_scales, scale_layout, alpha, bias, out_dtype, epilogue, output))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn scaled_gemm_check<'py>(
    py: Python<'py>,
    a_format: &str,
    a_codes: PyReadonlyArrayDyn<'_, u16>,
    a_scales: Option<PyReadonlyArrayDyn<'_, u8>>,
    b_format: &str,
    b_codes: PyReadonlyArrayDyn<'_, u16>,
    b_scales: Option<PyReadonlyArrayDyn<'_, u8>>,
    scale_layout: &str,
    alpha: f32,
    bias: Option<PyReadonlyArrayDyn<'_, f32>>,
    out_dtype: &str,
    epilogue: &str,
    output: PyReadonlyArrayDyn<'_, f64>,
) -> PyResult<(
    Bound<'py, PyArrayDyn<f64>>,
    Bound<'py, PyArrayDyn<f64>>,
    Bound<'py, PyArrayDyn<f64>>,
    Vec<usize>,
    usize,
)> {
    let a = operand("a", a_format, a_codes, a_scales, scale_layout)?;
    let b = operand("b", b_format, b_codes, b_scales, scale_layout)?;
    let bias = bias.map(|bias| contiguous("bias", &bias)).transpose()?;
    let inputs = ScaledGemmInputs::new(
        a,
        b,
        alpha,
        bias,
        parse::<OutDtype>(out_dtype)?,
        parse::<Epilogue>(epilogue)?,
    )
    .map_err(value_error)?;
    let (m, n) = (inputs.m(), inputs.n());
    if output.shape() != [m, n] {
        return Err(PyValueError::new_err(format!(
            "the output has shape {:?}; A and B make [{m}, {n}]",
            output.shape()
        )));
    }
    let output = contiguous("output", &output)?;
    let reference = py.detach(|| scaled_gemm_reference(&inputs));
    let rejected = reference
        .rejected(&output)
        .into_iter()
        .map(|(i, _)| i)
        .collect();
    let (lo, hi): (Vec<f64>, Vec<f64>) = reference.accepted.iter().map(Accepted::bounds).unzip();
    let array = |values: Vec<f64>| {
        ndarray::Array::from_shape_vec(ndarray::IxDyn(&[m, n]), values)
            .expect("M x N values")
            .into_pyarray(py)
    };
    Ok((
        array(reference.expected.clone()),
        array(lo),
        array(hi),
        rejected,
        reference.unjudged(),
    ))
}
