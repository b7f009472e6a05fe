"""assert_gemm on numpy arrays: the block-scaled family judged against an independent numpy
definition (dequantize, multiply in float64), in both scale layouts, with the edges tolerance
tests cannot see (UE8M0 0x00 and NaN) and bad input."""
import numpy as np
import pytest

import nvfp4_oracle as oracle

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def e4m3(codes):
    codes = codes.astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0**-6,
                     (1 + mantissa / 8.0) * 2.0**(exponent - 7))
    return sign * value


def ue8m0(codes):
    return np.where(codes == 0xFF, np.nan, 2.0 ** (codes.astype(np.float64) - 127))


def mx_operand(rng, rows, k, fmt):
    """(elements as given to assert_gemm, plain UE8M0 scales, dequantized float64 values)."""
    scales = rng.integers(120, 134, size=(rows, k // 32), dtype=np.uint8)
    if fmt == "mxfp4":
        codes = rng.integers(0, 16, size=(rows, k), dtype=np.uint8)
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
        values = E2M1[codes]
        return packed, scales, values * np.repeat(ue8m0(scales), 32, axis=1)
    codes = rng.integers(0, 256, size=(rows, k), dtype=np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN elements here
    return codes, scales, e4m3(codes) * np.repeat(ue8m0(scales), 32, axis=1)


def swizzle_128x4(plain):
    """The 128x4 layout, written from its definition: scale (i, j) at
    ((i // 128) * ceil(cols / 4) + j // 4) * 512 + (i % 32) * 16 + ((i % 128) // 32) * 4 + j % 4."""
    rows, cols = plain.shape
    col_atoms = -(-cols // 4)
    out = np.zeros((-(-rows // 128)) * col_atoms * 512, dtype=np.uint8)
    for i in range(rows):
        for j in range(cols):
            offset = ((i // 128) * col_atoms + j // 4) * 512 + (i % 32) * 16 \
                + ((i % 128) // 32) * 4 + j % 4
            out[offset] = plain[i, j]
    return out


def tile_8x4(plain):
    """The 8x4 layout from its definition: scale (i, j) at
    (i // 8) * ceil(cols / 4) * 32 + (j // 4) * 32 + (i % 8) * 4 + j % 4."""
    rows, cols = plain.shape
    tiles = -(-cols // 4)
    out = np.full((-(-rows // 8)) * tiles * 32, 0xEE, dtype=np.uint8)
    for i in range(rows):
        for j in range(cols):
            out[(i // 8) * tiles * 32 + (j // 4) * 32 + (i % 8) * 4 + j % 4] = plain[i, j]
    return out


def case(seed=0, m=40, n=24, k=128):
    rng = np.random.default_rng(seed)
    a, sa, av = mx_operand(rng, m, k, "mxfp8-e4m3")
    b, sb, bv = mx_operand(rng, n, k, "mxfp4")
    return a, sa, av, b, sb, bv


def test_a_correct_output_passes_in_every_scale_layout():
    a, sa, av, b, sb, bv = case()
    out = (av @ bv.T).astype(np.float32)
    ref = oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    assert ref.expected.shape == (40, 24) and ref.unjudged == 0
    assert np.array_equal(ref.expected, out.astype(np.float64))
    oracle.assert_gemm(out, a, b, swizzle_128x4(sa), swizzle_128x4(sb), a_format="mxfp8-e4m3",
                       b_format="mxfp4", scale_layout="128x4")
    oracle.assert_gemm(out, a, b, tile_8x4(sa), tile_8x4(sb), a_format="mxfp8-e4m3",
                       b_format="mxfp4", scale_layout="8x4")
    # Scales put in the 128x4 order but read as 8x4 (128 rows of 4 scale columns: 512 bytes in
    # either layout) are the wrong scales, and the verdict says so.
    a48, sa48, av48, b48, sb48, bv48 = case(4, m=128, n=8)
    good = (av48 @ bv48.T).astype(np.float32)
    with pytest.raises(AssertionError):
        oracle.assert_gemm(good, a48, b48, swizzle_128x4(sa48), tile_8x4(sb48),
                           a_format="mxfp8-e4m3", b_format="mxfp4", scale_layout="8x4")


def test_a_wrong_element_is_named():
    a, sa, av, b, sb, bv = case(1)
    out = (av @ bv.T).astype(np.float32)
    out[3, 5] = out[3, 5] * 1.01 + 0.01
    with pytest.raises(AssertionError, match=r"1 of 960 .*\n  \[3, 5\]: got"):
        oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")


def test_ue8m0_zero_is_two_to_the_minus_127_and_0xff_is_nan():
    a, sa, av, b, sb, bv = case(2)
    sa[:, 1] = 0x00
    sb[:, 1] = 0xFE
    av = e4m3(a) * np.repeat(ue8m0(sa), 32, axis=1)
    bv = np.concatenate([E2M1[b & 0xF][..., None], E2M1[b >> 4][..., None]], axis=-1)
    bv = bv.reshape(24, 128) * np.repeat(ue8m0(sb), 32, axis=1)
    out = (av @ bv.T).astype(np.float32)
    oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    # Triton's old decoding: byte 0 as zero.
    av_wrong = e4m3(a) * np.repeat(np.where(sa == 0, 0.0, ue8m0(sa)), 32, axis=1)
    wrong = (av_wrong @ bv.T).astype(np.float32)
    assert not np.array_equal(wrong, out)
    with pytest.raises(AssertionError):
        oracle.assert_gemm(wrong, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    # A NaN scale makes its row NaN, and only NaN is accepted there.
    sa[7, 0] = 0xFF
    out[7, :] = np.nan
    ref = oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    assert np.isnan(ref.lo[7]).all()
    out[7, 2] = 0.0
    with pytest.raises(AssertionError, match=r"\[7, 2\]"):
        oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")


def test_nvfp4_with_alpha_bias_and_fp16_output():
    rng = np.random.default_rng(5)
    m, n, k = 16, 8, 64
    codes = [rng.integers(0, 16, size=(r, k), dtype=np.uint8) for r in (m, n)]
    scales = [rng.integers(0x30, 0x48, size=(r, k // 16), dtype=np.uint8) for r in (m, n)]
    packed = [(c[:, 0::2] | (c[:, 1::2] << 4)).astype(np.uint8) for c in codes]
    values = [E2M1[c] * np.repeat(e4m3(s), 16, axis=1) for c, s in zip(codes, scales)]
    alpha, bias = np.float32(0.0078125), np.linspace(-1, 1, n).astype(np.float32)
    exact = alpha * (values[0] @ values[1].T) + bias
    out = exact.astype(np.float16)
    ref = oracle.assert_gemm(out, packed[0], packed[1], scales[0], scales[1], alpha=alpha,
                             bias=bias)
    assert ref.expected.dtype == np.float64
    # A global scale applied twice is far outside.
    twice = (alpha * exact).astype(np.float16)
    with pytest.raises(AssertionError):
        oracle.assert_gemm(twice, packed[0], packed[1], scales[0], scales[1], alpha=alpha,
                           bias=bias)


def test_bad_input_says_what_is_wrong():
    a, sa, av, b, sb, bv = case(3)
    out = (av @ bv.T).astype(np.float32)
    with pytest.raises(ValueError, match="unknown operand format 'mxfp6'"):
        oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp6", b_format="mxfp4")
    with pytest.raises(ValueError, match=r"shape \[24, 40\]; A and B make \[40, 24\]"):
        oracle.assert_gemm(out.T.copy(), a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    with pytest.raises(ValueError, match="block scales are needed"):
        oracle.assert_gemm(out, a, b, None, sb, a_format="mxfp8-e4m3", b_format="mxfp4")
    with pytest.raises(TypeError, match="float64"):
        oracle.assert_gemm(out.astype(np.float64), a, b, sa, sb, a_format="mxfp8-e4m3",
                           b_format="mxfp4")
    with pytest.raises(ValueError, match=r"'a_scale' has shape \[80, 2\]; plain scales"):
        oracle.assert_gemm(out, a, b, sa.reshape(80, 2), sb, a_format="mxfp8-e4m3",
                           b_format="mxfp4")
    with pytest.raises(ValueError, match="128x4 layout"):
        oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4",
                           scale_layout="128x4")
    # A bias is counted in elements (one per column of the output), not in bytes.
    with pytest.raises(ValueError, match="'bias' has 3 elements but the shape needs 24"):
        oracle.assert_gemm(out, a, b, sa, sb, a_format="mxfp8-e4m3", b_format="mxfp4",
                           bias=np.zeros(3, dtype=np.float32))
