// The GPU input generator's kernels (crates/harness/kernels/harness/input_generator_kernel.cu)
// compiled as plain C++ and run on the host with one thread: how tests/oracle/gpu_inputs.rs
// checks their arithmetic against the CPU generator on a machine without a GPU. The CUDA
// keywords are defined away; a grid of one block of one thread walks every item of the kernels'
// grid-stride loops, so the same code makes the same bytes as on the GPU, only slowly.
//
// Usage: input_generator_on_the_host DIR. DIR holds what gpu::input_generator gives the kernels
// for one operand, written by the test: `params` (seed stream distribution role rows batches
// blocks segment_blocks plan_words padding_fill, decimal, one line), `starts` (u64), `modes`
// (u8), `block_words` (u32), `thresholds` (u32), all little-endian. It writes `data`, `plain`,
// `blocked` and `mismatch` (the kernels' flag, one byte) into DIR, as the loader does: the
// blocked tensor filled with the padding byte first, the tails kernel, then the rows kernel.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
struct GridDimension {
    unsigned x, y, z;
};
// One block of one thread: every grid-stride loop walks all of its items.
static const GridDimension blockIdx = {0, 0, 0}, threadIdx = {0, 0, 0};
static const GridDimension blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
static int atomicExch(int* at, int value) {
    int old = *at;
    *at = value;
    return old;
}
template <class T>
static T min(T a, T b) {
    return a < b ? a : b;
}

#include "input_generator_kernel.cu"

static std::vector<unsigned char> read_file(const std::string& path) {
    std::vector<unsigned char> bytes;
    FILE* file = std::fopen(path.c_str(), "rb");
    if (!file) {
        std::fprintf(stderr, "cannot read %s\n", path.c_str());
        std::exit(2);
    }
    for (int c; (c = std::fgetc(file)) != EOF;) bytes.push_back((unsigned char)c);
    std::fclose(file);
    return bytes;
}

template <class T>
static std::vector<T> read_values(const std::string& path) {
    std::vector<unsigned char> bytes = read_file(path);
    std::vector<T> values(bytes.size() / sizeof(T) + 1);  // never empty: a kernel argument
    for (size_t i = 0; i + sizeof(T) <= bytes.size(); i += sizeof(T)) {
        T value = 0;
        for (size_t b = 0; b < sizeof(T); ++b) value |= (T)bytes[i + b] << (8 * b);
        values[i / sizeof(T)] = value;
    }
    return values;
}

static void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (!file || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(2);
    }
    std::fclose(file);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: input_generator_on_the_host DIR\n");
        return 2;
    }
    const std::string dir = std::string(argv[1]) + "/";
    unsigned long long seed, stream;
    int distribution, role;
    unsigned rows, batches, blocks, segment_blocks, plan_words, fill;
    FILE* params = std::fopen((dir + "params").c_str(), "r");
    if (!params || std::fscanf(params, "%llu %llu %d %d %u %u %u %u %u %u", &seed, &stream,
                               &distribution, &role, &rows, &batches, &blocks, &segment_blocks,
                               &plan_words, &fill) != 10) {
        std::fprintf(stderr, "cannot read %sparams\n", dir.c_str());
        return 2;
    }
    std::fclose(params);
    std::vector<u64> starts = read_values<u64>(dir + "starts");
    std::vector<u8> modes = read_values<u8>(dir + "modes");
    std::vector<u32> block_words = read_values<u32>(dir + "block_words");
    std::vector<u32> thresholds = read_values<u32>(dir + "thresholds");
    const u64 all_rows = (u64)rows * batches;
    const u64 row_atoms = (rows + ATOM_ROWS - 1) / ATOM_ROWS;
    const u64 col_atoms = (blocks + ATOM_COLS - 1) / ATOM_COLS;
    std::vector<unsigned char> data(all_rows * blocks * BLOCK_BYTES), plain(all_rows * blocks);
    std::vector<unsigned char> blocked(row_atoms * col_atoms * ATOM_BYTES * batches,
                                       (unsigned char)fill);
    std::vector<int> tails(all_rows * TAIL_FIELDS + 1);
    int mismatch = 0;
    nvfp4_oracle_generate_row_tails(seed, stream, distribution, role, blocks * BLOCK_BYTES,
                                    blocks, all_rows, starts.data(), plan_words, tails.data(),
                                    &mismatch);
    nvfp4_oracle_generate_rows(seed, stream, distribution, role, rows, batches, blocks,
                               segment_blocks, starts.data(), thresholds.data(), modes.data(),
                               block_words.data(), plan_words, tails.data(), data.data(),
                               plain.data(), blocked.data());
    write_file(dir + "data", data);
    write_file(dir + "plain", plain);
    write_file(dir + "blocked", blocked);
    write_file(dir + "mismatch", std::vector<unsigned char>(1, (unsigned char)mismatch));
    return 0;
}
