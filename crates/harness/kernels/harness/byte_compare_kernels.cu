// The harness's own kernel that tells whether two device buffers hold the same bytes (its
// `gpu::pristine` module): a shared run's inputs and output checked where they are, rather than
// read back to the host. Not a kernel under test.

// Sets *differ to 1 if a[0..n) and b[0..n) differ anywhere; leaves it alone otherwise. Sixteen
// bytes a thread a step where both start 16-byte aligned (every body and copy the harness makes
// starts 256-byte aligned), the rest a byte at a time.
extern "C" __global__ void nvfp4_oracle_bytes_differ(const unsigned char* a,
                                                     const unsigned char* b,
                                                     unsigned long long n,
                                                     unsigned int* differ) {
  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const bool aligned = ((reinterpret_cast<unsigned long long>(a) |
                         reinterpret_cast<unsigned long long>(b)) & 15ull) == 0;
  const unsigned long long vectors = aligned ? n / 16 : 0;
  unsigned int seen = 0;
  const uint4* va = reinterpret_cast<const uint4*>(a);
  const uint4* vb = reinterpret_cast<const uint4*>(b);
  for (unsigned long long i = first; i < vectors; i += stride) {
    const uint4 x = va[i];
    const uint4 y = vb[i];
    seen |= (x.x ^ y.x) | (x.y ^ y.y) | (x.z ^ y.z) | (x.w ^ y.w);
  }
  for (unsigned long long i = vectors * 16 + first; i < n; i += stride) {
    seen |= a[i] ^ b[i];
  }
  if (seen != 0) {
    *differ = 1u;
  }
}
