"""`assert_gemm`: the exact oracle for the block-scaled GEMMs the libraries ship, as a drop-in for
the tolerance line of their tests.

    # vLLM's test_nvfp4_scaled_mm.py ends with
    #     torch.testing.assert_close(out, ref, atol=1e-1, rtol=1e-1)
    # which becomes
    oracle.assert_gemm(out, a_fp4, b_fp4, a_scale, b_scale, a_format="nvfp4", b_format="nvfp4",
                       alpha=alpha, scale_layout="128x4")

`out = epilogue(alpha * (A @ B^T) + bias)`, A `[M, K]` and B `[N, K]` (B as the weight is stored,
N rows of K). Operand formats (`a_format`, `b_format`):

| format | elements | block scale |
|---|---|---|
| `nvfp4` | e2m1, packed two per byte, even k in the low nibble (`[rows, K/2]` uint8 or `float4_e2m1fn_x2`) | e4m3 per 16 (`float8_e4m3fn` or uint8) |
| `mxfp4` | e2m1, packed as above | UE8M0 per 32 (`float8_e8m0fnu` or uint8) |
| `mxfp8-e4m3`, `mxfp8-e5m2` | one byte each (`float8_e4m3fn`, `float8_e5m2` or uint8) | UE8M0 per 32 |
| `fp8-e4m3` | one byte each | none: fold its per-tensor scale into `alpha` |
| `bf16` | torch bfloat16, or its bits as uint16 | none |

Scales are plain (`[rows, K/block]`) or, with `scale_layout="128x4"`, in the swizzled layout of
cuBLAS, CUTLASS, torchao's `to_blocked` and TensorRT-LLM (any shape holding
`ceil(rows/128) * ceil(K/block/4) * 512` bytes), or with `scale_layout="8x4"` in TensorRT-LLM's
`R8c4` layout (FlashInfer's `layout_8x4`: 8 x 4 tiles of 32 bytes). `alpha` is the FP32 global scale (for NVFP4's
two-level recipe `1 / (global_scale_a * global_scale_b)`); `bias` one value per column (N).
`epilogue` names where they are applied: `"f32"` (CUTLASS, cuBLASLt, cuDNN: `alpha * acc + bias`
in f32, one cast; fused or not), `"bias-in-output"` (vLLM: the bias added after the cast, in the
output type), `"after-cast"` (torchao: cast, times alpha in the output type, plus the bias).
`out` is torch float16, bfloat16 or float32, or numpy float16 / float32 (uint16 bits with
`out_dtype="bf16"`).

Every output element must lie in the interval any correct kernel may produce (any accumulation
order of whole 16- or 32-blocks in f32, up to 16 split-K partials; docs/reference/numerics.md); NaN where
a NaN scale or element took part. Elements where the f32 accumulator could overflow are not
judged and counted in the result.
"""
import numpy as np

from . import _core

__all__ = ["assert_gemm", "GemmReference", "OPERAND_FORMATS", "OUT_DTYPES", "EPILOGUES"]

OPERAND_FORMATS = ("nvfp4", "mxfp4", "mxfp8-e4m3", "mxfp8-e5m2", "fp8-e4m3", "bf16")
OUT_DTYPES = ("fp16", "bf16", "fp32")
EPILOGUES = ("f32", "bias-in-output", "after-cast")
_PACKED_FP4 = ("nvfp4", "mxfp4")
_TORCH_BYTES = ("uint8", "int8", "float4_e2m1fn_x2", "float8_e4m3fn", "float8_e5m2",
                "float8_e8m0fnu")


class GemmReference:
    """The oracle's answer: `expected` (the exact reference), `lo`, `hi` (numpy float64, [M, N];
    NaN where the answer is NaN, -inf/inf where not judged), `unjudged` (count)."""

    def __init__(self, expected, lo, hi, unjudged):
        self.expected, self.lo, self.hi, self.unjudged = expected, lo, hi, unjudged

    def __repr__(self):
        m, n = self.expected.shape
        return f"GemmReference({m}x{n}, {self.unjudged} unjudged)"


def _torch_dtype(value):
    """The torch dtype's name when `value` is a torch tensor, else None (torch not imported)."""
    module = type(value).__module__
    if module.startswith("torch"):
        return str(value.dtype).replace("torch.", "")
    return None


def _host(value):
    return value.detach().to("cpu").contiguous()


def _bytes(name, value):
    """A numpy uint8 array of a byte tensor (FP4 pairs, FP8, UE8M0 or uint8)."""
    dtype = _torch_dtype(value)
    if dtype is not None:
        if dtype not in _TORCH_BYTES:
            raise TypeError(f"{name!r} is torch.{dtype}; expected one of "
                            f"{', '.join('torch.' + d for d in _TORCH_BYTES)}")
        import torch
        return _host(value).view(torch.uint8).numpy()
    if isinstance(value, np.ndarray):
        if value.dtype not in (np.uint8, np.int8):
            raise TypeError(f"{name!r} is numpy {value.dtype}; expected uint8 bytes")
        return np.ascontiguousarray(value).view(np.uint8)
    raise TypeError(f"{name!r} is a {type(value).__name__}, not a numpy array or torch tensor")


def _bf16_bits(name, value):
    dtype = _torch_dtype(value)
    if dtype == "bfloat16":
        import torch
        return _host(value).view(torch.int16).numpy().view(np.uint16)
    if isinstance(value, np.ndarray) and value.dtype == np.uint16:
        return np.ascontiguousarray(value)
    raise TypeError(f"{name!r} must be a torch.bfloat16 tensor or its bits as numpy uint16 "
                    f"(got {dtype or type(value).__name__})")


def _codes(name, value, fmt):
    """Element codes [rows, K] as uint16."""
    if fmt == "bf16":
        codes = _bf16_bits(name, value)
    else:
        data = _bytes(name, value)
        if fmt in _PACKED_FP4:
            if data.ndim != 2:
                raise ValueError(f"{name!r} has shape {list(data.shape)}; packed FP4 is "
                                 f"[rows, K/2]")
            codes = np.stack([data & 0xF, data >> 4], axis=-1).reshape(data.shape[0], -1)
        else:
            codes = data
    if codes.ndim != 2:
        raise ValueError(f"{name!r} has shape {list(codes.shape)}; expected [rows, K]")
    return np.ascontiguousarray(codes.astype(np.uint16))


def _output(out, out_dtype):
    """(f64 values, out dtype name)."""
    dtype = _torch_dtype(out)
    names = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}
    if dtype is not None:
        if dtype not in names:
            raise TypeError(f"the output is torch.{dtype}; expected float16, bfloat16 or float32")
        inferred = names[dtype]
        values = _host(out).float().numpy()
    elif isinstance(out, np.ndarray):
        if out.dtype == np.uint16:
            if out_dtype != "bf16":
                raise TypeError("a uint16 output is read as bf16 bits: pass out_dtype='bf16'")
            inferred = "bf16"
            values = (out.astype(np.uint32) << 16).view(np.float32)
        elif out.dtype in (np.float16, np.float32):
            inferred = "fp16" if out.dtype == np.float16 else "fp32"
            values = out
        else:
            raise TypeError(f"the output is numpy {out.dtype}; expected float16, float32 or "
                            f"uint16 (bf16 bits)")
    else:
        raise TypeError(f"the output is a {type(out).__name__}, not a numpy array or torch tensor")
    if out_dtype is not None and out_dtype != inferred:
        raise TypeError(f"out_dtype={out_dtype!r} but the output holds {inferred}")
    return np.ascontiguousarray(values, dtype=np.float64), inferred


def _choice(kind, value, allowed):
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")


def assert_gemm(out, a, b, a_scale=None, b_scale=None, *, a_format="nvfp4", b_format="nvfp4",
                alpha=1.0, bias=None, out_dtype=None, epilogue="f32", scale_layout="plain"):
    """Raises AssertionError, listing the first elements outside the oracle's interval, unless
    every element of `out` is one a correct kernel may produce; returns the GemmReference."""
    _choice("operand format", a_format, OPERAND_FORMATS)
    _choice("operand format", b_format, OPERAND_FORMATS)
    _choice("epilogue", epilogue, EPILOGUES)
    _choice("scale layout", scale_layout, ("plain", "128x4", "8x4"))
    if out_dtype is not None:
        _choice("output type", out_dtype, OUT_DTYPES)
    values, out_dtype = _output(out, out_dtype)
    # Plain scales keep their shape, which is checked; the 128x4 layout is read as its bytes.
    scales = [None if s is None else
              _bytes(n, s).reshape(-1) if scale_layout != "plain" else _bytes(n, s)
              for n, s in (("a_scale", a_scale), ("b_scale", b_scale))]
    if bias is not None:
        bias = np.ascontiguousarray(_host(bias).float().numpy() if _torch_dtype(bias) else bias,
                                    dtype=np.float32).reshape(-1)
    expected, lo, hi, rejected, unjudged = _core.scaled_gemm_check(
        a_format, _codes("a", a, a_format), scales[0], b_format, _codes("b", b, b_format),
        scales[1], scale_layout, float(alpha), bias, out_dtype, epilogue, values)
    reference = GemmReference(expected, lo, hi, unjudged)
    if rejected:
        n = expected.shape[1]
        lines = [f"nvfp4-oracle: {len(rejected)} of {expected.size} output elements are outside "
                 f"what a correct kernel gives ({a_format} x {b_format}, alpha {alpha}, "
                 f"{out_dtype} output, {epilogue} epilogue)"]
        for index in rejected[:10]:
            i, j = divmod(index, n)
            lines.append(f"  [{i}, {j}]: got {float(values[i, j])!r}, exact "
                         f"{float(expected[i, j])!r}, accepted [{float(lo[i, j])!r}, "
                         f"{float(hi[i, j])!r}]")
        if len(rejected) > 10:
            lines.append(f"  ... and {len(rejected) - 10} more")
        raise AssertionError("\n".join(lines))
    return reference
