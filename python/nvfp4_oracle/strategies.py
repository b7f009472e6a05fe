"""Hypothesis strategies for the block-scaled family: property tests that draw GEMMs in every
operand format and every distribution, edges included, and judge a kernel with `assert_gemm`.

    from hypothesis import given
    from nvfp4_oracle import strategies

    @given(strategies.gemm_cases(a_formats=["mxfp8-e4m3"], b_formats=["mxfp4"]))
    def test_my_kernel(case):
        case.check(my_kernel(*case.kernel_args()))

Distributions: `moderate` (every finite code, scales near 1), `codes` (every finite code and
scale, UE8M0 from 2^-127 to 2^127: some elements overflow f32 and are not judged), `edges`
(scale bytes 0x00, 0xFE and NaN; NaN, infinite and zero elements). Needs `hypothesis`.
"""
import numpy as np
from hypothesis import strategies as st

from .gemm import EPILOGUES, OPERAND_FORMATS, OUT_DTYPES, assert_gemm

__all__ = ["GemmCase", "gemm_cases", "DISTRIBUTIONS"]

DISTRIBUTIONS = ("moderate", "codes", "edges")
_BLOCK = {"nvfp4": 16, "mxfp4": 32, "mxfp8-e4m3": 32, "mxfp8-e5m2": 32}
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def _e4m3(codes):
    codes = codes.astype(np.int64)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0**-6,
                     (1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    value = np.where((codes & 0x7F) == 0x7F, np.nan, value)
    return np.where(codes & 0x80, -value, value)


def decode(fmt, codes):
    """Element values (float64) of `codes` ([rows, K] uint16) in `fmt`."""
    if fmt in ("nvfp4", "mxfp4"):
        return _E2M1[codes]
    if fmt in ("mxfp8-e4m3", "fp8-e4m3"):
        return _e4m3(codes)
    if fmt == "mxfp8-e5m2":
        return (codes.astype(np.uint16) << 8).view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def decode_scales(fmt, scales):
    """Scale values (float64) of plain scale bytes."""
    if fmt == "nvfp4":
        return np.abs(_e4m3(scales & 0x7F))
    return np.where(scales == 0xFF, np.nan, 2.0 ** (scales.astype(np.float64) - 127))


class GemmCase:
    """One drawn GEMM: element codes `a`, `b` ([rows, K] uint16), plain scale bytes `a_scale`,
    `b_scale` (or None), the formats, `alpha`, `bias` (float32 [N] or None), `out_dtype`,
    `epilogue`, `distribution`."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        m, k = self.a.shape
        return (f"GemmCase({self.a_format} x {self.b_format}, {m}x{self.b.shape[0]}x{k}, "
                f"{self.distribution}, alpha {self.alpha}, {self.out_dtype}, {self.epilogue})")

    def values(self):
        """The operands' exact values (float64 [rows, K]), scales applied."""
        with np.errstate(invalid="ignore"):
            return self._values()

    def _values(self):
        out = []
        for fmt, codes, scales in ((self.a_format, self.a, self.a_scale),
                                   (self.b_format, self.b, self.b_scale)):
            value = decode(fmt, codes)
            if scales is not None:
                # 0 * NaN is NaN: a NaN scale poisons its block whatever the elements.
                value = value * np.repeat(decode_scales(fmt, scales), _BLOCK[fmt], axis=1)
            out.append(value)
        return out

    def operands(self):
        """The operands as assert_gemm takes them: packed FP4 bytes, FP8 bytes, bf16 bits."""
        def stored(fmt, codes):
            if fmt in ("nvfp4", "mxfp4"):
                return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
            if fmt == "bf16":
                return codes.astype(np.uint16)
            return codes.astype(np.uint8)
        return stored(self.a_format, self.a), stored(self.b_format, self.b)

    def check(self, out):
        """assert_gemm on `out` (the case's output type)."""
        a, b = self.operands()
        return assert_gemm(out, a, b, self.a_scale, self.b_scale, a_format=self.a_format,
                           b_format=self.b_format, alpha=self.alpha, bias=self.bias,
                           out_dtype=self.out_dtype, epilogue=self.epilogue)


def _codes(draw, fmt, rows, k, distribution):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    count = {"nvfp4": 16, "mxfp4": 16, "bf16": 65536}.get(fmt, 256)
    codes = rng.integers(0, count, size=(rows, k), dtype=np.uint32).astype(np.uint16)
    values = decode(fmt, codes)
    if fmt == "bf16" and distribution == "moderate":
        codes = (codes & 0x807F) | ((111 + rng.integers(0, 33, size=codes.shape)) << 7).astype(
            np.uint16)
    elif distribution != "edges":
        # Finite elements only: redraw NaN and infinite codes as zero.
        codes = np.where(np.isfinite(values), codes, 0).astype(np.uint16)
    return codes


def _scales(draw, fmt, rows, k, distribution):
    if fmt not in _BLOCK:
        return None
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = (rows, k // _BLOCK[fmt])
    if fmt == "nvfp4":
        scales = rng.integers(0, 0x7F, size=shape, dtype=np.uint8)
        if distribution == "edges":
            scales[rng.random(shape) < 0.05] = 0x7F
        return scales
    if distribution == "moderate":
        return rng.integers(119, 136, size=shape, dtype=np.uint8)
    if distribution == "codes":
        return rng.integers(0, 0xFF, size=shape, dtype=np.uint8)
    return rng.choice(np.array([0x00, 0x7F, 0xFE, 0xFF, 0x70, 0x8E], dtype=np.uint8), size=shape,
                      p=[0.3, 0.3, 0.2, 0.05, 0.1, 0.05])


@st.composite
def gemm_cases(draw, a_formats=OPERAND_FORMATS, b_formats=OPERAND_FORMATS,
               distributions=DISTRIBUTIONS, out_dtypes=OUT_DTYPES, epilogues=EPILOGUES,
               max_m=24, max_n=24, max_k=256):
    """A GemmCase with formats, distribution, output type and epilogue drawn from the given
    choices; M, N up to max_m, max_n; K a multiple of both formats' blocks up to max_k."""
    a_format = draw(st.sampled_from(list(a_formats)))
    b_format = draw(st.sampled_from(list(b_formats)))
    distribution = draw(st.sampled_from(list(distributions)))
    step = max(_BLOCK.get(a_format, 16), _BLOCK.get(b_format, 16))
    m = draw(st.integers(1, max_m))
    n = draw(st.integers(1, max_n))
    k = step * draw(st.integers(1, max(1, max_k // step)))
    out_dtype = draw(st.sampled_from(list(out_dtypes)))
    epilogue = draw(st.sampled_from(list(epilogues)))
    alpha = float(np.float32(draw(st.sampled_from([1.0, 0.5, -0.25, 3.0e-6, 1.0e3]))))
    bias = None
    if draw(st.booleans()):
        bias = np.linspace(-1.0, 1.0, n).astype(np.float32)
        if epilogue != "f32":
            # Outside the f32 epilogue the bias is added in the output type: make it one.
            if out_dtype == "fp16":
                bias = bias.astype(np.float16).astype(np.float32)
            elif out_dtype == "bf16":
                bias = ((bias.view(np.uint32) + 0x8000) & 0xFFFF0000).view(np.float32)
    return GemmCase(
        a=_codes(draw, a_format, m, k, distribution), b=_codes(draw, b_format, n, k, distribution),
        a_scale=_scales(draw, a_format, m, k, distribution),
        b_scale=_scales(draw, b_format, n, k, distribution), a_format=a_format,
        b_format=b_format, alpha=alpha, bias=bias, out_dtype=out_dtype, epilogue=epilogue,
        distribution=distribution)
