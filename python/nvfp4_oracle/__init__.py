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
do not fit, a permuted copy that disagrees, an unknown problem or distribution, a seed outside
0..2**64-1), naming the tensor. `check` is as strict as the CLI's: the output must have exactly
the reference's shape.

`assert_gemm(out, a, b, a_scale, b_scale, a_format=..., alpha=..., ...)` judges one GEMM of the
block-scaled family as the libraries ship it (NVFP4, MX, FP8 and bf16 operands, a global scale,
a bias, fp16/bf16/f32 output): a drop-in for the tolerance line of their tests (see `gemm`).

`certify(fn)` runs the CLI's certification campaign (the same cases, shrinking and diagnosis) on
a trusted callable and returns its certificate.
"""
import json
import operator
import os
import re
import shutil
import tempfile
import traceback
import types

import numpy as np

from . import _core
from .gemm import EPILOGUES, OPERAND_FORMATS, OUT_DTYPES, GemmReference, assert_gemm

__all__ = [
    "Case", "Reference", "Verdict", "Certification", "generate", "reference", "check",
    "to_gpumode", "from_gpumode", "certify", "MODEL_VERSION", "PROBLEMS", "DISTRIBUTIONS",
    "GENERATED_DISTRIBUTIONS", "K_ORDERS",
    "assert_gemm", "GemmReference", "OPERAND_FORMATS", "OUT_DTYPES", "EPILOGUES",
]

MODEL_VERSION = _core.MODEL_VERSION
PROBLEMS = ("dual-gemm", "gemm", "gemv", "group-gemm")
# The lists the Rust side accepts (tests/oracle/cli_help.rs checks them against its enums).
# A campaign draws from DISTRIBUTIONS; generate() also makes the fixed stagnation family.
DISTRIBUTIONS = ("gpumode", "full", "adversarial", "adversarial-nan")
GENERATED_DISTRIBUTIONS = DISTRIBUTIONS + ("stagnation",)
K_ORDERS = ("contiguous", "any", "per-product")


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
    A correct kernel's every output element lies in [lo, hi]; NaN where the model says NaN.
    `k` is the problem's K (the first group's for group-gemm), `outputs` the (M, N, L) shape of
    each output tensor a kernel returns (one per group for group-gemm), `k_order` the K orders
    the interval accepts; reference() fills them in."""

    def __init__(self, expected, lo, hi, problem, k=None, outputs=None, k_order="contiguous"):
        self.expected, self.lo, self.hi, self.problem = expected, lo, hi, problem
        self.k = k
        self.outputs = [tuple(d) for d in outputs] if outputs is not None else None
        self.k_order = k_order

    @property
    def shape(self):
        return self.expected.shape

    def __repr__(self):
        shape = list(self.shape)
        if self.problem == "group-gemm" and self.outputs is not None:
            groups = ", ".join(f"{m}x{n}" for m, n, _l in self.outputs[:4])
            more = ", ..." if len(self.outputs) > 4 else ""
            what = f"group-gemm {len(self.outputs)} groups {groups}{more}"
        elif len(shape) == 3:
            m, n, l = shape
            what = f"{self.problem} {m}x{n}x{self.k if self.k is not None else '?'} L={l}"
        else:
            what = self.problem
        order = "" if self.k_order == "contiguous" else f", k_order {self.k_order}"
        return f"Reference({what}{order}, expected/lo/hi fp16 {shape})"


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

    def __str__(self):
        return self.report

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


_SEED_MAX = 2**64 - 1


def _seed(seed):
    """`seed` as an int in 0..2**64-1 (what the CLI's --seed takes)."""
    message = f"seed must be an integer in 0..2**64-1, got {seed!r}"
    if isinstance(seed, bool):
        raise TypeError(message)
    try:
        value = operator.index(seed)
    except TypeError:
        raise TypeError(message) from None
    if not 0 <= value <= _SEED_MAX:
        raise ValueError(message)
    return value


def _count(name, value, minimum):
    """`value` as an int >= minimum (cases, shape multiples)."""
    message = f"{name} must be an integer >= {minimum}, got {value!r}"
    if isinstance(value, bool):
        raise TypeError(message)
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(message) from None
    if value < minimum:
        raise ValueError(message)
    return value


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
    or not). `shape` is 'MxNxK[xL]' or a tuple; for group-gemm L counts groups. `dist`: one of
    GENERATED_DISTRIBUTIONS ('stagnation': per-product rounding at its worst)."""
    _check_name("problem", problem, PROBLEMS)
    _check_name("distribution", dist, GENERATED_DISTRIBUTIONS)
    tensors, fill = _core.generate(problem, _shape_text(shape), dist, _seed(seed))
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
    and stream-K kernel), 'any' (blocks in any order: wider intervals) or 'per-product' (one f32
    fused multiply-add per product, as cuBLAS SGEMM and torch's fp32 matmul do)."""
    _check_name("k_order", k_order, K_ORDERS)
    problem, arrays = _inputs(inputs, problem)
    expected, lo, hi, k, outputs = _core.reference(problem, arrays, k_order)
    return Reference(expected, lo, hi, problem, k=k, outputs=outputs, k_order=k_order)


def _a(value):
    """'a list', 'an int', 'a numpy array': the type of `value` with its article."""
    if isinstance(value, np.ndarray):
        return "a numpy array"
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        return "a torch tensor"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


_OUTPUT_TYPES = "a numpy array or torch tensor of float16"


class _BadOutput(Exception):
    """An output that breaks the contract: `kind` (TypeError or ValueError) and the message."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def _fp16_array(what, value, shape):
    """`value` (numpy or torch float16) as a contiguous numpy array of exactly `shape`."""
    shape = list(shape)
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        if value.dtype != torch.float16:
            raise _BadOutput(TypeError, f"{what} is a {value.dtype} tensor; the problems' outputs "
                                        f"are float16 (torch.float16)")
        array = value.detach().to("cpu").contiguous().numpy()
    elif isinstance(value, np.ndarray):
        if value.dtype != np.float16:
            raise _BadOutput(TypeError, f"{what} is numpy {value.dtype}; the problems' outputs "
                                        f"are float16")
        array = value
    else:
        raise _BadOutput(TypeError, f"{what} is {_a(value)}, not {_OUTPUT_TYPES} "
                                    f"(expected shape [M, N, L] = {shape})")
    if list(array.shape) != shape:
        raise _BadOutput(ValueError, f"{what} has shape {list(array.shape)}; expected exactly "
                                     f"[M, N, L] = {shape}, float16 (as the CLI's check: no "
                                     f"reshaping)")
    return np.ascontiguousarray(array)


def _output_elements(output, problem, shape, outputs):
    """The output's elements, float16 in [M, N, L] order (a grouped GEMM's groups one after
    another), from one array of exactly `shape` or, for group-gemm, a list with one array per
    group of exactly its (M, N, 1) in `outputs`. Raises _BadOutput."""
    if isinstance(output, (list, tuple)):
        if problem != "group-gemm":
            raise _BadOutput(TypeError, f"the output is {_a(output)}, not {_OUTPUT_TYPES}: "
                                        f"{problem} has one output, [M, N, L] = {list(shape)}")
        if outputs is None:
            raise _BadOutput(TypeError, "a list of the groups' outputs needs the groups' shapes: "
                                        "pass a Reference made by reference()")
        if len(output) != len(outputs):
            raise _BadOutput(ValueError, f"the output is {_a(output)} of {len(output)} tensors; "
                                         f"the case has {len(outputs)} groups")
        parts = [_fp16_array(f"output {g} (group {g})", part, dims).reshape(-1)
                 for g, (part, dims) in enumerate(zip(output, outputs))]
        return np.concatenate(parts) if parts else np.zeros(0, np.float16)
    return _fp16_array("the output", output, shape).reshape(-1)


def check(ref, output):
    """Judges `output` against `ref`. The output is a numpy array or torch tensor of float16
    of exactly the reference's shape [M, N, L] (what the CLI's check accepts; no reshaping),
    or for group-gemm also a list of the groups' outputs, each exactly its [M, N, 1]. Returns a
    Verdict; `check(...).assert_ok()` fails a test with the report. Raises TypeError for
    another type or dtype and ValueError for another shape, naming what was expected."""
    if not isinstance(ref, Reference):
        raise TypeError("check(ref, output): ref must be what reference() returned")
    try:
        got = _output_elements(output, ref.problem, ref.shape, ref.outputs)
    except _BadOutput as bad:
        raise bad.kind(str(bad)) from None
    passed, details, report = _core.check(ref.expected, ref.lo, ref.hi, got.reshape(ref.shape))
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


class Certification(int):
    """What certify() found: the certificate of the CLI's campaign on your callable. It is an int,
    the number of cases run (what certify returned before it carried a certificate, so
    `certify(...) >= 20` still reads), and it is true only when the kernel was certified.

    `passed`, `status` ('certified' or 'failed'), `cases`, `summary` (one line: the status, and
    for a failure the first and the minimal failing case, the verdict and the diagnosis),
    `text` (the certificate in Markdown, as the CLI writes it), `details` (the certificate's
    JSON as a dict), `failure` (its failure part, or None: `minimal_case`, `diagnosis`,
    `minimal_data`, `repro_case`, `repro_output`, `replay`), `report_dir` (where the repro
    files are; None when nothing was written). `assert_ok()` raises AssertionError with the
    certificate's text unless certified."""

    def __new__(cls, passed, details, text, summary, report_dir):
        self = super().__new__(cls, details["coverage"]["cases"])
        self.passed = passed
        self.details = details
        self.text = text
        self.summary = summary
        self.report_dir = report_dir
        self.status = details["status"]
        self.cases = details["coverage"]["cases"]
        self.failure = details["failure"]
        return self

    @property
    def diagnosis(self):
        return self.failure["diagnosis"] if self.failure else None

    @property
    def minimal_case(self):
        return self.failure["minimal_case"] if self.failure else None

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"Certification({self.summary})"

    def __str__(self):
        return self.text

    def assert_ok(self):
        """Raises AssertionError carrying the certificate's text unless the kernel passed."""
        if not self.passed:
            raise AssertionError(f"nvfp4-oracle certify: {self.summary}\n\n{self.text}")
        return self


def _exception_text(exc, fn):
    """The exception and the innermost frame in `fn`'s file (or the last one), as the CLI's
    submission worker names it."""
    frames = traceback.extract_tb(exc.__traceback__)
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__",
                                                    None)
    home = os.path.abspath(code.co_filename) if code is not None else None
    inside = [f for f in frames if home and os.path.abspath(f.filename) == home] or frames
    where = f" at {os.path.basename(inside[-1].filename)}:{inside[-1].lineno}" if inside else ""
    return f"{type(exc).__name__}: {exc}{where}"


class _Runner:
    """One run of the user's callable for the Rust campaign (PyCallableKernel in src/lib.rs
    calls it with the GIL taken): builds the callable's input from the case's tensors, calls
    it, checks what only this side can check, and answers ("ok", the output's float16
    elements) or (failure, message), failure one of the CLI's Raised, BadOutput, OutOfBounds,
    ModifiedInputs. Anything else raised here (KeyboardInterrupt) stops the campaign."""

    def __init__(self, fn, problem, data, device, torch):
        self.fn, self.problem, self.data, self.device, self.torch = fn, problem, data, device, torch

    def __call__(self, tensors, padding_fill, outputs, shape):
        if self.data == "case":
            return self._run_on_case(tensors, padding_fill, outputs, shape)
        return self._run_on_gpumode(tensors, padding_fill, outputs)

    def _elements(self, out, outputs, shape):
        """`out` judged as check() takes it (`shape` the reference's); None for `shape`: one
        tensor per output, as the door takes it (GPU MODE's group-gemm returns a list)."""
        if shape is None:
            if len(outputs) > 1 and not isinstance(out, (list, tuple)):
                return "BadOutput", (f"the output is {_a(out)}; {self.problem}'s is a list of "
                                     f"the {len(outputs)} groups' outputs, [M, N, 1] each: "
                                     f"{[list(d) for d in outputs]}")
            shape = outputs[0]
        try:
            return "ok", _output_elements(out, self.problem, shape, outputs)
        except _BadOutput as bad:
            return "BadOutput", str(bad)

    def _run_on_case(self, tensors, padding_fill, outputs, shape):
        before = {name: t.copy() for name, t in tensors.items()}
        case = Case(self.problem, tensors, padding_fill)
        try:
            out = self.fn(case)
        except Exception as exc:
            return "Raised", _exception_text(exc, self.fn)
        for name, original in before.items():
            if not np.array_equal(tensors[name], original):
                return "ModifiedInputs", f"input {name}: its contents changed"
        if out is None:
            return "BadOutput", ("the callable returned None; with data='case' it returns the "
                                 "output (a float16 numpy array [M, N, L])")
        return self._elements(out, outputs, shape)

    def _run_on_gpumode(self, tensors, padding_fill, outputs):
        torch = self.torch
        worker = _worker_module()
        arrays = {name: ("uint8", t) for name, t in tensors.items()}
        with tempfile.TemporaryDirectory(prefix="nvfp4-oracle-") as directory:
            files = json.loads(_core.write_case_dir(self.problem, arrays, padding_fill,
                                                    directory))
            files["dir"] = directory
            files["problem"] = self.problem
            data, guarded, _shapes = worker.build_data(torch, files, torch.device(self.device))
        try:
            out = self.fn(data)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as exc:
            return "Raised", _exception_text(exc, self.fn)
        # The door's own checks: guard bytes around every tensor, inputs unchanged.
        failure = worker.check_after(torch, guarded)
        if failure:
            ((kind, message),) = failure.items()
            return kind, message
        if out is None:
            # Written in place into the prefilled (poisoned) output.
            out = [c for (_x, _y, c) in data[0]] if self.problem == "group-gemm" else data[-1]
        return self._elements(out, outputs, None)


def _only_gpumode(dists):
    """The campaign's distributions: all of them, or the competition's alone (the CLI's
    --gpumode-only); the Rust campaign draws no other subset."""
    if isinstance(dists, str):
        dists = (dists,)
    try:
        chosen = set(dists)
    except TypeError:
        raise TypeError(f"dists must be distribution names; got {dists!r}") from None
    for dist in chosen:
        _check_name("distribution", dist, DISTRIBUTIONS)
    if chosen == set(DISTRIBUTIONS):
        return False
    if chosen == {"gpumode"}:
        return True
    raise ValueError(f"dists must be all of {DISTRIBUTIONS} or ('gpumode',) (the CLI's "
                     f"certify --gpumode-only); the campaign draws no other subset, got "
                     f"{tuple(sorted(chosen))}")


def certify(fn, problem="dual-gemm", cases=100, seed=7, device="cuda", m_multiple=1,
            n_multiple=1, k_multiple=16, max_l=8, dists=DISTRIBUTIONS, *, data="gpumode",
            k_order="contiguous", time_budget=None, report_dir=None, raise_on_failure=True,
            name=None):
    """Certifies a trusted callable with the CLI's campaign (`nvfp4-oracle certify`, run in
    Rust): its edge cases, its production shapes (the benchmark and competition test shapes, and
    2 random large shapes, at 2 rows of M as for the CLI's CPU kernels), its stagnation cases
    (per-product rounding's worst case), then `cases` random ones drawn from `seed` within the
    declared shape
    support (`m_multiple`, `n_multiple`, `k_multiple`, `max_l`), each judged against the model;
    the first failure is shrunk to a minimal case, diagnosed and its data shrunk, as in the
    CLI's certificate (the CLI's golden cases and GPU checks are not run).

    `data='gpumode'` (needs torch): `fn(data) -> output` has GPU MODE's `custom_kernel`
    signature; `data` is the competition's tuple on `device`, built by the CLI door's own code,
    whose guard bytes and inputs are checked after each call; an `fn` that writes the
    prefilled output in place and returns None is judged on that; outputs are as the door takes
    them (for group-gemm a list of the groups' [M, N, 1] tensors). `data='case'` (numpy only):
    `fn(case)` gets a `Case` (numpy tensors) and returns the output as check() takes it (a
    float16 array of exactly the reference's [M, N, L], for group-gemm also a list of the
    groups'). Anything else, an exception included, fails the case.

    `dists`: all distributions, or ('gpumode',) alone. `k_order`: as in reference().
    `time_budget`: seconds, stops drawing random cases after it. Returns a `Certification` (an
    int: the cases run). A failure raises AssertionError with the certificate's text, or with
    `raise_on_failure=False` is returned (its `assert_ok()` raises). The failing case's repro
    files (`nvfp4-oracle check --case ... --output ...` replays them) go into `report_dir`, or a
    new temporary directory (its `report_dir`); with `report_dir` the certificate's JSON and
    Markdown too. `name` names the kernel in the certificate (default: `fn`'s name).

    This is for code you trust, inside your own test suite: `fn` runs in this process and could
    read the answer. For untrusted code use the CLI: `nvfp4-oracle certify --submission FILE`,
    which keeps the answer out of the kernel's process."""
    _check_name("problem", problem, PROBLEMS)
    _check_name("data", data, ("gpumode", "case"))
    _check_name("k_order", k_order, K_ORDERS)
    if not callable(fn):
        raise TypeError("certify(fn, ...): fn must be callable, as GPU MODE's custom_kernel")
    seed = _seed(seed)
    cases = _count("cases", cases, 0)
    support = tuple(_count(label, value, 1) for label, value in (
        ("m_multiple", m_multiple), ("n_multiple", n_multiple), ("k_multiple", k_multiple),
        ("max_l", max_l)))
    only_gpumode = _only_gpumode(dists)
    if time_budget is not None:
        if isinstance(time_budget, bool) or not isinstance(time_budget, (int, float)) \
                or not time_budget > 0:
            raise ValueError(f"time_budget must be a positive number of seconds or None, got "
                             f"{time_budget!r}")
        time_budget = float(time_budget)
    torch = None
    if data == "gpumode":
        torch = _torch()
        if torch is None:
            raise ImportError("certify(fn) hands fn GPU MODE's data tuple, which needs torch "
                              "(pip install torch); certify(fn, data='case') runs a numpy "
                              "callable without it")
    if name is None:
        name = getattr(fn, "__name__", type(fn).__name__)
    kernel = "python-" + (re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name)).strip("-.") or "callable")
    if report_dir is not None:
        report_dir = os.fspath(report_dir)
        os.makedirs(report_dir, exist_ok=True)
        directory = report_dir
    else:
        directory = tempfile.mkdtemp(prefix="nvfp4-oracle-certify-")
    runner = _Runner(fn, problem, data, device, torch)
    try:
        passed, details, text, summary = _core.certify(
            runner, kernel, problem, support, cases, seed, only_gpumode, k_order, time_budget,
            directory, report_dir is not None)
    except BaseException:
        if report_dir is None:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    if report_dir is None and passed:
        shutil.rmtree(directory, ignore_errors=True)
        directory = None
    result = Certification(passed, json.loads(details), text, summary, directory)
    if raise_on_failure:
        result.assert_ok()
    return result
