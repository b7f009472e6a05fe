"""The Hypothesis strategies: every drawn case is judged, and a float64 numpy kernel (dequantize,
multiply, the epilogue in float32) passes every one of them, edges included (NaN and infinite
elements, UE8M0 0x00, 0xFE and NaN scales), in every format pairing, output type and epilogue.
A bug near the underflow threshold can be legitimately invisible (docs/reference/numerics.md section 10),
so the planted bugs are tested on fixed cases (test_gemm.py, crates/harness/tests/harness/field_mutants.rs)."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed")
from hypothesis import given, settings  # noqa: E402

from nvfp4_oracle import strategies  # noqa: E402


def bf16_round(x):
    """float32 -> bf16 values (as float32), round to nearest even; NaN kept."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(x), np.float32(np.nan), rounded.view(np.float32))


def to_out(x, out_dtype):
    x = np.asarray(x, dtype=np.float32)
    if out_dtype == "fp16":
        return x.astype(np.float16)
    if out_dtype == "bf16":
        return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)
    return x


def out_values(x, out_dtype):
    """Values of the output type as float64 (bf16 held as bits)."""
    if out_dtype == "bf16":
        return (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return x.astype(np.float64)


def numpy_kernel(case):
    a, b = case.values()
    with np.errstate(all="ignore"):
        acc = (a @ b.T).astype(np.float32)
        alpha = np.float32(case.alpha)
        bias = np.zeros(b.shape[0], np.float32) if case.bias is None else case.bias
        if case.epilogue == "f32":
            return to_out(alpha * acc + bias, case.out_dtype)
        def rnd(x):
            return out_values(to_out(x, case.out_dtype), case.out_dtype)
        if case.epilogue == "bias-in-output":
            return to_out(rnd(alpha * acc) + bias, case.out_dtype)
        return to_out(rnd(rnd(acc) * rnd(alpha)) + bias, case.out_dtype)


@settings(max_examples=150, deadline=None)
@given(strategies.gemm_cases())
def test_a_float64_kernel_passes_every_drawn_case(case):
    ref = case.check(numpy_kernel(case))
    assert ref.expected.shape == (case.a.shape[0], case.b.shape[0])
