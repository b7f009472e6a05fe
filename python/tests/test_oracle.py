"""The Python package against the model, with numpy only (CI has no torch): every function, the
answers checked where they can be worked out by hand, and every kind of bad input named."""
import math
import os
import re
import shutil

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


def test_check_takes_exactly_the_shape_the_cli_takes():
    # Same elements, other shapes: the CLI's check refuses them (exit 2), so does check().
    ref = oracle.reference(oracle.generate("dual-gemm", "64x96x256x2", "gpumode", 4))
    e = ref.expected
    for wrong in (e.reshape(-1), e.reshape(64, 192), e.reshape(96, 64, 2), e[None],
                  e.transpose(1, 0, 2)):
        with pytest.raises(ValueError) as raised:
            oracle.check(ref, wrong)
        message = str(raised.value)
        assert f"the output has shape {list(wrong.shape)}" in message
        assert "expected exactly [M, N, L] = [64, 96, 2], float16" in message
    assert oracle.check(ref, e).passed
    assert oracle.check(ref, np.asfortranarray(e)).passed  # any strides, the exact shape
    # GEMV: [M, 1, L], not [M, L].
    gemv = oracle.reference(oracle.generate("gemv", "40x1x64x2", "full", 1))
    assert gemv.shape == (40, 1, 2)
    with pytest.raises(ValueError, match=r"has shape \[40, 2\]; expected exactly \[M, N, L\] "
                                         r"= \[40, 1, 2\]"):
        oracle.check(gemv, gemv.expected.reshape(40, 2))


def test_check_names_the_accepted_types_and_the_given_one():
    ref = oracle.reference(oracle.generate("dual-gemm", "8x16x32", "full", 1))
    accepted = "not a numpy array or torch tensor of float16"
    with pytest.raises(TypeError, match=f"the output is a list, {accepted}: dual-gemm has one "
                                        r"output, \[M, N, L\] = \[8, 16, 1\]"):
        oracle.check(ref, [1, 2])
    with pytest.raises(TypeError, match=f"the output is an int, {accepted}"):
        oracle.check(ref, 3)
    with pytest.raises(TypeError, match=f"the output is a str, {accepted}"):
        oracle.check(ref, "c")
    with pytest.raises(TypeError, match="the output is numpy float32; the problems' outputs are "
                                        "float16"):
        oracle.check(ref, ref.expected.astype(np.float32))


def test_group_gemm_outputs_are_each_exactly_their_groups_shape():
    case = oracle.generate("group-gemm", "48x40x96x3", "full", 1)
    ref = oracle.reference(case)
    assert len(ref.outputs) == 3 and all(d[2] == 1 for d in ref.outputs)
    flat, at, parts = ref.expected.reshape(-1), 0, []
    for m, n, _ in ref.outputs:
        parts.append(flat[at:at + m * n].reshape(m, n, 1))
        at += m * n
    assert oracle.check(ref, parts).passed
    assert oracle.check(ref, tuple(parts)).passed
    assert oracle.check(ref, ref.expected).passed  # the CLI's form: one [M, N, L] array
    m0, n0, _ = ref.outputs[0]
    with pytest.raises(ValueError, match=rf"output 1 \(group 1\) has shape \[{ref.outputs[1][0]}"
                                         rf", {ref.outputs[1][1]}\]; expected exactly"):
        oracle.check(ref, [parts[0], parts[1][..., 0], parts[2]])
    with pytest.raises(ValueError, match="a list of 2 tensors; the case has 3 groups"):
        oracle.check(ref, parts[:2])
    with pytest.raises(TypeError, match="output 2 \\(group 2\\) is a list"):
        oracle.check(ref, [parts[0], parts[1], [0.0]])


@pytest.mark.parametrize("seed", [-1, 2**64, -(2**70)])
def test_seeds_outside_u64_are_a_value_error(seed):
    with pytest.raises(ValueError, match=re.escape(f"seed must be an integer in 0..2**64-1, got "
                                                  f"{seed}")):
        oracle.generate("gemm", "8x8x16", seed=seed)
    with pytest.raises(ValueError, match="seed must be an integer in 0..2"):
        oracle.certify(lambda case: None, cases=0, seed=seed, data="case")


def test_seed_types_and_the_largest_seed():
    for bad in ("7", 1.5, None, True):
        with pytest.raises(TypeError, match="seed must be an integer in 0..2"):
            oracle.generate("gemm", "8x8x16", seed=bad)
    top = oracle.generate("gemm", "8x8x16", "full", 2**64 - 1)
    assert np.array_equal(top.tensors["a"], oracle.generate("gemm", "8x8x16", "full",
                                                            np.uint64(2**64 - 1)).tensors["a"])


def test_reference_and_verdict_say_what_they_hold():
    ref = oracle.reference(oracle.generate("dual-gemm", "64x96x256x2", "gpumode", 4))
    assert repr(ref) == "Reference(dual-gemm 64x96x256 L=2, expected/lo/hi fp16 [64, 96, 2])"
    assert (ref.k, ref.outputs, ref.k_order) == (256, [(64, 96, 2)], "contiguous")
    wide = oracle.reference(oracle.generate("gemv", "40x1x64", "full", 1), k_order="any")
    assert repr(wide) == "Reference(gemv 40x1x64 L=1, k_order any, expected/lo/hi fp16 [40, 1, 1])"
    groups = oracle.reference(oracle.generate("group-gemm", "48x40x96x3", "full", 1))
    text = repr(groups)
    assert text.startswith("Reference(group-gemm 3 groups ") and text.endswith(
        f"expected/lo/hi fp16 {list(groups.shape)})")
    # One made by hand, without K.
    z = np.zeros((2, 3, 1), np.float16)
    assert repr(oracle.Reference(z, z, z, "gemm")) == (
        "Reference(gemm 2x3x? L=1, expected/lo/hi fp16 [2, 3, 1])")
    verdict = oracle.check(ref, ref.expected)
    assert repr(verdict) == "Verdict(PASS, 0 of 12288 failed)"
    assert str(verdict) == verdict.report and verdict.report.startswith("PASS")


# certify() with data='case': a numpy callable, no torch. The campaign is the CLI's (Rust).

def correct_kernel(case):
    return oracle.reference(case).expected


def doubled_kernel(case):
    with np.errstate(over="ignore"):
        return correct_kernel(case) * np.float16(2)


def silu_on_b2_kernel(case):
    """SiLU on the second GEMM: the dual GEMM of the case with b1 and b2 swapped."""
    swap = {"b1": "b2", "b2": "b1"}
    tensors = {}
    for name, t in case.tensors.items():
        for old, new in swap.items():
            if name in (old, "sf" + old, "sf" + old + "_permuted"):
                name = name.replace(old, new)
                break
        tensors[name] = t
    return oracle.reference(tensors, case.problem).expected


def test_certify_runs_the_cli_campaign_on_a_correct_numpy_callable():
    result = oracle.certify(correct_kernel, cases=3, seed=1, data="case")
    assert isinstance(result, oracle.Certification) and result.passed and bool(result)
    # The CLI's 20 edge cases, its 13 production shapes and 2 random large ones (at 2 rows of
    # M: the callable runs on the CPU), its 4 stagnation cases, then the 3 random ones.
    assert result.cases == 42 and result >= 42 and int(result) == 42
    assert result.status == "certified" and result.failure is None and result.report_dir is None
    assert repr(result).startswith("Certification(python-correct_kernel (dual-gemm): Certified "
                                   "after 42 cases (seed 1, K % 16 == 0, L <= 8, ")
    assert str(result).startswith("# Certificate: python-correct_kernel")
    assert result.assert_ok() is result
    assert sum(result.details["coverage"]["by_distribution"].values()) == 42
    assert result.details["coverage"]["by_shape_class"]["production"] == 13
    assert result.details["coverage"]["by_shape_class"]["large"] == 2
    assert result.details["coverage"]["by_distribution"]["stagnation"] == 4
    # Same seed, same cases; gpumode only; every problem.
    again = oracle.certify(correct_kernel, cases=3, seed=1, data="case")
    timeless = lambda c: {k: v for k, v in c.items() if not k.startswith("seconds_by_")}
    assert timeless(again.details["coverage"]) == timeless(result.details["coverage"])
    assert set(again.details["coverage"]["seconds_by_shape_class"]) == set(
        result.details["coverage"]["by_shape_class"])
    only = oracle.certify(correct_kernel, cases=2, seed=1, data="case", dists=("gpumode",))
    assert set(only.details["coverage"]["by_distribution"]) == {"gpumode"}
    for problem in ("gemm", "gemv", "group-gemm"):
        assert oracle.certify(correct_kernel, problem, cases=2, seed=3, data="case").passed

    def group_list_kernel(case):
        ref = oracle.reference(case)
        flat, at, outs = ref.expected.reshape(-1), 0, []
        for m, n, _ in ref.outputs:
            outs.append(flat[at:at + m * n].reshape(m, n, 1))
            at += m * n
        return outs

    assert oracle.certify(group_list_kernel, "group-gemm", cases=2, seed=3, data="case").passed


def test_certify_shrinks_and_diagnoses_a_wrong_callable(tmp_path):
    with pytest.raises(AssertionError) as raised:
        oracle.certify(silu_on_b2_kernel, cases=5, seed=2, data="case",
                       report_dir=tmp_path / "raised")
    text = str(raised.value)
    assert text.startswith("nvfp4-oracle certify: python-silu_on_b2_kernel (dual-gemm): Failed")
    assert "silu-on-second-gemm" in text and "## Failure" in text and "minimal case" in text

    result = oracle.certify(silu_on_b2_kernel, cases=5, seed=2, data="case",
                            raise_on_failure=False, report_dir=str(tmp_path))
    assert not result and result.status == "failed"
    assert result.diagnosis.startswith("silu-on-second-gemm")
    assert result.minimal_case["shape"] == {"m": 1, "n": 1, "k": 16, "l": 1}
    assert "minimal repro 1x1x16" in repr(result)
    for key in ("repro_case", "repro_output"):
        assert os.path.isfile(result.failure[key]), key
    assert result.failure["replay"].startswith("nvfp4-oracle check --case ")
    assert os.path.isfile(tmp_path / "python-silu_on_b2_kernel.json")
    assert (tmp_path / "python-silu_on_b2_kernel.md").read_text() == result.text
    with pytest.raises(AssertionError, match="silu-on-second-gemm"):
        result.assert_ok()

    doubled = oracle.certify(doubled_kernel, cases=5, seed=2, data="case",
                             raise_on_failure=False, name="twice")
    assert doubled.details["kernel"] == "python-twice" and not doubled.passed
    assert os.path.isfile(doubled.failure["repro_case"])  # in a temporary report_dir
    assert doubled.report_dir and os.path.isdir(doubled.report_dir)
    shutil.rmtree(doubled.report_dir)


def test_certify_turns_exceptions_and_broken_outputs_into_verdicts(tmp_path):
    def raises(case):
        raise RuntimeError("no kernel here")

    result = oracle.certify(raises, cases=0, data="case", raise_on_failure=False,
                            report_dir=tmp_path)
    assert result.failure["verdict"].startswith(
        "the kernel raised an exception: RuntimeError: no kernel here at test_oracle.py:")
    assert result.minimal_case["shape"] == {"m": 1, "n": 1, "k": 16, "l": 1}

    def flat(case):
        return correct_kernel(case).reshape(-1)

    result = oracle.certify(flat, cases=0, data="case", raise_on_failure=False,
                            report_dir=tmp_path)
    assert "the kernel's output breaks the contract: the output has shape [1]; expected " \
           "exactly [M, N, L] = [1, 1, 1]" in result.failure["verdict"]

    def writes_its_input(case):
        case.tensors["a"][...] = 0
        return correct_kernel(case)

    result = oracle.certify(writes_its_input, cases=0, data="case", raise_on_failure=False,
                            report_dir=tmp_path)
    assert result.failure["verdict"] == "the kernel modified its inputs: input a: its contents " \
                                        "changed"


def test_certify_stops_at_an_interrupt():
    class Stop(BaseException):
        pass

    calls = []

    def interrupted(case):
        calls.append(1)
        if len(calls) == 3:
            raise Stop()
        return correct_kernel(case)

    with pytest.raises(Stop):
        oracle.certify(interrupted, cases=5, data="case")
    assert len(calls) == 3  # not run again, not shrunk


def test_certify_bad_arguments():
    with pytest.raises(ValueError, match=r"dists must be all of .* or \('gpumode',\)"):
        oracle.certify(correct_kernel, data="case", dists=("full", "gpumode"))
    with pytest.raises(ValueError, match="unknown distribution 'normal'"):
        oracle.certify(correct_kernel, data="case", dists=("normal",))
    with pytest.raises(ValueError, match="unknown data 'torch'"):
        oracle.certify(correct_kernel, data="torch")
    with pytest.raises(ValueError, match="cases must be an integer >= 0, got -1"):
        oracle.certify(correct_kernel, cases=-1, data="case")
    with pytest.raises(ValueError, match="m_multiple must be an integer >= 1, got 0"):
        oracle.certify(correct_kernel, m_multiple=0, data="case")
    with pytest.raises(ValueError, match="k_multiple a multiple of 16"):
        oracle.certify(correct_kernel, k_multiple=8, data="case")
    with pytest.raises(ValueError, match="time_budget must be a positive number"):
        oracle.certify(correct_kernel, time_budget=-1, data="case")
    with pytest.raises(TypeError, match="fn must be callable"):
        oracle.certify(5, data="case")


def test_certify_of_gpumode_data_says_it_needs_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match=r"data='case'\) runs a numpy callable without it"):
            oracle.certify(correct_kernel)
    else:
        pytest.skip("torch is installed: test_torch.py certifies GPU MODE callables")


def test_a_shape_past_the_machines_memory_is_refused_at_once():
    import time
    case = oracle.generate("dual-gemm", "100000x100000x16", dist="gpumode", seed=1)
    started = time.monotonic()
    with pytest.raises(MemoryError, match=r"needs about .* GiB of memory"):
        oracle.reference(case)
    assert time.monotonic() - started < 1.0


def test_every_name_the_cli_takes_is_taken_here():
    # The stagnation family is generated as by `nvfp4-oracle generate --dist stagnation`, and the
    # per-product order is the CLI's third --k-order.
    case = oracle.generate("dual-gemm", "8x8x64", dist="stagnation", seed=3)
    assert case.problem == "dual-gemm"
    ref = oracle.reference(case, k_order="per-product")
    assert ref.k_order == "per-product" and ref.expected.shape == (8, 8, 1)
