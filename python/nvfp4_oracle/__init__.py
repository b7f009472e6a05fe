"""nvfp4-oracle inside pytest: the bit-exact NVFP4 model on numpy arrays and torch tensors.

    import nvfp4_oracle as oracle

    case = oracle.generate("dual-gemm", "256x512x256", dist="gpumode", seed=1)
    ref = oracle.reference(case)                 # expected output and acceptance interval
    out = my_kernel(oracle.to_gpumode(case, "cuda"))   # GPU MODE's data tuple (needs torch)
    oracle.check(ref, out).assert_ok()           # AssertionError with the CLI's report if not

Inputs are named tensors in the case-file layout, L first (the GPU MODE tensors made contiguous):
for each operand X (a, b1, b2 for the dual GEMM; a, b for gemm and gemv; a0, b0, a1, b1, ... for
group-gemm) its packed FP4 data `X`, [L, rows, K/2] bytes (two e2m1 codes per byte, even k in the
low nibble), and its plain scales `sfX`, [L, rows, K/16] e4m3 bytes; [rows, ...] means L = 1.
`sfX_permuted` (the blocked layout) is optional and checked against `sfX`. Arrays may be numpy
uint8, or torch uint8, float4_e2m1fn_x2 or float8_e4m3fn tensors on any device.
`from_gpumode(data, problem)` turns a GPU MODE data tuple into such a dict.

Bad input raises TypeError (a wrong dtype, a value that is not a tensor) or ValueError (shapes that
do not fit, a permuted copy that disagrees, an unknown problem or distribution), naming the tensor.
"""
import json
import os
import tempfile
import types

import numpy as np

from . import _core

__all__ = [
    "Case", "Reference", "Verdict", "generate", "reference", "check", "to_gpumode",
    "from_gpumode", "certify", "MODEL_VERSION", "PROBLEMS", "DISTRIBUTIONS",
]

MODEL_VERSION = _core.MODEL_VERSION
PROBLEMS = ("dual-gemm", "gemm", "gemv", "group-gemm")
DISTRIBUTIONS = ("gpumode", "full", "adversarial", "adversarial-nan")


class Case:
    """A problem's inputs: `problem` and `tensors` (name -> numpy uint8 array, case-file layout).
    `padding_fill` is the byte the blocked scales' padding holds (0x7F, NaN, for the adversarial
    distributions: a kernel that reads the padding poisons its output)."""

    def __init__(self, problem, tensors, padding_fill=0):
        self.problem = problem
        self.tensors = dict(tensors)
        self.padding_fill = padding_fill

    def __repr__(self):
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in sorted(self.tensors.items())
                           if not k.startswith("sf"))
        return f"Case({self.problem}: {shapes})"


class Reference:
    """The model's answer for a case: `expected`, `lo`, `hi` (numpy float16, [M, N, L]; for
    group-gemm the groups' outputs one after another, as `output_dims` in the docs says).
    A correct kernel's every output element lies in [lo, hi]; NaN where the model says NaN."""

    def __init__(self, expected, lo, hi, problem):
        self.expected, self.lo, self.hi, self.problem = expected, lo, hi, problem

    @property
    def shape(self):
        return self.expected.shape


class Verdict:
    """The judgement of one output: `passed`, `failed` (count), `elements`, `worst` (dict or
    None), `first_failures`, `report` (the CLI's text), `details` (everything, as a dict)."""

    def __init__(self, passed, details, report):
        self.passed = passed
        self.details = details
        self.report = report
        self.failed = details["failed"]
        self.elements = details["elements"]
        self.worst = details["worst"]
        self.first_failures = details["first_failures"]

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"Verdict({'PASS' if self.passed else 'FAIL'}, {self.failed} of {self.elements} failed)"

    def assert_ok(self):
        """Raises AssertionError carrying the report when the output failed."""
        if not self.passed:
            raise AssertionError("nvfp4-oracle: the output is not what a correct kernel gives\n"
                                 + self.report)
        return self


def _check_name(kind, value, allowed):
    if not isinstance(value, str):
        raise TypeError(f"{kind} must be a string, one of {', '.join(allowed)}; got {value!r}")
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")


def _shape_text(shape):
    if isinstance(shape, str):
        return shape
    try:
        dims = [int(d) for d in shape]
    except TypeError:
        raise TypeError(f"shape must be 'MxNxK', 'MxNxKxL' or a tuple of ints; got {shape!r}")
    return "x".join(str(d) for d in dims)


def generate(problem="dual-gemm", shape="256x512x256", dist="gpumode", seed=1111):
    """A deterministic case: the same bytes as `nvfp4-oracle generate` (same seed, same machine
    or not). `shape` is 'MxNxK[xL]' or a tuple; for group-gemm L counts groups."""
    _check_name("problem", problem, PROBLEMS)
    _check_name("distribution", dist, DISTRIBUTIONS)
    tensors, fill = _core.generate(problem, _shape_text(shape), dist, int(seed))
    return Case(problem, tensors, fill)


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _as_bytes(name, value):
    """(dtype name, contiguous uint8 numpy array) of a numpy array or torch tensor."""
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        dtype = str(value.dtype).replace("torch.", "")
        if dtype not in ("uint8", "float4_e2m1fn_x2", "float8_e4m3fn"):
            raise TypeError(f"tensor {name!r} is torch.{dtype}: nvfp4_oracle reads packed FP4 "
                            f"(float4_e2m1fn_x2 or uint8) and e4m3 scales (float8_e4m3fn or uint8)")
        host = value.detach().to("cpu").contiguous()
        return dtype, host.view(torch.uint8).numpy()
    if isinstance(value, np.ndarray):
        if value.dtype != np.uint8:
            raise TypeError(f"tensor {name!r} is numpy {value.dtype}: nvfp4_oracle reads packed "
                            f"FP4 data and e4m3 scales as uint8 bytes")
        return "uint8", np.ascontiguousarray(value)
    raise TypeError(f"tensor {name!r} is a {type(value).__name__}, not a numpy array or torch "
                    f"tensor")


def _inputs(inputs, problem):
    if isinstance(inputs, Case):
        problem = problem or inputs.problem
        tensors = inputs.tensors
    elif isinstance(inputs, dict):
        tensors = inputs
    else:
        raise TypeError("inputs must be a Case or a dict of named tensors (see the module "
                        f"docstring); got {type(inputs).__name__}")
    problem = problem or "dual-gemm"
    _check_name("problem", problem, PROBLEMS)
    return problem, {name: _as_bytes(name, t) for name, t in tensors.items()}


def reference(inputs, problem=None, k_order="contiguous"):
    """The model's expected output and acceptance interval for `inputs` (a Case or a dict of
    named tensors, your own data included). `k_order`: 'contiguous' (every main-loop, split-K
    and stream-K kernel) or 'any' (blocks in any order: wider intervals)."""
    _check_name("k_order", k_order, ("contiguous", "any"))
    problem, arrays = _inputs(inputs, problem)
    expected, lo, hi = _core.reference(problem, arrays, k_order)
    return Reference(expected, lo, hi, problem)


def _output_array(output, shape):
    torch = _torch()
    if torch is not None and isinstance(output, torch.Tensor):
        if output.dtype != torch.float16:
            raise TypeError(f"the output is {output.dtype}; the problems' outputs are float16")
        output = output.detach().to("cpu").contiguous().numpy()
    elif isinstance(output, (list, tuple)):
        # group-gemm: one output per group, flattened one after another.
        parts = [_output_array(o, None).reshape(-1) for o in output]
        output = np.concatenate(parts) if parts else np.zeros(0, np.float16)
    if not isinstance(output, np.ndarray):
        raise TypeError(f"the output is a {type(output).__name__}, not a numpy array or torch "
                        f"tensor")
    if output.dtype != np.float16:
        raise TypeError(f"the output is numpy {output.dtype}; the problems' outputs are float16")
    if shape is not None:
        if output.size != int(np.prod(shape)):
            raise ValueError(f"the output has shape {list(output.shape)}; the reference is "
                             f"{list(shape)} ([M, N, L])")
        output = np.ascontiguousarray(output).reshape(shape)
    return output


def check(ref, output):
    """Judges `output` (numpy or torch float16 [M, N, L]; for group-gemm a list of the groups'
    outputs) against `ref`. Returns a Verdict; `check(...).assert_ok()` fails a test with the
    report."""
    if not isinstance(ref, Reference):
        raise TypeError("check(ref, output): ref must be what reference() returned")
    got = _output_array(output, ref.shape)
    passed, details, report = _core.check(ref.expected, ref.lo, ref.hi, got)
    return Verdict(passed, json.loads(details), report)


_worker = None


def _worker_module():
    """The submission worker of the CLI's door, as a module: to_gpumode runs its own build_data,
    so the tuple is the one a submission gets from `certify --submission`."""
    global _worker
    if _worker is None:
        module = types.ModuleType("nvfp4_oracle_worker")
        exec(compile(_core.worker_source(), "submission_worker.py", "exec"), module.__dict__)
        _worker = module
    return _worker


def to_gpumode(case, device="cuda"):
    """GPU MODE's data tuple for `case` as torch tensors on `device` (dtypes, shapes, strides,
    permutes and devices as the competition's generate_input makes them, `c` prefilled), built by
    the same code as the CLI's submission door. Needs torch (2.8 or later)."""
    torch = _torch()
    if torch is None:
        raise ImportError("to_gpumode needs torch (pip install torch)")
    if not isinstance(case, Case):
        raise TypeError("to_gpumode(case, device): case must be a Case (generate() or Case(...))")
    arrays = {name: _as_bytes(name, t) for name, t in case.tensors.items()}
    with tempfile.TemporaryDirectory(prefix="nvfp4-oracle-") as directory:
        files = json.loads(_core.write_case_dir(case.problem, arrays, case.padding_fill,
                                                directory))
        files["dir"] = directory
        files["problem"] = case.problem
        data, _guarded, _shapes = _worker_module().build_data(torch, files, torch.device(device))
    return data


_INVERSE_PERMUTE = (5, 2, 4, 0, 1, 3)  # undoes GPU MODE's .permute(3, 4, 1, 5, 2, 0)


def from_gpumode(data, problem="dual-gemm"):
    """A GPU MODE data tuple back into a dict of named tensors for reference() (torch tensors,
    left on their device; reference() copies them to the CPU)."""
    _check_name("problem", problem, PROBLEMS)

    def operand(name, x, sf, permuted):
        out = {name: x.permute(2, 0, 1), "sf" + name: sf.permute(2, 0, 1)}
        if permuted is not None:
            out["sf" + name + "_permuted"] = permuted.permute(*_INVERSE_PERMUTE)
        return out

    tensors = {}
    if problem == "dual-gemm":
        a, b1, b2, sfa, sfb1, sfb2, pa, pb1, pb2, _c = data
        for args in (("a", a, sfa, pa), ("b1", b1, sfb1, pb1), ("b2", b2, sfb2, pb2)):
            tensors.update(operand(*args))
    elif problem in ("gemm", "gemv"):
        a, b, sfa, sfb, pa, pb, _c = data
        tensors.update(operand("a", a, sfa, pa))
        if problem == "gemv":
            # GPU MODE pads b to 128 rows; the problem's b is its first row.
            tensors.update(operand("b", b[:1], sfb[:1], None))
        else:
            tensors.update(operand("b", b, sfb, pb))
    else:
        abc, sfasfb, reordered, _sizes = data
        for g, ((a, b, _c), (sfa, sfb), (pa, pb)) in enumerate(zip(abc, sfasfb, reordered)):
            tensors.update(operand(f"a{g}", a, sfa, pa))
            tensors.update(operand(f"b{g}", b, sfb, pb))
    return tensors


def certify(fn, problem="dual-gemm", cases=100, seed=7, device="cuda", m_multiple=1,
            n_multiple=1, k_multiple=16, max_l=8, dists=DISTRIBUTIONS):
    """Runs a trusted callable `fn(data) -> output` (GPU MODE's `custom_kernel` signature) on the
    CLI campaign's edge cases and `cases` random ones within the declared shape support, each
    judged against the model; returns how many cases ran. Raises AssertionError at the first
    failing case, naming it (shape, distribution, seed: `generate` remakes it) with the report.
    An `fn` that writes the prefilled output in place and returns None is judged on that.

    This is for code you trust, inside your own test suite: `fn` runs in this process and could
    read the answer. For untrusted code use the CLI: `nvfp4-oracle certify --submission FILE`,
    which keeps the answer out of the kernel's process and shrinks a failure to a minimal case."""
    _check_name("problem", problem, PROBLEMS)
    if not callable(fn):
        raise TypeError("certify(fn, ...): fn must be callable, as GPU MODE's custom_kernel")
    torch = _torch()
    if torch is None:
        raise ImportError("certify needs torch (pip install torch)")
    specs = _core.campaign(int(cases), int(seed), m_multiple, n_multiple, k_multiple, max_l)
    ran = 0
    for shape, dist, case_seed in specs:
        if dist not in dists:
            continue
        case = generate(problem, shape, dist, case_seed)
        ref = reference(case)
        data = to_gpumode(case, device)
        out = fn(data)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if out is None:
            out = [c for (_a, _b, c) in data[0]] if problem == "group-gemm" else data[-1]
        verdict = check(ref, out)
        ran += 1
        if not verdict.passed:
            raise AssertionError(
                f"nvfp4-oracle: {problem} case {ran} failed: shape {shape}, dist {dist}, seed "
                f"{case_seed} (regenerate: nvfp4_oracle.generate({problem!r}, {shape!r}, "
                f"{dist!r}, {case_seed}))\n" + verdict.report)
    return ran
