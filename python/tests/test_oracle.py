"""The Python package against the model, with numpy only (CI has no torch): every function, the
answers checked where they can be worked out by hand, and every kind of bad input named."""
import math

import numpy as np
import pytest

import nvfp4_oracle as oracle

ONE = 0x2          # e2m1 code of 1.0
SCALE_ONE = 0x38   # e4m3 1.0


def one_product_case(a_code=ONE, b1_code=ONE, b2_code=ONE, scale=SCALE_ONE, m=1, n=1, k=16):
    """A dual GEMM whose only nonzero products are at k = 0 of row 0 / column 0."""
    t = {}
    for name, rows, code in (("a", m, a_code), ("b1", n, b1_code), ("b2", n, b2_code)):
        data = np.zeros((1, rows, k // 2), np.uint8)
        data[0, 0, 0] = code
        t[name] = data
        t["sf" + name] = np.full((1, rows, k // 16), scale, np.uint8)
    return t


def test_generate_is_deterministic_and_laid_out_as_case_files():
    a = oracle.generate("dual-gemm", "40x72x160x2", "full", 5)
    b = oracle.generate("dual-gemm", (40, 72, 160, 2), "full", 5)
    c = oracle.generate("dual-gemm", "40x72x160x2", "full", 6)
    assert a.problem == "dual-gemm"
    assert a.tensors["a"].shape == (2, 40, 80) and a.tensors["a"].dtype == np.uint8
    assert a.tensors["sfb1"].shape == (2, 72, 10)
    assert a.tensors["sfb2_permuted"].shape == (2, 1, 3, 32, 4, 4)
    for name in a.tensors:
        assert np.array_equal(a.tensors[name], b.tensors[name]), name
    assert not np.array_equal(a.tensors["a"], c.tensors["a"])
    assert oracle.generate("dual-gemm", "8x8x64", "adversarial", 1).padding_fill == 0x7F  # NaN


def test_one_product_by_hand():
    # x1 = x2 = 1: silu(1) * 1 = 1 / (1 + e^-1), rounded to fp16.
    ref = oracle.reference(one_product_case())
    want = np.float16(1.0 / (1.0 + math.exp(-1.0)))
    assert ref.shape == (1, 1, 1)
    assert ref.expected[0, 0, 0] == want
    assert ref.lo[0, 0, 0] <= want <= ref.hi[0, 0, 0]
    # 6.0 * 6.0 under scales 448: x1 = x2 = 36 * 448^2; silu(x1) = x1, and x1 * x2 overflows fp16.
    big = oracle.reference(one_product_case(0x7, 0x7, 0x7, scale=0x7E))
    assert np.isposinf(big.expected[0, 0, 0])
    # A NaN scale makes the output NaN, and the interval says so.
    nan = oracle.reference(one_product_case(scale=0x7F))
    assert np.isnan(nan.expected[0, 0, 0]) and np.isnan(nan.lo[0, 0, 0])


def test_every_problem_has_a_reference_that_its_own_expected_passes():
    for problem in oracle.PROBLEMS:
        case = oracle.generate(problem, "48x40x96x2", "adversarial-nan", 3)
        ref = oracle.reference(case)
        assert oracle.check(ref, ref.expected).passed, problem
        m, n, l = ref.shape
        if problem == "gemv":
            assert n == 1


def test_permuted_scales_are_optional_and_checked():
    case = oracle.generate("dual-gemm", "40x72x160", "full", 9)
    full = oracle.reference(case)
    plain = {k: v for k, v in case.tensors.items() if not k.endswith("_permuted")}
    assert np.array_equal(oracle.reference(plain).expected.view(np.uint16),
                          full.expected.view(np.uint16))
    bad = dict(case.tensors)
    bad["sfb1_permuted"] = bad["sfb1_permuted"].copy()
    bad["sfb1_permuted"].flat[0] ^= 0x08
    with pytest.raises(ValueError, match="'sfb1_permuted' does not hold the same scales as 'sfb1'"):
        oracle.reference(bad)


def test_two_dimensional_tensors_mean_one_batch_and_k_order_any_is_wider():
    case = oracle.generate("gemm", "24x40x256", "full", 2)
    squeezed = {k: (v[0] if not k.endswith("_permuted") else v) for k, v in case.tensors.items()}
    a = oracle.reference(case, problem="gemm")
    b = oracle.reference(squeezed, problem="gemm")
    assert np.array_equal(a.expected.view(np.uint16), b.expected.view(np.uint16))
    wide = oracle.reference(case, k_order="any")
    assert (wide.hi.astype(np.float32) >= a.hi.astype(np.float32)).all()


def test_check_reports_like_the_cli():
    case = oracle.generate("dual-gemm", "64x96x256x2", "gpumode", 4)
    ref = oracle.reference(case)
    out = ref.expected.copy()
    out[3, 5, 1] = np.float16(1000.0)
    verdict = oracle.check(ref, out)
    assert not verdict and verdict.failed == 1 and verdict.elements == 64 * 96 * 2
    assert (verdict.worst["m"], verdict.worst["n"], verdict.worst["l"]) == (3, 5, 1)
    assert verdict.report.startswith("FAIL: 1 of 12288 elements")
    with pytest.raises(AssertionError, match=r"c\[m=3, n=5, l=1\] = 1000"):
        verdict.assert_ok()
    nan_out = ref.expected.copy()
    nan_out[0, 0, 0] = np.float16("nan")
    assert oracle.check(ref, nan_out).details["unexpected_nan"] == 1
    # The same elements as a flat or (M, N*L) array are accepted; a wrong size is not.
    assert oracle.check(ref, ref.expected.reshape(-1)).passed
    with pytest.raises(ValueError, match="the output has shape"):
        oracle.check(ref, ref.expected[:10])


def test_group_gemm_outputs_as_a_list_of_groups():
    case = oracle.generate("group-gemm", "48x40x96x3", "full", 1)
    ref = oracle.reference(case)
    sizes = [(case.tensors[f"a{g}"].shape[1], case.tensors[f"b{g}"].shape[1]) for g in range(3)]
    flat = ref.expected.reshape(-1)
    parts, at = [], 0
    for m, n in sizes:
        parts.append(flat[at:at + m * n].reshape(m, n, 1))
        at += m * n
    assert at == flat.size
    assert oracle.check(ref, parts).passed


@pytest.mark.parametrize("bad, error, message", [
    ({"a": np.zeros((4, 8), np.float32)}, TypeError, "tensor 'a' is numpy float32"),
    ({"a": [[0] * 8]}, TypeError, "tensor 'a' is a list"),
    ({"a": np.zeros((4, 8), np.uint8)}, ValueError, "no tensor 'sfa'"),
    ({"a": np.zeros((4, 8), np.uint8), "sfa": np.zeros((4, 2), np.uint8)}, ValueError,
     r"'sfa' has shape \[4, 2\]"),
    ({"a": np.zeros((4, 7), np.uint8), "sfa": np.zeros((4, 1), np.uint8)}, ValueError,
     "K must be a positive multiple of 16"),
    ({"a": np.zeros((2, 2, 4, 8), np.uint8)}, ValueError, r"expected \[L, rows, K/2\]"),
])
def test_bad_inputs_name_the_tensor(bad, error, message):
    with pytest.raises(error, match=message):
        oracle.reference(bad)


def test_bad_names_and_shapes():
    with pytest.raises(ValueError, match="unknown problem 'dual'"):
        oracle.generate("dual", "8x8x16")
    with pytest.raises(ValueError, match="unknown distribution"):
        oracle.generate("dual-gemm", "8x8x16", dist="normal")
    with pytest.raises(ValueError, match="K = 17"):
        oracle.generate("dual-gemm", "8x8x17")
    with pytest.raises(TypeError, match="shape must be"):
        oracle.generate("dual-gemm", 5)
    with pytest.raises(ValueError, match="unknown k_order"):
        oracle.reference(oracle.generate("gemm", "8x8x16"), k_order="reverse")
    with pytest.raises(TypeError, match="ref must be what reference"):
        oracle.check(np.zeros((1, 1, 1), np.float16), np.zeros((1, 1, 1), np.float16))
    ref = oracle.reference(oracle.generate("gemm", "8x8x16"), problem="gemm")
    with pytest.raises(TypeError, match="outputs are float16"):
        oracle.check(ref, np.zeros((8, 8, 1), np.float32))
    # b1 with another K than a.
    t = one_product_case()
    t["b1"] = np.zeros((1, 1, 16), np.uint8)
    t["sfb1"] = np.zeros((1, 1, 2), np.uint8)
    with pytest.raises(ValueError, match="'a' has K = 16 and L = 1, 'b1' has K = 32"):
        oracle.reference(t)


def test_non_contiguous_arrays_are_read():
    case = oracle.generate("gemm", "16x24x64", "full", 3)
    t = {k: v for k, v in case.tensors.items() if not k.endswith("_permuted")}
    strided = {k: np.asfortranarray(v) for k, v in t.items()}
    assert np.array_equal(oracle.reference(strided, "gemm").expected.view(np.uint16),
                          oracle.reference(t, "gemm").expected.view(np.uint16))
