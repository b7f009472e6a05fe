#!/usr/bin/env bash
# Call 2: ncu on the first launch of the contiguous f64 kernel and of the integer kernel in the
# speed table (256 x 4096 x 7168), and the SASS of the build (.carry/all.cubin, made with ptxas
# from the PTX NVRTC gives).
export PATH=/usr/local/cuda/bin:$PATH LD_LIBRARY_PATH=/usr/local/cuda/lib64
nvdisasm -c .carry/all.cubin > $OUT/all.sass 2>&1 || cuobjdump -sass .carry/all.cubin > $OUT/all.sass
for k in '^nvfp4_oracle_exact_reference_f64_contiguous$' '^nvfp4_oracle_exact_reference$'; do
  timeout 150 ncu --kernel-name "regex:$k" --launch-count 1 --kill yes --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section InstructionStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    .carry/oracle_test --include-ignored --exact gpu_reference::gpu_reference_speed_table --nocapture > $OUT/ncu-$(echo $k | tr -dc a-z0-9_).log 2>&1
done
ls -la $OUT
