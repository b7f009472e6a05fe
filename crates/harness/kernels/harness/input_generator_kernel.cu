// The dual GEMM's inputs made on the GPU, byte for byte what the CPU generator
// (crates/model/src/problem/generate.rs, `generate_dual_gemm`) makes, and the blocked scales
// `BlockScaledMatrix::blocked_scales` makes of them. Loaded by
// crates/harness/src/gpu/input_generator.rs, which says what the host gives these kernels.
//
// Every value is drawn from ChaCha8 exactly as rand_chacha's `ChaCha8Rng` gives it: the key
// expanded from the u64 seed by rand_core's PCG32 `seed_from_u64`, the operand's stream id as
// the 64-bit nonce, a 64-bit block counter, 16 words a block, word w of a stream in block w / 16
// at index w % 16. ChaCha is a counter mode, so any word is reached at once: a thread seeks to
// the words its bytes are drawn from, as the CPU's tasks do.
//
// Where each row starts in its operand's stream is the host's (`dual_gemm_draws` in the model):
// a row's length is decided by words at its own start, so the starts form one sequential chain
// that a GPU would walk on one thread. The kernels check the chain: each row's tail ends where
// the next row starts, or a flag is raised and the host reports a harness error.

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

// Distributions, numbered as the host's `distribution_code` (input_generator.rs).
#define DISTRIBUTION_GPUMODE 0
#define DISTRIBUTION_FULL 1
#define DISTRIBUTION_ADVERSARIAL 2
#define DISTRIBUTION_ADVERSARIAL_NAN 3

// K-block modes of the adversarial plan, numbered as the host's `mode_code`; a random block is
// every mode's default branch below.
#define K_BLOCK_RANDOM 0
#define K_BLOCK_ZERO 1
#define K_BLOCK_CANCEL_FIRST 2
#define K_BLOCK_CANCEL_SECOND 3

#define ROLE_A 0
#define ROLE_B 1

// 16 values of K share a scale (a K-block); two e2m1 values a byte: 8 bytes a K-block.
#define BLOCK_BYTES 8
// The blocked scale layout's atom: 128 rows x 4 scale columns, 512 bytes.
#define ATOM_ROWS 128
#define ATOM_COLS 4
#define ATOM_BYTES 512

#define GPUMODE_FP4_MASK 0xBB
#define FP4_MAX_MAGNITUDES 0x77
#define FP4_SIGNS 0x88
#define E4M3_MIN_NORMAL_CODE 0x08
#define E4M3_TWO 0x40
#define E4M3_SIXTEEN 0x58
#define E4M3_MAX_CODE 0x7E
#define E4M3_NAN_CODE 0x7F
#define E4M3_SIGN 0x80
// 0.25: the top of the full distribution's narrow scales.
#define FULL_NARROW_MAX_CODE 0x28
// Codes 1 ..= 0x38 (1.0) of the gpumode scale e4m3(uniform[0, 1)): the host's thresholds.
#define UNIT_SCALE_THRESHOLDS 56

// What a row's tail decided (adversarial distributions), -1 where it did not happen.
#define TAIL_MAX_BLOCK 0
#define TAIL_KEEP_BLOCK 1
#define TAIL_NAN_BLOCK 2
#define TAIL_FIELDS 3

#define CHACHA8_DOUBLE_ROUNDS 4
#define CHACHA_BLOCK_WORDS 16

__device__ __forceinline__ u32 rotate_left(u32 x, int bits) { return (x << bits) | (x >> (32 - bits)); }

// rand_core's `seed_from_u64`: PCG32 outputs, little-endian, fill the 32-byte key, which
// rand_chacha reads as eight little-endian words.
__device__ void expand_seed(u64 seed, u32 key[8]) {
    const u64 MUL = 6364136223846793005ULL;
    const u64 INC = 11634580027462260723ULL;
    u64 state = seed;
    for (int i = 0; i < 8; ++i) {
        state = state * MUL + INC;
        u32 xorshifted = (u32)(((state >> 18) ^ state) >> 27);
        u32 rot = (u32)(state >> 59);
        key[i] = (xorshifted >> rot) | (xorshifted << ((32 - rot) & 31));
    }
}

#define QUARTER_ROUND(a, b, c, d)                                                          \
    a += b; d = rotate_left(d ^ a, 16);                                                    \
    c += d; b = rotate_left(b ^ c, 12);                                                    \
    a += b; d = rotate_left(d ^ a, 8);                                                     \
    c += d; b = rotate_left(b ^ c, 7);

// One ChaCha stream read word by word, like rand_chacha's buffered generator (whose buffer of
// four blocks changes no word's place in the stream).
struct Source {
    u32 key[8];
    u64 stream;
    u64 block;        // the counter of the block in `words`
    bool generated;   // whether `words` holds that block yet
    u32 index;        // the next word's index in `words`
    u32 words[CHACHA_BLOCK_WORDS];
};

// Block `s->block` of the stream into `s->words`: the ChaCha state is the constants, the key,
// the 64-bit block counter (low word first) and the 64-bit stream id (low word first).
__device__ void chacha8_block(Source* s) {
    u32 input[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u,
                     s->key[0], s->key[1], s->key[2], s->key[3],
                     s->key[4], s->key[5], s->key[6], s->key[7],
                     (u32)s->block, (u32)(s->block >> 32), (u32)s->stream, (u32)(s->stream >> 32)};
    u32 x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = input[i];
#pragma unroll
    for (int round = 0; round < CHACHA8_DOUBLE_ROUNDS; ++round) {
        QUARTER_ROUND(x[0], x[4], x[8], x[12]);
        QUARTER_ROUND(x[1], x[5], x[9], x[13]);
        QUARTER_ROUND(x[2], x[6], x[10], x[14]);
        QUARTER_ROUND(x[3], x[7], x[11], x[15]);
        QUARTER_ROUND(x[0], x[5], x[10], x[15]);
        QUARTER_ROUND(x[1], x[6], x[11], x[12]);
        QUARTER_ROUND(x[2], x[7], x[8], x[13]);
        QUARTER_ROUND(x[3], x[4], x[9], x[14]);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) s->words[i] = x[i] + input[i];
    s->generated = true;
}

// A stream positioned nowhere yet: every use starts with a seek.
__device__ void source_init(Source* s, u64 seed, u64 stream) {
    expand_seed(seed, s->key);
    s->stream = stream;
    s->block = 0;
    s->generated = false;
    s->index = 0;
}

// To word `word` of the stream (rand_chacha's `set_word_pos`); the block is made again only if
// it is another than the one in hand.
__device__ void source_seek(Source* s, u64 word) {
    u64 block = word / CHACHA_BLOCK_WORDS;
    if (!s->generated || block != s->block) {
        s->block = block;
        chacha8_block(s);
    }
    s->index = (u32)(word % CHACHA_BLOCK_WORDS);
}

__device__ u64 source_position(const Source* s) { return s->block * CHACHA_BLOCK_WORDS + s->index; }

__device__ u32 next_u32(Source* s) {
    if (s->index == CHACHA_BLOCK_WORDS) {
        s->block += 1;
        chacha8_block(s);
        s->index = 0;
    }
    return s->words[s->index++];
}

// The CPU's `Source` draws, one word each.
__device__ u8 draw_byte(Source* s) { return (u8)(next_u32(s) >> 24); }
__device__ u32 draw_below(Source* s, u32 bound) { return (u32)(((u64)next_u32(s) * bound) >> 32); }
__device__ bool draw_chance(Source* s, u32 numerator, u32 denominator) {
    return draw_below(s, denominator) < numerator;
}
// Scales over 2^-6 .. 2 (`random_moderate_scale`).
__device__ u8 draw_moderate_scale(Source* s) {
    return (u8)(E4M3_MIN_NORMAL_CODE + draw_below(s, E4M3_TWO - E4M3_MIN_NORMAL_CODE + 1));
}
// e4m3(uniform[0, 1)) rounded to nearest even: the number of thresholds at or below the
// uniform's 24 bits (the host found them with the model's own rounding).
__device__ u8 draw_unit_scale(Source* s, const u32* thresholds) {
    u32 unit = next_u32(s) >> 8;
    int low = 0, high = UNIT_SCALE_THRESHOLDS;  // count of thresholds <= unit lies in [low, high]
    while (low < high) {
        int mid = (low + high) / 2;
        if (thresholds[mid] <= unit) low = mid + 1; else high = mid;
    }
    return (u8)low;
}

// Where scale (row, column) of batch `batch` lives in the blocked layout (crates/model/src/layout.rs).
__device__ u64 blocked_offset(u64 row, u64 column, u64 batch, u64 row_atoms, u64 col_atoms) {
    u64 atom = (batch * row_atoms + row / ATOM_ROWS) * col_atoms + column / ATOM_COLS;
    return atom * ATOM_BYTES + (row % 32) * 16 + ((row % ATOM_ROWS) / 32) * 4 + column % ATOM_COLS;
}

// One thread a row: walks the words after the row's K-blocks (the adversarial tail: a maximal
// block, a single kept block, a NaN scale), records what they decide, and checks that the row
// ends where the next begins (as the CPU generator asserts for its tasks).
extern "C" __global__ void nvfp4_oracle_generate_row_tails(
    u64 seed, u64 stream, int distribution, int role, u32 row_bytes, u32 blocks,
    u64 all_rows, const u64* row_starts, u32 plan_words, int* tails, int* mismatch) {
    for (u64 row = blockIdx.x * (u64)blockDim.x + threadIdx.x; row < all_rows;
         row += (u64)gridDim.x * blockDim.x) {
        Source s;
        source_init(&s, seed, stream);
        u64 start = row_starts[row];
        u64 end;
        int max_block = -1, keep_block = -1, nan_block = -1;
        if (distribution == DISTRIBUTION_GPUMODE) {
            end = start + row_bytes + blocks;
        } else if (distribution == DISTRIBUTION_FULL) {
            // A wide row draws a chance before each scale.
            source_seek(&s, start + row_bytes);
            bool wide = draw_chance(&s, 1, 8);
            end = start + row_bytes + 1 + (u64)blocks * (wide ? 2 : 1);
        } else {
            source_seek(&s, start + plan_words);
            if (role == ROLE_A) {
                if (draw_chance(&s, 1, 16)) {
                    max_block = (int)draw_below(&s, blocks);
                    source_seek(&s, source_position(&s) + BLOCK_BYTES);  // its bytes: drawn by its block's thread
                }
                if (draw_chance(&s, 1, 8)) keep_block = (int)draw_below(&s, blocks);
            }
            if (distribution == DISTRIBUTION_ADVERSARIAL_NAN && draw_chance(&s, 1, 16)) {
                nan_block = (int)draw_below(&s, blocks);
            }
            end = source_position(&s);
            tails[row * TAIL_FIELDS + TAIL_MAX_BLOCK] = max_block;
            tails[row * TAIL_FIELDS + TAIL_KEEP_BLOCK] = keep_block;
            tails[row * TAIL_FIELDS + TAIL_NAN_BLOCK] = nan_block;
        }
        if (end != row_starts[row + 1]) atomicExch(mismatch, 1);
    }
}

// One K-block of an adversarial row (`adversarial_block`, the cancelling copy, then the tail's
// changes in the CPU's order: the maximal block, the single kept block, the NaN scale).
__device__ void adversarial_k_block(Source* s, u64 start, u32 j, int role, const u8* modes,
                                    const u32* block_words, u32 plan_words, const int* tail,
                                    u8 bytes[BLOCK_BYTES], u8* scale) {
    int mode = modes[j];
    if (mode == K_BLOCK_CANCEL_SECOND) {
        // The previous (cancel-first) block repeated, negated in B; it draws no words.
        source_seek(s, start + block_words[j - 1]);
        u8 flip = role == ROLE_B ? FP4_SIGNS : 0;
        for (int b = 0; b < BLOCK_BYTES; ++b)
            bytes[b] = ((draw_byte(s) & FP4_SIGNS) | FP4_MAX_MAGNITUDES) ^ flip;
        *scale = E4M3_SIXTEEN;
    } else {
        source_seek(s, start + block_words[j]);
        if (mode == K_BLOCK_CANCEL_FIRST) {
            for (int b = 0; b < BLOCK_BYTES; ++b)
                bytes[b] = (draw_byte(s) & FP4_SIGNS) | FP4_MAX_MAGNITUDES;
            *scale = E4M3_SIXTEEN;
        } else if (mode == K_BLOCK_ZERO && role == ROLE_A) {
            for (int b = 0; b < BLOCK_BYTES; ++b) bytes[b] = 0;
            *scale = draw_moderate_scale(s);
        } else {  // random, or a zero block of B: only A's zero blocks hold zeros
            for (int b = 0; b < BLOCK_BYTES; ++b) bytes[b] = draw_byte(s);
            *scale = draw_moderate_scale(s);
        }
    }
    if (tail[TAIL_MAX_BLOCK] == (int)j) {
        // Its chance and position words come first, then its bytes.
        source_seek(s, start + plan_words + 2);
        for (int b = 0; b < BLOCK_BYTES; ++b)
            bytes[b] = (draw_byte(s) & FP4_SIGNS) | FP4_MAX_MAGNITUDES;
        *scale = E4M3_MAX_CODE;
    }
    if (role == ROLE_A && tail[TAIL_KEEP_BLOCK] >= 0 && tail[TAIL_KEEP_BLOCK] != (int)j) {
        for (int b = 0; b < BLOCK_BYTES; ++b) bytes[b] = 0;
    }
    if (tail[TAIL_NAN_BLOCK] == (int)j) *scale = E4M3_NAN_CODE;
}

// One thread makes `segment_blocks` K-blocks of one row: their data bytes, their plain scales and
// the same scales in the blocked layout (whose padding the host has filled). `rows` is the
// operand's rows per batch; rows are numbered batch-outermost, as in its stream.
extern "C" __global__ void nvfp4_oracle_generate_rows(
    u64 seed, u64 stream, int distribution, int role, u32 rows, u32 batches, u32 blocks,
    u32 segment_blocks, const u64* row_starts, const u32* unit_scale_thresholds,
    const u8* modes, const u32* block_words, u32 plan_words, const int* tails,
    u8* data, u8* plain_scales, u8* blocked_scales) {
    const u32 row_bytes = blocks * BLOCK_BYTES;
    const u64 segments = (blocks + segment_blocks - 1) / segment_blocks;
    const u64 all_rows = (u64)rows * batches;
    const u64 row_atoms = (rows + ATOM_ROWS - 1) / ATOM_ROWS;
    const u64 col_atoms = (blocks + ATOM_COLS - 1) / ATOM_COLS;
    for (u64 item = blockIdx.x * (u64)blockDim.x + threadIdx.x; item < all_rows * segments;
         item += (u64)gridDim.x * blockDim.x) {
        const u64 row = item / segments;
        const u32 first = (u32)(item % segments) * segment_blocks;
        const u32 last = min(first + segment_blocks, blocks);
        const u64 start = row_starts[row];
        const u64 batch = row / rows, row_in_batch = row % rows;
        u8* row_data = data + row * row_bytes;
        Source s;
        source_init(&s, seed, stream);
        if (distribution == DISTRIBUTION_GPUMODE || distribution == DISTRIBUTION_FULL) {
            // The row's data bytes come first in its words, then its scales: the segment's bytes
            // in one run of words, then its scales in another.
            source_seek(&s, start + (u64)first * BLOCK_BYTES);
            const u8 mask = distribution == DISTRIBUTION_GPUMODE ? GPUMODE_FP4_MASK : 0xFF;
            for (u64 at = (u64)first * BLOCK_BYTES; at < (u64)last * BLOCK_BYTES; ++at)
                row_data[at] = draw_byte(&s) & mask;
            // The full distribution: a chance after the bytes says whether the row is wide;
            // a wide row draws a chance of the whole range before each scale.
            bool wide = false;
            if (distribution == DISTRIBUTION_FULL) {
                source_seek(&s, start + row_bytes);
                wide = draw_chance(&s, 1, 8);
                source_seek(&s, start + row_bytes + 1 + (u64)first * (wide ? 2 : 1));
            } else {
                source_seek(&s, start + row_bytes + first);
            }
            for (u32 j = first; j < last; ++j) {
                u8 scale;
                if (distribution == DISTRIBUTION_GPUMODE) {
                    scale = draw_unit_scale(&s, unit_scale_thresholds);
                } else {
                    u32 top = wide && draw_chance(&s, 1, 16) ? E4M3_MAX_CODE : FULL_NARROW_MAX_CODE;
                    scale = (u8)draw_below(&s, top + 1);
                }
                plain_scales[row * blocks + j] = scale;
                blocked_scales[blocked_offset(row_in_batch, j, batch, row_atoms, col_atoms)] = scale;
            }
            continue;
        }
        // The adversarial distributions: each K-block's bytes and scale drawn together.
        for (u32 j = first; j < last; ++j) {
            u8 bytes[BLOCK_BYTES];
            u8 scale;
            adversarial_k_block(&s, start, j, role, modes, block_words, plan_words,
                                tails + row * TAIL_FIELDS, bytes, &scale);
            // One scale row in four carries a sign bit that a kernel must ignore.
            if (distribution == DISTRIBUTION_ADVERSARIAL_NAN && (row_in_batch + seed) % 4 == 0)
                scale |= E4M3_SIGN;
            for (int b = 0; b < BLOCK_BYTES; ++b) row_data[(u64)j * BLOCK_BYTES + b] = bytes[b];
            plain_scales[row * blocks + j] = scale;
            blocked_scales[blocked_offset(row_in_batch, j, batch, row_atoms, col_atoms)] = scale;
        }
    }
}
