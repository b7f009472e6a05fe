"""A compile-only CuTe DSL kernel that issues the NVFP4 block-scaled MMA on Blackwell (sm_100a).

It exists to give `nvfp4-oracle preflight` real sm_100a code on a machine without a GPU: one CTA
(or a CTA pair: CG=2) multiplies one tile of FP4 A and B already in shared memory, with e4m3
scales per 16 in tensor memory, by `tcgen05.mma ... kind::mxf4nvf4.block_scale.block16`. It
cannot run: tensor-memory addresses are constants (no tcgen05.alloc), and nothing loads the
operands, commits or stores the result. The tile comes from the environment: MMA_M, MMA_N, CG
(1 or 2), SMEM_BYTES (the launch's dynamic shared memory), SCALES (nvfp4, or mx for MXFP4's
scales), SF_LAYOUT_VEC (the scale vector size of the scale layouts, 16 or 32, by default the
MMA's), CLUSTER (the launch's cluster, "x,y,z" or "none") and WS=1 (two warpgroups with warp
roles: the first gives registers back with setmaxnreg.dec, the second takes more with
setmaxnreg.inc and issues the MMA), so that the tile checks of the MMA's constructor can be seen
refusing a bad one, and the kernels CuTe DSL compiles without complaint (scales laid out for
another block size, a CTA pair launched without a cluster) can be seen by preflight.
Compiled as a submission by submission_nvfp4_mma.py beside it (run.sh).
"""
import os, sys
import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import tcgen05, OperandMajorMode
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass.cute.typing import AddressSpace

AB = cutlass.Float4E2M1FN
# SCALES=mx: MXFP4's UE8M0 scales per 32 instead of NVFP4's e4m3 per 16 (a kernel for the
# wrong format, for preflight to catch).
MX = os.environ.get("SCALES", "nvfp4") == "mx"
SF = cutlass.Float8E8M0FNU if MX else cutlass.Float8E4M3FN
SF_VEC = 32 if MX else 16
# SF_LAYOUT_VEC: the scale vector size of the scale layouts (shared and tensor memory; a kernel
# that copies its scales fills them by these layouts), independent of the MMA's (SF_VEC): 32
# with NVFP4's MMA lays the scales out one per 32 K elements while the MMA reads one per 16, a
# kernel that compiles and applies the wrong scales.
SF_LAYOUT_VEC = int(os.environ.get("SF_LAYOUT_VEC", str(SF_VEC)))
MMA_M = int(os.environ.get("MMA_M", "128"))
MMA_N = int(os.environ.get("MMA_N", "128"))
CG = int(os.environ.get("CG", "1"))
MMA_TILER = (MMA_M, MMA_N, 256)   # K tile = 4 MMA-K (64) steps
SMEM_BYTES = int(os.environ.get("SMEM_BYTES", str(64 * 1024)))
WS = os.environ.get("WS", "0") == "1"
THREADS = 256 if WS else 128

@cute.kernel
def mma_kernel(gD: cute.Tensor):
    tiled_mma = sm100_utils.make_blockscaled_trivial_tiled_mma(
        AB, AB, OperandMajorMode.K, OperandMajorMode.K, SF, SF_VEC,
        tcgen05.CtaGroup.ONE if CG == 1 else tcgen05.CtaGroup.TWO, MMA_TILER[:2])
    a_layout = sm100_utils.make_smem_layout_a(tiled_mma, MMA_TILER, AB, 1)
    b_layout = sm100_utils.make_smem_layout_b(tiled_mma, MMA_TILER, AB, 1)
    sfa_layout = blockscaled_utils.make_smem_layout_sfa(tiled_mma, MMA_TILER, SF_LAYOUT_VEC, 1)
    sfb_layout = blockscaled_utils.make_smem_layout_sfb(tiled_mma, MMA_TILER, SF_LAYOUT_VEC, 1)

    smem = cutlass.utils.SmemAllocator()
    sA = smem.allocate_tensor(AB, a_layout.outer, byte_alignment=128, swizzle=a_layout.inner)
    sB = smem.allocate_tensor(AB, b_layout.outer, byte_alignment=128, swizzle=b_layout.inner)

    tCrA = tiled_mma.make_fragment_A(sA)
    tCrB = tiled_mma.make_fragment_B(sB)
    acc_shape = tiled_mma.partition_shape_C(MMA_TILER[:2])
    tCtAcc_fake = tiled_mma.make_fragment_C(acc_shape)

    # TMEM: accumulator at column 0 (no tcgen05.alloc here: compile-only probe)
    acc_ptr = cute.make_ptr(cutlass.Float32, 0, AddressSpace.tmem, assumed_align=16)
    tCtAcc = cute.make_tensor(acc_ptr, tCtAcc_fake.layout)
    sfa_ptr = cute.recast_ptr(acc_ptr + tcgen05.find_tmem_tensor_col_offset(tCtAcc), dtype=SF)
    tCtSFA = cute.make_tensor(sfa_ptr, blockscaled_utils.make_tmem_layout_sfa(
        tiled_mma, MMA_TILER, SF_LAYOUT_VEC, cute.slice_(sfa_layout, (None, None, None, 0))))
    sfb_ptr = cute.recast_ptr(acc_ptr + tcgen05.find_tmem_tensor_col_offset(tCtAcc)
                              + tcgen05.find_tmem_tensor_col_offset(tCtSFA), dtype=SF)
    tCtSFB = cute.make_tensor(sfb_ptr, blockscaled_utils.make_tmem_layout_sfb(
        tiled_mma, MMA_TILER, SF_LAYOUT_VEC, cute.slice_(sfb_layout, (None, None, None, 0))))

    if cutlass.const_expr(WS):
        # Warp roles: a producer warpgroup with few registers, a consumer with many.
        if cute.arch.make_warp_uniform(cute.arch.warp_idx()) < 4:
            cute.arch.warpgroup_reg_dealloc(40)
        else:
            cute.arch.warpgroup_reg_alloc(232)
    tiled_mma.set(tcgen05.Field.ACCUMULATE, False)
    for k in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
        cute.gemm(tiled_mma, tCtAcc,
                  [tCrA[(None, None, k, 0)], tCtSFA[(None, None, k)]],
                  [tCrB[(None, None, k, 0)], tCtSFB[(None, None, k)]],
                  tCtAcc)
        tiled_mma.set(tcgen05.Field.ACCUMULATE, True)

# CLUSTER: the launch's cluster, "x,y,z", or "none" for a launch without one (by default none
# for one CTA, (2, 1, 1) for a CTA pair); the grid is one cluster (or CG CTAs without one).
CLUSTER = os.environ.get("CLUSTER", "none" if CG == 1 else "2,1,1")
CLUSTER_DIMS = None if CLUSTER == "none" else tuple(int(d) for d in CLUSTER.split(","))
GRID = CLUSTER_DIMS or (CG, 1, 1)

@cute.jit
def mma_host(mD: cute.Tensor):
    if cutlass.const_expr(CLUSTER_DIMS is None):
        mma_kernel(mD).launch(grid=GRID, block=(THREADS, 1, 1), smem=SMEM_BYTES)
    else:
        mma_kernel(mD).launch(grid=GRID, block=(THREADS, 1, 1), cluster=CLUSTER_DIMS,
                              smem=SMEM_BYTES)
