"""Compiles cute_nvfp4_mma.py for sm_100a on a machine without a GPU and writes its PTX into DIR:

    CUTE_DSL_ARCH=sm_100a CUTE_DSL_NO_CACHE=1 python3 compile_cute.py DIR

(CUTE_DSL_ARCH set before cutlass is imported keeps it from probing a driver; CUTE_DSL_NO_CACHE
because the kernel's tile comes from the environment, which the compile cache does not key on.) Arguments are
fake tensors (cute.runtime.make_fake_compact_tensor), so nothing is allocated or launched. A
tile the MMA refuses ends here with the compiler's message and exit 1.
"""
import os
import re
import sys

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cute_nvfp4_mma  # noqa: E402

dump = os.path.abspath(sys.argv[1])
os.makedirs(dump, exist_ok=True)  # must exist, or nothing is written, silently
output = make_fake_compact_tensor(cutlass.Float32, (128, 128), stride_order=(1, 0), assumed_align=16)
try:
    compiled = cute.compile(cute_nvfp4_mma.mma_host, output,
                            options=f"--gpu-arch sm_100a --keep-ptx --keep-cubin --dump-dir {dump}")
except cutlass.DSLUserCodeError as err:
    print(re.sub(r"\x1b\[[0-9;]*m", "", str(err)).strip().splitlines()[0])
    sys.exit(1)
print(f"compiled: {[f for f in sorted(os.listdir(dump)) if f.endswith('.ptx')][0]}")
