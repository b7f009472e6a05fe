// The harness's own kernels for the determinism checks (its `gpu::conditions` module), compiled
// by the worker when a run asks for them. They are not kernels under test.

// Fills this CTA's dynamic shared memory with `fill`. Launched with as much dynamic shared memory
// as one CTA may have and two CTAs per SM, it leaves that byte in (nearly) all of every SM's
// shared memory: a kernel launched next that reads shared memory it never wrote reads it.
extern "C" __global__ void nvfp4_oracle_fill_shared_memory(unsigned int fill, int bytes) {
  extern __shared__ unsigned int shared_words[];
  // volatile: the stores are the point, no later read in this kernel must keep them alive.
  volatile unsigned int* words = shared_words;
  const unsigned int word = (fill & 0xFFu) * 0x01010101u;
  for (int i = threadIdx.x; i < bytes / 4; i += blockDim.x) words[i] = word;
}

// Keeps an SM busy for `cycles` clock cycles: other work on the GPU while the kernel under test
// runs, so that its CTAs get fewer SMs and another order.
extern "C" __global__ void nvfp4_oracle_busy(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
