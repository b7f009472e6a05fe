"""NVFP4 dual GEMM with SiLU in Triton (nvfp4-oracle example submission).

C[m, n, l] = fp16(silu(D1) * D2), D1 = A @ B1^T, D2 = A @ B2^T over NVFP4 operands.

One program per BLOCK_M x BLOCK_N output tile and batch l. The K loop takes BLOCK_K FP4 values
per step. Each value's packed byte (k // 2) and e4m3 block scale (k // 16) are loaded as uint8
(the A tile row-major, the B1 and B2 tiles K-major, ready for tl.dot); its nibble (low for even
k) and its scale byte index two tiny fp16 tables: the 16 e2m1 values, and |e4m3| for the 256
scale bytes (sign bit ignored, as tensor cores read UE4M3; 0x7F/0xFF are NaN, which spreads to
every output it touches). value * |scale| is exact in fp16; tl.dot multiplies the fp16 tiles
exactly and accumulates D1 and D2 in fp32; silu(D1) * D2 is computed in fp32 and stored as fp16
(round to nearest even, overflow to inf). Rows, columns and the K tail are masked, so every M,
N, L and every K that is a multiple of 16 is supported. All tensors are addressed through their
real strides (the inputs are permuted views).

Needs Triton 3.x and a GPU with fp16 tensor cores (written for Hopper, sm_90).
"""
import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK_M, BLOCK_N, BLOCK_K = 64, 128, 64     # BLOCK_K counts FP4 values: a multiple of 16


@triton.jit
def _dequantize(q_ptr, s_ptr, fp4_lut, scale_lut, r, k, R, K, sq_r, sq_k, ss_r, ss_k):
    """fp16 A * |scale| at rows r and K positions k (broadcastable index tensors: [rows, 1] and
    [1, k] give a row-major tile, [1, rows] and [k, 1] a K-major one); zero outside R x K."""
    mask = (r < R) & (k < K)
    byte = tl.load(q_ptr + r * sq_r + (k // 2) * sq_k, mask=mask, other=0).to(tl.int32)
    code = (byte >> ((k % 2) * 4)) & 15                        # low nibble = even k
    scale = tl.load(s_ptr + r * ss_r + (k // 16) * ss_k, mask=mask, other=0).to(tl.int32)
    return tl.load(fp4_lut + code) * tl.load(scale_lut + scale)


# Sizes and outer strides are not specialized on (one compiled kernel serves every shape); the
# inner strides, 1 in the competition's layouts, are.
@triton.jit(do_not_specialize=["M", "N", "K", "s_am", "s_al", "s_b1n", "s_b1l", "s_b2n", "s_b2l",
                               "s_sam", "s_sal", "s_sb1n", "s_sb1l", "s_sb2n", "s_sb2l",
                               "s_cm", "s_cl"])
def _dual_gemm_kernel(a_ptr, b1_ptr, b2_ptr, sa_ptr, sb1_ptr, sb2_ptr, c_ptr, fp4_lut, scale_lut,
                      M, N, K,
                      s_am, s_ak, s_al, s_b1n, s_b1k, s_b1l, s_b2n, s_b2k, s_b2l,
                      s_sam, s_sak, s_sal, s_sb1n, s_sb1k, s_sb1l, s_sb2n, s_sb2k, s_sb2l,
                      s_cm, s_cn, s_cl,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    l = tl.program_id(2)
    rows_m = tl.program_id(0) * BM + tl.arange(0, BM)
    rows_n = tl.program_id(1) * BN + tl.arange(0, BN)
    kk = tl.arange(0, BK)
    a_ptr += l * s_al
    b1_ptr += l * s_b1l
    b2_ptr += l * s_b2l
    sa_ptr += l * s_sal
    sb1_ptr += l * s_sb1l
    sb2_ptr += l * s_sb2l
    acc1 = tl.zeros((BM, BN), dtype=tl.float32)
    acc2 = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):                      # the last chunk is masked (K tail)
        k = k0 + kk
        a = _dequantize(a_ptr, sa_ptr, fp4_lut, scale_lut, rows_m[:, None], k[None, :], M, K,
                        s_am, s_ak, s_sam, s_sak)                       # [BM, BK]
        b1 = _dequantize(b1_ptr, sb1_ptr, fp4_lut, scale_lut, rows_n[None, :], k[:, None], N, K,
                         s_b1n, s_b1k, s_sb1n, s_sb1k)                  # [BK, BN] = B1^T tile
        b2 = _dequantize(b2_ptr, sb2_ptr, fp4_lut, scale_lut, rows_n[None, :], k[:, None], N, K,
                         s_b2n, s_b2k, s_sb2n, s_sb2k)
        acc1 = tl.dot(a, b1, acc1)                  # fp16 x fp16 (exact products), fp32 sums
        acc2 = tl.dot(a, b2, acc2)
    out = acc1 / (1.0 + tl.exp(-acc1)) * acc2       # silu(D1) * D2 in fp32
    c_ptrs = c_ptr + l * s_cl + rows_m[:, None] * s_cm + rows_n[None, :] * s_cn
    mask = (rows_m[:, None] < M) & (rows_n[None, :] < N)
    tl.store(c_ptrs, out.to(tl.float16), mask=mask)  # round to nearest even


_TABLES = {}


def _tables(device):
    """fp16 lookup tables: the 16 e2m1 values, and |e4m3| for all 256 scale bytes (the sign bit
    ignored as tensor cores read UE4M3; 0x7F and 0xFF stay NaN). Every entry is exact in fp16."""
    if device not in _TABLES:
        fp4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
        scales = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).float().abs()
        _TABLES[device] = (torch.tensor(fp4, dtype=torch.float16, device=device),
                           scales.to(device=device, dtype=torch.float16))
    return _TABLES[device]


def custom_kernel(data: input_t) -> output_t:
    a, b1, b2, sfa, sfb1, sfb2, _sfa_p, _sfb1_p, _sfb2_p, c = data
    M, K2, L = a.shape
    N = b1.shape[0]
    K = 2 * K2
    q = [t.view(torch.uint8) for t in (a, b1, b2)]
    s = [t.view(torch.uint8) for t in (sfa, sfb1, sfb2)]
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N), L)
    _dual_gemm_kernel[grid](
        q[0], q[1], q[2], s[0], s[1], s[2], c, *_tables(c.device), M, N, K,
        *q[0].stride(), *q[1].stride(), *q[2].stride(),
        *s[0].stride(), *s[1].stride(), *s[2].stride(), *c.stride(),
        BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, num_warps=8, num_stages=3)
    return c


def compile_kernel():
    """JIT-compiles the common specializations once, before any timed call."""
    for m, n, k, l in ((128, 128, 256, 1), (1, 1, 16, 1), (3, 5, 48, 2)):
        make = lambda rows, cols: torch.zeros((l, rows, cols), dtype=torch.uint8, device="cuda")
        a, b1, b2 = make(m, k // 2), make(n, k // 2), make(n, k // 2)
        sa, sb1, sb2 = make(m, k // 16), make(n, k // 16), make(n, k // 16)
        c = torch.empty((l, m, n), dtype=torch.float16, device="cuda").permute(1, 2, 0)
        p = lambda t: t.permute(1, 2, 0)
        custom_kernel((p(a), p(b1), p(b2), p(sa), p(sb1), p(sb2), None, None, None, c))
    torch.cuda.synchronize()
