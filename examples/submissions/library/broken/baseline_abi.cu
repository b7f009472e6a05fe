// TEST: a deliberately broken copy of ../baseline_abi.cu. Bug: every batch reads the blocked
// scales of batch 0 (the batch stride of the scale atoms is forgotten), so outputs are right for
// L = 1 and wrong for every later batch.
#define SCALE_BATCH_BYTES(rows, rest_k) ((size_t)0)
#include "examples/submissions/library/baseline_abi.cu"
