"""A kernel author's test file: copy it beside your kernel, point `my_kernel` at it, run pytest.

    pip install ./python          # from this repository (builds the wheel with maturin)
    pytest examples/pytest -q     # needs torch and a CUDA GPU; without them every test skips

Each test builds GPU MODE's data tuple for an oracle case (the same tensors as the competition's
generate_input, holding the oracle's inputs), runs your kernel, and judges its output against the
model's acceptance interval; a failure reads like the CLI's report (which elements, how far out,
where in the output). Here `my_kernel` is the repository's plain-PyTorch example submission and
`broken_kernel` its deliberately broken copy (SiLU on the wrong GEMM), which the last test expects
to fail.

Without torch, or without a CUDA GPU that torch can see, the tests are still collected and each
is skipped with the reason, so that pytest exits 0 rather than 5 ("no tests collected").
"""
import functools
import importlib.util
import os
import sys
import types

import pytest

import nvfp4_oracle as oracle

try:
    import torch
except ImportError:
    torch = None

if torch is None:
    SKIP_REASON = "torch is not installed: the kernel under test takes and returns torch tensors"
elif not torch.cuda.is_available():
    SKIP_REASON = "no CUDA GPU visible to torch: the kernel under test runs on the GPU"
else:
    SKIP_REASON = None
if SKIP_REASON:
    pytestmark = pytest.mark.skip(reason=SKIP_REASON)

HERE = os.path.dirname(os.path.abspath(__file__))
DEVICE = "cuda"
SUBMISSIONS = os.path.join(HERE, "..", "submissions", "torch")


@functools.lru_cache(maxsize=None)
def load_submission(path):
    """A GPU MODE submission.py as a module (it imports `task`, which GPU MODE provides)."""
    sys.modules.setdefault("task", types.SimpleNamespace(input_t=tuple, output_t=torch.Tensor))
    spec = importlib.util.spec_from_file_location(f"submission_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


# Loaded on first call, not at import, so that the file imports (and its tests skip) without torch.
def my_kernel(data):
    return load_submission(os.path.join(SUBMISSIONS, "submission.py"))(data)


def broken_kernel(data):
    return load_submission(os.path.join(SUBMISSIONS, "broken", "submission.py"))(data)


@pytest.mark.parametrize("shape", ["1x1x16", "128x128x256", "129x200x272x2", "256x512x1024"])
@pytest.mark.parametrize("dist", ["gpumode", "full", "adversarial-nan"])
def test_my_kernel_matches_the_oracle(shape, dist):
    case = oracle.generate("dual-gemm", shape, dist, seed=2026)
    out = my_kernel(oracle.to_gpumode(case, DEVICE))
    oracle.check(oracle.reference(case), out).assert_ok()


def test_my_kernel_on_a_campaign():
    # The CLI campaign's edge cases and 20 random shapes, each judged; stops at the first failure.
    assert oracle.certify(my_kernel, cases=20, seed=7, device=DEVICE) >= 20


def test_the_broken_copy_is_caught_with_a_readable_report():
    case = oracle.generate("dual-gemm", "128x128x256", "gpumode", seed=1)
    verdict = oracle.check(oracle.reference(case), broken_kernel(oracle.to_gpumode(case, DEVICE)))
    assert not verdict.passed
    with pytest.raises(AssertionError, match="elements outside their intervals"):
        verdict.assert_ok()
    print(verdict.report)
