// Probe for the arithmetic of mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 on Hopper.
// No #include: built with `nvcc -cubin -gencode=arch=compute_90a,code=sm_90a` and launched
// through the CUDA driver API by kernels/probe/probe_mma.py.
//
// One independent problem per warp: D = C + A*B with A 16x16 (row-major fp16 bits), B given
// transposed as Bt 8x16 (Bt[n*16+k] = B[k][n]), C and D 16x8 row-major f32. Every D element is
// written, so each problem yields 128 dot products d[i][j] = c[i][j] + sum_k a[i][k]*b[k][j].

extern "C" __global__ void mma_f16_f32(const unsigned short* __restrict__ A,
                                       const unsigned short* __restrict__ Bt,
                                       const float* __restrict__ C, float* __restrict__ D,
                                       int nprob) {
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int lane = (int)(threadIdx.x & 31);
    if (warp >= nprob) return;
    const unsigned short* a = A + (size_t)warp * 256;
    const unsigned short* bt = Bt + (size_t)warp * 128;
    const float* c = C + (size_t)warp * 128;
    float* d = D + (size_t)warp * 128;
    const int g = lane >> 2, t = lane & 3;
    // PTX ISA fragment layouts for m16n8k16 .f16: the lower 16 bits of each .f16x2 register
    // hold the element with the smaller column (A) or row (B) index.
    unsigned a0 = (unsigned)a[g * 16 + 2 * t] | ((unsigned)a[g * 16 + 2 * t + 1] << 16);
    unsigned a1 = (unsigned)a[(g + 8) * 16 + 2 * t] | ((unsigned)a[(g + 8) * 16 + 2 * t + 1] << 16);
    unsigned a2 = (unsigned)a[g * 16 + 2 * t + 8] | ((unsigned)a[g * 16 + 2 * t + 9] << 16);
    unsigned a3 =
        (unsigned)a[(g + 8) * 16 + 2 * t + 8] | ((unsigned)a[(g + 8) * 16 + 2 * t + 9] << 16);
    unsigned b0 = (unsigned)bt[g * 16 + 2 * t] | ((unsigned)bt[g * 16 + 2 * t + 1] << 16);
    unsigned b1 = (unsigned)bt[g * 16 + 2 * t + 8] | ((unsigned)bt[g * 16 + 2 * t + 9] << 16);
    float c0 = c[g * 8 + 2 * t], c1 = c[g * 8 + 2 * t + 1];
    float c2 = c[(g + 8) * 8 + 2 * t], c3 = c[(g + 8) * 8 + 2 * t + 1];
    float d0, d1, d2, d3;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2),
          "f"(c3));
    d[g * 8 + 2 * t] = d0;
    d[g * 8 + 2 * t + 1] = d1;
    d[(g + 8) * 8 + 2 * t] = d2;
    d[(g + 8) * 8 + 2 * t + 1] = d3;
}
