"""A property test of a shipped kernel with the oracle's Hypothesis strategies: Triton's
`tl.dot_scaled` (the kernel of results/field/dot_scaled.py) on MXFP4 x MXFP4, MXFP8 x
MXFP4, judged by `case.check` (the oracle's `assert_gemm`) on every drawn case.

    pytest examples/pytest/test_triton_dot_scaled.py -q -s    # needs torch, triton and a GPU

On moderate data (scales near 1) it passes. On the edge distribution (scale bytes 0x00, 0xFE and
NaN) Hypothesis finds a case the oracle rejects and shrinks it: on Hopper, where `dot_scaled`
scales each element in bf16, an element times 2^127 overflows (docs/research/findings.md). The second
test asserts that it is found, and prints the shrunk case.
"""
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
triton = pytest.importorskip("triton", reason="triton is not installed")
hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

from hypothesis import find, given, settings  # noqa: E402

from nvfp4_oracle import strategies  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "docs" / "results" / "field"))
from dot_scaled import TRITON_FORMAT, mx_matmul  # noqa: E402

BLOCK = (64, 64, 128)
CASES = dict(a_formats=["mxfp4", "mxfp8-e4m3", "mxfp8-e5m2"], b_formats=["mxfp4"],
             out_dtypes=["fp32"], epilogues=["f32"], max_m=40, max_n=40, max_k=256)


def run_dot_scaled(case):
    """The case through the Triton kernel (K padded to its 128 with zero elements under scale
    1), then alpha and the bias in f32, one rounding each: the `f32` epilogue."""
    a, b = case.operands()
    m, n, k = case.a.shape[0], case.b.shape[0], case.a.shape[1]
    padded = -(-k // BLOCK[2]) * BLOCK[2]

    def device(array, columns, fill=0):
        out = torch.full((array.shape[0], columns), fill, dtype=torch.uint8)
        out[:, :array.shape[1]] = torch.from_numpy(array)
        return out.cuda()

    a_pack = 2 if case.a_format == "mxfp4" else 1
    a_t, b_t = device(a, padded // a_pack), device(b, padded // 2)
    sa, sb = device(case.a_scale, padded // 32, 127), device(case.b_scale, padded // 32, 127)
    c = torch.empty((m, n), dtype=torch.float32, device="cuda")
    grid = (triton.cdiv(m, BLOCK[0]), triton.cdiv(n, BLOCK[1]))
    mx_matmul[grid](a_t, sa, b_t, sb, c, m, n, padded, TRITON_FORMAT[case.a_format], "e2m1",
                    a_pack, 2, *BLOCK)
    out = c * case.alpha
    if case.bias is not None:
        out = out + torch.from_numpy(case.bias).cuda()
    return out.cpu()


def rejected(case):
    try:
        case.check(run_dot_scaled(case))
        return False
    except AssertionError:
        return True


@settings(max_examples=40, deadline=None, database=None)
@given(strategies.gemm_cases(distributions=["moderate"], **CASES))
def test_dot_scaled_on_moderate_data(case):
    case.check(run_dot_scaled(case))


@pytest.mark.skipif(torch.cuda.get_device_capability()[0] != 9,
                    reason="the bf16 decomposition is Hopper's; other GPUs take other paths")
def test_hypothesis_finds_and_shrinks_the_hopper_overflow():
    case = find(strategies.gemm_cases(distributions=["edges"], **CASES), rejected,
                settings=settings(max_examples=200, deadline=None, database=None))
    print(f"\nshrunk: {case!r}\nA scales {case.a_scale.tolist()}, B scales "
          f"{case.b_scale.tolist()}")
    with pytest.raises(AssertionError) as report:
        case.check(run_dot_scaled(case))
    print(str(report.value).splitlines()[0])
    print("\n".join(str(report.value).splitlines()[1:4]))
