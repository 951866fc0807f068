// grouped_direct_kernel: the register-direct form of the routed experts' grouped mat-vec
// (moe_grouped.cuh) for the expert types of the GSQ-RCO packs whose blocks are only 2-byte
// aligned: IQ3_XXS (98 bytes), Q2_0 and IQ4_NL (18 bytes); and Q5_1 (24 bytes), the shared
// expert's down type in the IQ3_XXS packs (moe.h: shared_down_fused).
//
// Why a second kernel: grouped_mmvq_kernel stages weights through shared memory and feeds int8
// tensor cores; on the H200 its IQ3_XXS gate/up launch (10 experts x 1280 x 2560, 12.5 MB) took
// 27 us at about 1.1 bytes of weights per warp instruction (ncu, 2026-11-30), so the routed
// experts, 2.2 of the 7.2 ms of a decode step, were bound by instruction issue. As in
// mmvq_direct.cu, every lane here loads its weights into registers (from global memory, or from
// the CTA's staged copy of its tile), decodes each block once for all the group's entries, and
// multiplies with dp4a against activations the CTA has unpacked once into shared memory.
//
// Loads. In windows of one row the CTA first copies its tile of weight rows into shared memory
// (cp.async, see stage_tile), in wider ones each lane reads its words from global memory. The
// blocks' fields sit at 2-byte aligned offsets. A block of an even index starts
// 4-byte aligned (rows must be 4-byte aligned: an even number of blocks), one of an odd index 2
// bytes past that. So a lane reads the aligned words that cover its fields from the aligned base
// at or just before the block and joins each pair with one funnel shift of 16 (even) or 32 (odd:
// the second word itself), the same code on every lane, so a warp never diverges on alignment.
// Every word read lies inside the tile: past a field it reaches at most 2 bytes into the next
// block of the row (past the last row's end only into a staged tile's slack), before the block
// into the previous one.
//   * IQ3_XXS: a unit is one 32-element chunk (8 grid indices, its sign/scale word, the block's d).
//   * Q2_0, IQ4_NL: a unit is one 18-byte block, read as the 5 words of its half of the 36-byte
//     block pair.
//   * Q5_1: a unit is one 24-byte block (4-byte aligned), read as its 6 words.
//
// Decoding. IQ3_XXS looks its grid words up in shared memory and spreads its sign bits (ksigns
// with the parity bit) to byte masks with a multiply and a prmt. IQ4_NL maps nibbles with
// byte_perm (quant_decode's lut_iq4nl_x8). Q2_0 takes its 2-bit codes c as they are, 4 per byte:
// (w >> 2k) & 0x03030303 holds elements 4j + k of the word's 16 in byte j, so the CTA stores each
// 16-element group of the activations transposed to that order, and the stored value c - 1
// becomes dot(c, a) - sum(a) with the chunk's code sum kept beside its d (exact integers).
//
// Shape of the work
//   * Block row y of the grid takes groups y, y + gridDim.y, ... below *n_groups (as
//     grouped_mmvq_kernel), block column x a tile of tile_rows rows of the group's expert.
//   * A row is owned by G lanes (the largest power of two <= 32 that divides its units), a warp
//     by 32 / G rows at once; a tile is one row set per warp. Each lane walks its units in
//     batches (kLoadBatch from global memory, kStagedLoadBatch from a staged tile) whose loads
//     are all issued before any is used, keeps one sum per entry, and the G lanes reduce them
//     with a fixed xor butterfly.
//   * The down call may take each entry's gate | up floats instead of its q8_1 h (swiglu_gu):
//     the CTA then forms h and its q8_1 codes as swiglu_entries_kernel does, bit for bit, and
//     the CTAs of block column 0 leave both in the scratch, so no launch separates gate/up and
//     down. Measured (ncu, T = 1, Q2_0): the down kernel 7.3 -> 7.5 us, the 2.8 us SwiGLU launch gone.
//   * Per (row, entry): y = sum over chunks of (scale * d_a) * dot: the reference's products
//     summed in another order (docs/PARITY.md bounds the grouped experts by relative error).
#include <cuda_fp16.h>

#include <cstdint>

#include "moe_direct.h"
#include "q8_1.cuh"
#include "strata/cuda/switches.h"

namespace strata::cuda::moe_detail {
namespace {

// Warps per CTA: 5 for one entry per batch (T = 1), 8 for more. A launch's CTAs run in waves
// of equal, latency-bound CTAs, so the count of warp slots per SM decides the waves: the T = 1
// IQ3_XXS gate/up call (10 groups x 1280 rows, 2 rows per warp, 6400 warps) took 2 waves and a
// 9-CTA third as CTAs of 8 warps at 80 registers (3 per SM, 24 warps; ncu: 2.02 waves), and
// takes 1.94 as CTAs of 5 (5 per SM, 25 warps). H200, same lease: decode 5.594 -> 5.565 ms
// (iq3_xxs), 5.431 -> 5.397 (q2_0); gate/up 17.2 -> 16.3 us (ncu). CTAs of 4 at 72 registers
// (7 per SM) measured 0.03 ms slower than 5. With 2 or 4 entries per batch the 5-warp form
// spills (ptxas: 12 and 32 bytes) and the window of 4 took 10.33 -> 10.49 ms, so those keep 8.
// STRATA_DIRECT_WARPS=8 takes 8 everywhere (the other arm).
constexpr int kDirectWarps = 5;
constexpr int kWideWarps = 8;
// Units per lane whose loads are in flight together: 5 covers the released shapes' rows in one
// batch (IQ3_XXS 2560: 80 chunks on 16 lanes; Q2_0 / IQ4_NL 640 and 2560: 5 blocks per lane).
constexpr int kLoadBatch = 5;
// From a staged tile (staged_tile) a unit's words are one shared-memory read away, so a lane
// needs fewer in flight: 2 units at a 72-register bound (5 CTAs of 5 warps per SM). H100,
// against the unstaged kernel in the same run: decode -1.34% (2 units), -0.12% (1 unit at 56
// registers, 7 CTAs per SM: more CTAs did not make up for one unit in flight);
// bench/results/2026-12-06-h100-staged-t1.
constexpr int kStagedLoadBatch = 2;
constexpr int kStagedRegs = 72;
// IQ3_XXS's grid words in shared memory, kGridCopies times: word i of copy q at kGridCopies * i + q,
// lane l reading copy l % kGridCopies. A warp's 8 lookups of a chunk hit random words: with one
// copy its 32 lanes collide on 32 banks, with four only the 8 lanes of a copy can (on its 8 banks).
// ncu on the T = 4 gate/up call with one copy (H200): the L1 / shared pipe 73% busy, 40% of its
// wavefronts bank conflicts (these and the activations' 2-way, see ActTile), the most sampled
// stall short scoreboard; four copies and the two code planes took the window of 4 -1.0%.
// The fill is on every CTA's path: filled one 4-byte store per word and copy, four copies took
// T = 1 +1.1% and eight +1.5% (T = 4 +0.5%); one 16-byte store per word brought four to +0.2%.
constexpr int kGridCopies = 4;
constexpr int kGridBytes = 256 * 4 * kGridCopies;
constexpr int kDirectMaxEntries = 4;  // window rows up to which this kernel is used

// A 4-byte aligned word of a weight row: from the CTA's staged tile in shared memory (kStaged, see
// stage_segment; read as shared explicitly, since through the generic pointer nvcc emitted
// generic loads), or from global memory.
template <bool kStaged>
__device__ __forceinline__ uint32_t ldw(const uint8_t* p) {
  if constexpr (kStaged) {
    uint32_t v;
    asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
    return v;
  } else {
    return __ldg(reinterpret_cast<const unsigned int*>(p));
  }
}

// The CTA's copy of a batch of entries' activations: the codes (in the type's order) in two planes,
// the first 16 of chunk c of row t at codes + 16 (t * nchunks + c) and its last 16 `plane` bytes
// further, so the 8 lanes of a 16-byte load phase read 128 consecutive bytes (one 32-byte chunk
// per lane conflicted 2-way); then per (row, chunk) the pair (d as float bits, sum of the chunk's
// 32 codes).
struct ActTile {
  const int8_t* codes;
  const int2* ds;
  int nchunks, plane;
};

// Where chunk c of tile row t starts in the first plane.
__device__ __forceinline__ size_t chunk_offset(int t, int nchunks, int c) {
  return 16 * (static_cast<size_t>(t) * nchunks + c);
}

// Chunk c's 8 weight words (element order as the tile's codes) against tile row t's codes.
__device__ __forceinline__ int chunk_codes_dot(const int (&w)[8], const ActTile& a, int t, int c) {
  const int8_t* lo = a.codes + chunk_offset(t, a.nchunks, c);
  const int4 x0 = *reinterpret_cast<const int4*>(lo), x1 = *reinterpret_cast<const int4*>(lo + a.plane);
  // Two chains of 4 instead of one of 8 (ncu sampled 21% of the warps waiting on a fixed
  // latency); as an arm against one chain: T = 4 -0.2%, T = 1 unchanged.
  int d0 = __dp4a(w[0], x0.x, 0), d1 = __dp4a(w[4], x1.x, 0);
  d0 = __dp4a(w[1], x0.y, d0);
  d1 = __dp4a(w[5], x1.y, d1);
  d0 = __dp4a(w[2], x0.z, d0);
  d1 = __dp4a(w[6], x1.z, d1);
  d0 = __dp4a(w[3], x0.w, d0);
  d1 = __dp4a(w[7], x1.w, d1);
  return d0 + d1;
}

// Chunk c against entries 0..nb-1: acc[t] += (scale * d_a) * (dot - [kOffset] sum_a).
template <bool kOffset, int kNB>
__device__ __forceinline__ void chunk_dot(const int (&w)[8], int c, float scale, const ActTile& a, int nb, float (&acc)[kNB]) {
#pragma unroll
  for (int t = 0; t < kNB; ++t) {
    if (t >= nb) break;  // warp-uniform
    int dot = chunk_codes_dot(w, a, t, c);
    const int2 ds = a.ds[static_cast<size_t>(t) * a.nchunks + c];
    if constexpr (kOffset) dot -= ds.y;
    acc[t] = fmaf(__fmul_rn(scale, __int_as_float(ds.x)), static_cast<float>(dot), acc[t]);
  }
}

// Bits 0..3 of b -> 0xFF or 0x00 in bytes 0..3, in two instructions: the multiply moves bit k to
// bit 8k + 7 (the partial products land on distinct bits, so nothing carries), and prmt's
// sign-replicate selectors (nibble 8 + k: byte k's top bit) spread each to its byte. Inline PTX,
// since __byte_perm's documented selectors are 3 bits.
__device__ __forceinline__ uint32_t sign_mask4(uint32_t b) {
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, 0xBA98;" : "=r"(r) : "r"(b * 0x10204080u));
  return r;
}

template <Type T>
struct DirectUnit;

// Each type's kRegs: the registers per thread its launch bounds allow (as CTAs per SM for the CTA
// size, see min_blocks).
// IQ3_XXS: d (f16), qs[64] (grid indices, 8 per chunk), 8 words of 4 x 7 sign bits + a 4-bit scale.
// A block starts 4-byte aligned when its index is even and 2 bytes past that when odd, so every
// field is read from the aligned words at base = blk - 2 (b & 1) and joined with the shift 16
// (even) or 32 (odd: the second word itself).
template <>
struct DirectUnit<Type::IQ3_XXS> {
  // 80 registers: at 64 the kernel spilled 32 bytes a thread; bounded to 80, the T = 1 gate/up
  // call went 17.0 -> 16.4 us on the H200 (ncu). IQ4_NL, which spills a little at 64 too, measured
  // slower at 80 (10.8 -> 12.4 us) and stays. A grid copy per lane (32 KB, no bank conflicts)
  // measured slower still (19-20 us): its fill and size cost more than the conflicts.
  static constexpr int kBlockElems = 256, kUnitsPerBlock = 8, kRegs = 80;
  static constexpr bool kPermuted = false, kGrid = true;
  struct Raw {
    uint32_t q0, q1, q2, s0, s1, dw, sh;
  };
  template <bool kStaged>
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) {
    const int b = u >> 3, j = u & 7;
    const uint8_t* base = row + static_cast<int64_t>(b) * 98 - 2 * (b & 1);
    const uint8_t* q = base + 8 * j;       // covers the chunk's 8 index bytes at blk + 2 + 8j
    const uint8_t* s = base + 64 + 4 * j;  // covers its sign/scale word at blk + 66 + 4j
    Raw r;
    r.q0 = ldw<kStaged>(q);
    r.q1 = ldw<kStaged>(q + 4);
    r.q2 = ldw<kStaged>(q + 8);
    r.s0 = ldw<kStaged>(s);
    r.s1 = ldw<kStaged>(s + 4);
    r.dw = ldw<kStaged>(base);  // d: its low half (even) or high half (odd)
    r.sh = 16u + 16u * static_cast<uint32_t>(b & 1);
    return r;
  }
  template <int kNB>
  static __device__ __forceinline__ void dot(const Raw& r, int u, const uint32_t* grid, const ActTile& a, int nb,
                                             float (&acc)[kNB]) {
    const uint32_t lo = __funnelshift_rc(r.q0, r.q1, r.sh), hi = __funnelshift_rc(r.q1, r.q2, r.sh);
    const uint32_t ss = __funnelshift_rc(r.s0, r.s1, r.sh);
    int w[8];
    w[0] = static_cast<int>(grid[kGridCopies * (lo & 0xFFu)]);
    w[1] = static_cast<int>(grid[kGridCopies * ((lo >> 8) & 0xFFu)]);
    w[2] = static_cast<int>(grid[kGridCopies * ((lo >> 16) & 0xFFu)]);
    w[3] = static_cast<int>(grid[kGridCopies * (lo >> 24)]);
    w[4] = static_cast<int>(grid[kGridCopies * (hi & 0xFFu)]);
    w[5] = static_cast<int>(grid[kGridCopies * ((hi >> 8) & 0xFFu)]);
    w[6] = static_cast<int>(grid[kGridCopies * ((hi >> 16) & 0xFFu)]);
    w[7] = static_cast<int>(grid[kGridCopies * (hi >> 24)]);
    // Signs computed rather than looked up: a 1 KB mask table in shared memory measured slower
    // (its lookups conflict 4-way on average, on top of the grid's).
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const uint32_t s8 = qd::ksigns((ss >> (7 * g)) & 127u);
      w[2 * g] = static_cast<int>(qd::negate_bytes(static_cast<uint32_t>(w[2 * g]), sign_mask4(s8 & 15u)));
      w[2 * g + 1] = static_cast<int>(qd::negate_bytes(static_cast<uint32_t>(w[2 * g + 1]), sign_mask4(s8 >> 4)));
    }
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>((r.dw >> (r.sh - 16u)) & 0xFFFFu)));
    const float scale = __fmul_rn(__fmul_rn(d, __fadd_rn(0.5f, static_cast<float>(ss >> 28))), 0.5f);
    chunk_dot<false>(w, u, scale, a, nb, acc);  // unit u is chunk u of the row
  }
};

// The 18-byte blocks (f16 d + 16 data bytes) as the 5 words of their half of a block pair:
// d and the data words, element order as stored.
struct Block18 {
  uint32_t v[5];
  uint32_t odd;  // 1 for the pair's second block
  template <bool kStaged>
  static __device__ __forceinline__ Block18 load(const uint8_t* row, int b) {
    Block18 r;
    r.odd = static_cast<uint32_t>(b & 1);
    const uint8_t* p = row + static_cast<int64_t>(b >> 1) * 36 + 16 * (b & 1);
#pragma unroll
    for (int k = 0; k < 5; ++k) r.v[k] = ldw<kStaged>(p + 4 * k);
    return r;
  }
  __device__ __forceinline__ float d() const {
    return __half2float(__ushort_as_half(static_cast<unsigned short>((v[0] >> (16 * odd)) & 0xFFFFu)));
  }
  __device__ __forceinline__ uint32_t data(int k) const { return __funnelshift_rc(v[k], v[k + 1], 16 + 16 * odd); }
};

// Q2_0: 64 elements, codes c (value c - 1) 4 per byte from the low bits up; a unit is one block,
// two chunks.
template <>
struct DirectUnit<Type::Q2_0> {
  static constexpr int kBlockElems = 64, kUnitsPerBlock = 1, kRegs = 96;  // ptxas: 83-92
  static constexpr bool kPermuted = true, kGrid = false;
  using Raw = Block18;
  template <bool kStaged>
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) { return Block18::load<kStaged>(row, u); }
  template <int kNB>
  static __device__ __forceinline__ void dot(const Raw& r, int u, const uint32_t*, const ActTile& a, int nb, float (&acc)[kNB]) {
    const float d = r.d();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t x0 = r.data(2 * h), x1 = r.data(2 * h + 1);
      int w[8];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        w[k] = static_cast<int>((x0 >> (2 * k)) & 0x03030303u);
        w[4 + k] = static_cast<int>((x1 >> (2 * k)) & 0x03030303u);
      }
      chunk_dot<true>(w, 2 * u + h, d, a, nb, acc);
    }
  }
};

// IQ4_NL: 32 elements, byte j holds element j (low nibble) and j + 16 (high); one chunk per unit.
template <>
struct DirectUnit<Type::IQ4_NL> {
  static constexpr int kBlockElems = 32, kUnitsPerBlock = 1, kRegs = 64;
  static constexpr bool kPermuted = false, kGrid = false;
  using Raw = Block18;
  template <bool kStaged>
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) { return Block18::load<kStaged>(row, u); }
  template <int kNB>
  static __device__ __forceinline__ void dot(const Raw& r, int u, const uint32_t*, const ActTile& a, int nb, float (&acc)[kNB]) {
    const uint32_t x0 = r.data(0), x1 = r.data(1), x2 = r.data(2), x3 = r.data(3);
    const qd::Group g0 = qd::lut_iq4nl_x8(x0, x1, 0), g1 = qd::lut_iq4nl_x8(x2, x3, 0);
    const qd::Group g2 = qd::lut_iq4nl_x8(x0, x1, 4), g3 = qd::lut_iq4nl_x8(x2, x3, 4);
    const int w[8] = {static_cast<int>(g0.lo), static_cast<int>(g0.hi), static_cast<int>(g1.lo), static_cast<int>(g1.hi),
                      static_cast<int>(g2.lo), static_cast<int>(g2.hi), static_cast<int>(g3.lo), static_cast<int>(g3.hi)};
    chunk_dot<false>(w, u, r.d(), a, nb, acc);
  }
};

// Q5_1: 32 elements, d and m (f16), qh (bit j: element j's fifth bit), qs (byte j: element j in
// the low nibble, j + 16 in the high); y = d * q + m, so per entry the dot is
// (d * d_a) * dot(q, a) + (m * d_a) * sum(a). One chunk per unit.
template <>
struct DirectUnit<Type::Q5_1> {
  static constexpr int kBlockElems = 32, kUnitsPerBlock = 1, kRegs = 80;  // at 64 the 4-entry form spilled 44 bytes
  static constexpr bool kPermuted = false, kGrid = false;
  struct Raw {
    uint32_t dm, qh, qs[4];
  };
  template <bool kStaged>
  static __device__ __forceinline__ Raw load(const uint8_t* row, int u) {
    const uint8_t* blk = row + static_cast<int64_t>(u) * 24;
    Raw r;
    r.dm = ldw<kStaged>(blk);
    r.qh = ldw<kStaged>(blk + 4);
#pragma unroll
    for (int k = 0; k < 4; ++k) r.qs[k] = ldw<kStaged>(blk + 8 + 4 * k);
    return r;
  }
  // Bits 0..3 of b as bit 4 of bytes 0..3 (the multiply as in sign_mask4).
  static __device__ __forceinline__ uint32_t fifth_bits(uint32_t b) { return ((b * 0x10204080u) & 0x80808080u) >> 3; }
  template <int kNB>
  static __device__ __forceinline__ void dot(const Raw& r, int u, const uint32_t*, const ActTile& a, int nb, float (&acc)[kNB]) {
    int w[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      w[k] = static_cast<int>((r.qs[k] & 0x0F0F0F0Fu) | fifth_bits((r.qh >> (4 * k)) & 15u));
      w[4 + k] = static_cast<int>(((r.qs[k] >> 4) & 0x0F0F0F0Fu) | fifth_bits((r.qh >> (16 + 4 * k)) & 15u));
    }
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(r.dm & 0xFFFFu)));
    const float m = __half2float(__ushort_as_half(static_cast<unsigned short>(r.dm >> 16)));
#pragma unroll
    for (int t = 0; t < kNB; ++t) {
      if (t >= nb) break;  // warp-uniform
      const int dot = chunk_codes_dot(w, a, t, u);
      const int2 ds = a.ds[static_cast<size_t>(t) * a.nchunks + u];
      const float da = __int_as_float(ds.x);
      acc[t] = fmaf(__fmul_rn(d, da), static_cast<float>(dot), fmaf(__fmul_rn(m, da), static_cast<float>(ds.y), acc[t]));
    }
  }
};

// The 4 x 4 byte transpose of a 16-element group (words a0..a3 = elements 0-3, ..., 12-15):
// word k of the result holds elements k, 4 + k, 8 + k, 12 + k (Q2_0's order, see above).
__device__ __forceinline__ uint4 transpose_group(uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
  const uint32_t l01 = __byte_perm(a0, a1, 0x5140u), h01 = __byte_perm(a0, a1, 0x7362u);
  const uint32_t l23 = __byte_perm(a2, a3, 0x5140u), h23 = __byte_perm(a2, a3, 0x7362u);
  return make_uint4(__byte_perm(l01, l23, 0x5410u), __byte_perm(l01, l23, 0x7632u), __byte_perm(h01, h23, 0x5410u),
                    __byte_perm(h01, h23, 0x7632u));
}

// Entries b0 .. b0 + nb - 1's q8_1 rows (gathered through act_row) into the CTA's tile.
template <bool kPermuted>
__device__ void unpack_entries(const GroupedArgs& a, int b0, int nb, uint8_t* codes_base, int plane, int2* ds_base) {
  for (int i = threadIdx.x; i < nb * a.nchunks; i += blockDim.x) {
    const int t = i / a.nchunks, c = i % a.nchunks;
    const int64_t row = a.act_row != nullptr ? a.act_row[b0 + t] : b0 + t;
    const uint32_t* src = reinterpret_cast<const uint32_t*>(a.act + row * a.act_stride + static_cast<int64_t>(c) * kActBlockBytes);
    uint32_t w[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) w[k] = src[k];
    uint8_t* lo = codes_base + chunk_offset(t, a.nchunks, c);
    if constexpr (kPermuted) {
      *reinterpret_cast<uint4*>(lo) = transpose_group(w[1], w[2], w[3], w[4]);
      *reinterpret_cast<uint4*>(lo + plane) = transpose_group(w[5], w[6], w[7], w[8]);
    } else {
      *reinterpret_cast<uint4*>(lo) = make_uint4(w[1], w[2], w[3], w[4]);
      *reinterpret_cast<uint4*>(lo + plane) = make_uint4(w[5], w[6], w[7], w[8]);
    }
    int sum = 0;
#pragma unroll
    for (int k = 1; k < 9; ++k) sum = __dp4a(static_cast<int>(w[k]), 0x01010101, sum);
    const float d = __half2float(__ushort_as_half(static_cast<unsigned short>(w[0] & 0xFFFFu)));
    ds_base[static_cast<size_t>(t) * a.nchunks + c] = make_int2(__float_as_int(d), sum);
  }
}

// The 16-element groups of the tile's first nb rows (both planes), transposed in place to Q2_0's order.
__device__ void transpose_tile(uint8_t* codes, int nb, int nchunks, int plane) {
  const int per_plane = nb * nchunks;
  for (int i = threadIdx.x; i < 2 * per_plane; i += blockDim.x) {
    uint4* g = reinterpret_cast<uint4*>(codes + (i < per_plane ? 0 : plane)) + i % per_plane;
    const uint4 v = *g;
    *g = transpose_group(v.x, v.y, v.z, v.w);
  }
}

// Entries b0 .. b0 + nb - 1's h = silu(gate) * up from a.swiglu_gu and its q8_1 codes into the
// tile, as swiglu_entries_kernel forms them (one 8-lane group per 32-element block, so the codes
// and d are that kernel's to the bit); with write_out, h and its q8_1 rows to global memory too.
template <bool kPermuted, int kWarps>
__device__ void swiglu_entries_tile(const GroupedArgs& a, int b0, int nb, uint8_t* codes, int plane, int2* ds,
                                    bool write_out) {
  const int n = a.nchunks * 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, part = lane & 7;
  const int total = nb * a.nchunks;
  for (int base = 4 * warp; base < total; base += 4 * kWarps) {  // warp-uniform
    const int blk = base + (lane >> 3);
    const bool live = blk < total;
    const int t = live ? blk / a.nchunks : 0, c = live ? blk % a.nchunks : 0;
    const int64_t i = b0 + t;
    float4 hv = make_float4(0.f, 0.f, 0.f, 0.f);
    if (live) {
      const float* row = a.swiglu_gu + i * 2 * n + 32 * c + 4 * part;
      hv = swiglu4(*reinterpret_cast<const float4*>(row), *reinterpret_cast<const float4*>(row + n));
    }
    const Q8Quad q = q8_1_quad(hv);
    if (!live) continue;
    *reinterpret_cast<uint32_t*>(codes + chunk_offset(t, a.nchunks, c) + (part >= 4 ? plane : 0) + 4 * (part & 3)) = q.packed;
    // The consumer of a q8_1 row reads d as stored: rounded to f16.
    if (part == 0) ds[static_cast<size_t>(t) * a.nchunks + c] = make_int2(__float_as_int(__half2float(__float2half_rn(q.d))), q.sum);
    if (write_out) {
      *reinterpret_cast<float4*>(a.h_out + i * n + 32 * c + 4 * part) = hv;
      store_q8_1_quad(q, a.h_q8_out + i * a.h_q8_stride, c, part);
    }
  }
  if constexpr (kPermuted) {
    __syncthreads();
    transpose_tile(codes, nb, a.nchunks, plane);
  }
}

// The down call's tail (CombineTail): this CTA's stores to out are made visible and counted in
// its tile's word; the last of the tile's gridDim.y CTAs resets the word and forms the routed sum
// of the tile's columns [col0, col1) for every window row, reading out through L2. One thread
// fences, after the barrier that orders the CTA's stores before it (the barrier makes them its
// predecessors, the fence cumulative over them; cooperative groups' grid sync does the same),
// where a fence on every thread cost every warp a MEMBAR.SC.
__device__ void combine_tile_if_last(const CombineTail& c, int col0, int col1) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(c.tile_count + blockIdx.x, 1u) == gridDim.y - 1;
    if (last) {
      c.tile_count[blockIdx.x] = 0;  // for the next launch: no other CTA of this one counts here again
      __threadfence();               // the other CTAs' stores, seen through their count, before ours reads
    }
  }
  __syncthreads();
  if (!last) return;
  const int n = col1 - col0;
  for (int i = threadIdx.x; i < c.T * n; i += blockDim.x) routed_sum_column(c.sum, i / n, col0 + i % n);
}

// The CTA's tile of weight rows is copied into shared memory by cp.async as soon as its expert is
// known, so the copy is in flight while the CTA unpacks the entries' activations (and, where the
// grouping is settled, while the previous kernel drains), and the dots read their words from
// shared memory. Loaded into registers after the unpack instead, the weights' trip from memory
// came after the activations' own round trip and the barrier behind it, once per wave.
//
// A tile's rows within one tensor are contiguous (one expert, consecutive rows); a tile that
// crosses `split` (gate | up as two tensors) is two segments. Each segment is staged from the
// 16-byte boundary at or before its first row, so it keeps its address's offset modulo 16 (the
// aligned-word reads of the units depend on it modulo 4), the last chunk zero-filled past the
// segment's end; the words the units read past a row's end (at most 2 bytes) fall in that chunk
// or in the slack after it.
constexpr int kStageSlack = 32;  // per segment: the lead before the first row and the tail's words

// Rows [r0, r0 + rows) of one tensor, starting at src, into dst + at (dst + at 16-byte aligned);
// returns the offset from dst at which row r0 landed. Every thread issues its share.
__device__ __forceinline__ int stage_segment(const uint8_t* src, int rows, int64_t row_bytes, uint8_t* dst, int at) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(src), first = p & ~uintptr_t{15};
  const int lead = static_cast<int>(p - first);
  const int bytes = lead + rows * static_cast<int>(row_bytes);
  const uint8_t* from = reinterpret_cast<const uint8_t*>(first);
  for (int off = 16 * static_cast<int>(threadIdx.x); off < bytes; off += 16 * static_cast<int>(blockDim.x))
    cp_async16(dst + at + off, from + off, bytes - off < 16 ? bytes - off : 16);  // pdl-pre-wait: weights only
  return at + lead;
}

// Expert e's tile rows [r0, r1) into dst and one cp.async group; returns the offset from dst of
// row `mine` (this thread's row).
__device__ __forceinline__ int stage_tile(const GroupedArgs& a, int e, int r0, int r1, int mine, uint8_t* dst) {
  const int mid = r1 < a.split ? r1 : (r0 > a.split ? r0 : a.split);  // first row of the second segment
  const int rb = static_cast<int>(a.row_bytes);
  int seg0 = 0, seg1 = 0;
  if (mid > r0) seg0 = stage_segment(weight_row(a, e, r0), mid - r0, a.row_bytes, dst, 0);
  if (r1 > mid) seg1 = stage_segment(weight_row(a, e, mid), r1 - mid, a.row_bytes, dst,
                                     mid > r0 ? ((mid - r0) * rb + kStageSlack + 15) & ~15 : 0);
  cp_async_commit();
  return mine < mid ? seg0 + (mine - r0) * rb : seg1 + (mine - mid) * rb;
}

// Where the staged tile starts in the CTA's shared memory: after the IQ3_XXS grid copies and the
// activation tile (codes, then (d, sum) pairs), 16-byte aligned.
__host__ __device__ constexpr size_t act_end(bool grid, int nchunks, int nbatch) {
  return ((grid ? kGridBytes : 0) + static_cast<size_t>(nbatch) * nchunks * (32 + 8) + 15) & ~size_t{15};
}

// Bytes of the tile region in shared memory: two segments of at most tile_rows rows together.
__host__ __device__ constexpr int64_t stage_bytes(int tile_rows, int64_t row_bytes) {
  return tile_rows * row_bytes + 3 * kStageSlack;
}

// Whether the CTA stages its weight tile in shared memory (above stage_tile): in windows of one
// row. With more rows the shared-memory pipe is the busy one (the activation reads, once per
// entry and weight word, ncu: 73% busy at T = 4), and the staged tile's reads on top of it took
// the window of 4 +1.15% (H100, bench/results/2026-12-06-h100-staged-tiles), so those read their
// weights straight into registers.
__host__ __device__ constexpr bool staged_tile(int entries) { return entries == 1; }
// Whether a launch stages: staged_tile, unless STRATA_DIRECT_STAGE=0 (the other arm).
bool stages(int entries) { return staged_tile(entries) && switches().direct_stage; }

// CTAs per SM that keep a kWarps-warp CTA within the registers a thread may have: the type's kRegs,
// or kStagedRegs where the tile is staged.
template <Type T, int kWarps, bool kStaged>
constexpr int min_blocks() {
  return 65536 / ((kStaged ? kStagedRegs : DirectUnit<T>::kRegs) * 32 * kWarps);
}

// Expert e's rows [r0, r1) toward L2 (the unstaged path's request before pdl_wait()), unless they
// cross split.
__device__ void prefetch_tile(const GroupedArgs& a, int e, int r0, int r1) {
  if (r0 >= r1 || (r0 < a.split) != (r1 - 1 < a.split)) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(weight_row(a, e, r0)), first = p & ~uintptr_t{127};
  prefetch_l2(reinterpret_cast<const void*>(first), static_cast<int64_t>(p - first) + (r1 - r0) * a.row_bytes);
}

// kStaged: the weight tile staged in shared memory (staged_tile, unless STRATA_DIRECT_STAGE=0).
template <Type T, int kNB, int kWarps, bool kStaged>
__global__ void __launch_bounds__(kWarps * 32, min_blocks<T, kWarps, kStaged>())
    grouped_direct_kernel(const GroupedArgs a, const int G, const int tile_rows, const CombineTail tail) {
  using U = DirectUnit<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  grouped_launch_start(a);
  const int tile_r0 = static_cast<int>(blockIdx.x) * tile_rows;
  const int tile_end = tile_r0 + tile_rows < a.rows ? tile_r0 + tile_rows : a.rows;
  const int K = a.nchunks * 32;
  uint8_t* codes = smem + (U::kGrid ? kGridBytes : 0);
  int2* ds = reinterpret_cast<int2*>(codes + static_cast<size_t>(kNB) * K);
  uint8_t* stage = smem + act_end(U::kGrid, a.nchunks, kNB);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gl = lane % G, rows_per_warp = 32 / G;
  // A tile is kWarps row sets (tile_rows_for): warp w owns set w, if the tile has it.
  const int row = tile_r0 + warp * rows_per_warp + lane / G;
  const bool has_set = tile_r0 + warp * rows_per_warp < tile_end;  // warp-uniform
  const bool live = row < tile_end;
  const int mine = live ? row : tile_r0;
  // With the grouping settled (GroupedArgs::groups_settled) the first group's tile is requested
  // (staged, or toward L2) while the previous kernel drains; the grouping is read through L2
  // (ld.global.cg), as its writer completed before this launch started, not before the kernel
  // before it did.
  // The first group's expert (and, in the forms of one entry a batch, its entry range) are read
  // beside the group count: block row y < gridDim.y lies inside the grouping's arrays (the host
  // sizes the grid by them: group_start has gridDim.y + 1 entries or more), and the values are
  // used only when y < n_groups. Settled, they come before the wait, and after it the CTA goes
  // straight to its entries' activations. The wider forms read the range in the group loop: the
  // two more values live across their wait spilled 12 bytes more and measured slower at T = 4
  // (bench/results/2026-12-07-moe-grouping-loads-arm).
  constexpr bool kRangeAhead = kNB == 1;
  const int y = static_cast<int>(blockIdx.y);
  int n_groups = 0, e_first = 0, first0 = 0, last0 = 0;
  int wofs = -1;  // this thread's row in the staged tile, once requested
  if (a.groups_settled) {
    n_groups = __ldcg(a.n_groups);                // pdl-pre-wait: settled grouping
    e_first = __ldcg(a.group_expert + y);         // pdl-pre-wait: settled grouping
    if constexpr (kRangeAhead) {
      first0 = __ldcg(a.group_start + y);         // pdl-pre-wait: settled grouping
      last0 = __ldcg(a.group_start + y + 1);      // pdl-pre-wait: settled grouping
    }
    if (y < n_groups) {
      if constexpr (kStaged) {
        wofs = stage_tile(a, e_first, tile_r0, tile_end, mine, stage);
      } else {
        prefetch_tile(a, e_first, tile_r0, tile_end);
      }
    }
  }
  uint32_t* grid = reinterpret_cast<uint32_t*>(smem);
  if constexpr (U::kGrid) {  // constant data, so copied before pdl_wait()
    static_assert(kGridCopies == 4, "a word's copies are stored as one uint4");
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      const uint32_t v = qd::d_iq3xxs_grid.v[i];  // pdl-pre-wait: constant table
      reinterpret_cast<uint4*>(grid)[i] = make_uint4(v, v, v, v);
    }
  }
  grouped_launch_wait(a);
  if (!a.groups_settled) {
    n_groups = *a.n_groups;
    e_first = a.group_expert[y];
    if constexpr (kRangeAhead) {
      first0 = a.group_start[y];
      last0 = a.group_start[y + 1];
    }
  }
  if (y >= n_groups) {  // CTA-uniform
    if constexpr (kStaged) cp_async_wait<0>();  // no copy left in flight into an exiting CTA's shared memory
    if (tail.tile_count != nullptr) combine_tile_if_last(tail, tile_r0, tile_end);
    return;
  }

  const int plane = kNB * K / 2;
  const ActTile tile{reinterpret_cast<const int8_t*>(codes), ds, a.nchunks, plane};
  const uint32_t* lane_grid = grid + lane % kGridCopies;  // this lane's copy (stride kGridCopies)
  const int units = K / U::kBlockElems * U::kUnitsPerBlock;
  const int iters = units / G;  // per lane and row, warp-uniform

  for (int grp = blockIdx.y; grp < n_groups; grp += gridDim.y) {
    const int e = grp == y ? e_first : a.group_expert[grp];
    if constexpr (kStaged) {
      if (grp != y) {
        __syncthreads();  // every warp is done with the previous group's tile
        wofs = stage_tile(a, e, tile_r0, tile_end, mine, stage);
      } else if (wofs < 0) {
        wofs = stage_tile(a, e, tile_r0, tile_end, mine, stage);
      }
    }
    const uint8_t* wrow = kStaged ? stage + wofs : weight_row(a, e, mine);
    const bool ahead = kRangeAhead && grp == y;
    const int first = ahead ? first0 : a.group_start[grp], last = ahead ? last0 : a.group_start[grp + 1];
    for (int b0 = first; b0 < last; b0 += kNB) {
      const int nb = last - b0 < kNB ? last - b0 : kNB;
      __syncthreads();  // the previous batch's activations are no longer read (and the grid is in)
      if (a.swiglu_gu != nullptr) {
        swiglu_entries_tile<U::kPermuted, kWarps>(a, b0, nb, codes, plane, ds, blockIdx.x == 0);
      } else {
        unpack_entries<U::kPermuted>(a, b0, nb, codes, plane, ds);
      }
      if constexpr (kStaged) cp_async_wait<0>();  // this thread's copies (none left after a group's first batch)
      __syncthreads();  // the activations (and every thread's copies) visible
      if (!has_set) continue;
      float acc[kNB];
#pragma unroll
      for (int t = 0; t < kNB; ++t) acc[t] = 0.0f;
      constexpr int kBatch = kStaged ? kStagedLoadBatch : kLoadBatch;
      for (int i0 = 0; i0 < iters; i0 += kBatch) {
        typename U::Raw raw[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k)
          if (i0 + k < iters) raw[k] = U::template load<kStaged>(wrow, gl + G * (i0 + k));
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          if (i0 + k >= iters) break;
          U::template dot<kNB>(raw[k], gl + G * (i0 + k), lane_grid, tile, nb, acc);
        }
      }
#pragma unroll
      for (int t = 0; t < kNB; ++t)
        for (int o = G >> 1; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
      if (live && gl == 0) {
#pragma unroll
        for (int t = 0; t < kNB; ++t)
          if (t < nb) a.out[static_cast<int64_t>(b0 + t) * a.out_stride + row] = acc[t];
      }
    }
  }
  if (tail.tile_count != nullptr) combine_tile_if_last(tail, tile_r0, tile_end);
}

template <Type T>
constexpr int units_per_row(int nchunks) {
  return nchunks * 32 / DirectUnit<T>::kBlockElems * DirectUnit<T>::kUnitsPerBlock;
}

int lanes_per_row(int units) {
  for (int g = 32; g > 1; g >>= 1)
    if (units % g == 0) return g;
  return 1;
}

// Entries per batch: the power of two >= a.batch (min(8, T)), so a group of a distinct-expert
// window is one batch.
int entries_per_batch(int batch) { return batch <= 1 ? 1 : batch <= 2 ? 2 : 4; }

// The CTA's warps for a batch of this many entries.
// STRATA_DIRECT_WARPS=8: CTAs of 8 warps at T = 1 too (the other arm of a benchmark).
int warps_for(int entries) { return entries == 1 && !switches().direct_wide_t1 ? kDirectWarps : kWideWarps; }

// One pass per CTA (each warp one row set): measured on the H200 against tiles of several passes
// sized to one wave, it was as fast at T = 1 and 10-20% faster at T = 2 and 4, where the groups'
// sizes differ and small CTAs balance better.
template <Type T>
int tile_rows_for(int nchunks, int warps) {
  return warps * (32 / lanes_per_row(units_per_row<T>(nchunks)));
}

// Rows per tile of a type at this row width and CTA size (0: a type this kernel does not serve).
int tile_rows_of(Type t, int nchunks, int warps) {
  switch (t) {
    case Type::IQ3_XXS: return tile_rows_for<Type::IQ3_XXS>(nchunks, warps);
    case Type::Q2_0: return tile_rows_for<Type::Q2_0>(nchunks, warps);
    case Type::IQ4_NL: return tile_rows_for<Type::IQ4_NL>(nchunks, warps);
    case Type::Q5_1: return tile_rows_for<Type::Q5_1>(nchunks, warps);
    default: return 0;
  }
}

// The grid copies, the activation tile and, when `staged`, the weight tile of tile_rows rows.
size_t smem_bytes(Type t, const GroupedArgs& a, int nbatch, bool staged, int tile_rows) {
  return act_end(t == Type::IQ3_XXS, a.nchunks, nbatch) +
         (staged ? static_cast<size_t>(stage_bytes(tile_rows, a.row_bytes)) : 0);
}

// smem_bytes of the launch launch_grouped_direct makes for a batch of nbatch entries.
size_t smem_for(Type t, const GroupedArgs& a, int nbatch) {
  return smem_bytes(t, a, nbatch, stages(nbatch), tile_rows_of(t, a.nchunks, warps_for(nbatch)));
}

template <Type T, int kNB, int kWarps, bool kStaged>
Status launch_typed(const GroupedArgs& a, int group_rows, cudaStream_t stream, const CombineTail& tail) {
  const auto kernel = &grouped_direct_kernel<T, kNB, kWarps, kStaged>;
  const int G = lanes_per_row(units_per_row<T>(a.nchunks));
  const int tile_rows = tile_rows_for<T>(a.nchunks, kWarps);
  const size_t smem = smem_bytes(T, a, kNB, kStaged, tile_rows);  // <= 48 KB: grouped_direct_supports
  const dim3 grid(static_cast<unsigned>((a.rows + tile_rows - 1) / tile_rows), static_cast<unsigned>(group_rows));
  STRATA_CUDA_TRY(launch_kernel(kernel, grid, dim3(kWarps * 32), smem, stream, a, G, tile_rows, tail));
  return Status::ok_status();
}

template <Type T, int kNB, int kWarps>
Status launch_staging(const GroupedArgs& a, int group_rows, cudaStream_t stream, const CombineTail& tail) {
  if constexpr (staged_tile(kNB)) {
    if (stages(kNB)) return launch_typed<T, kNB, kWarps, true>(a, group_rows, stream, tail);
  }
  return launch_typed<T, kNB, kWarps, false>(a, group_rows, stream, tail);
}

template <Type T, int kNB>
Status launch_warps(const GroupedArgs& a, int group_rows, cudaStream_t stream, const CombineTail& tail) {
  if constexpr (kNB == 1) {
    if (warps_for(kNB) == kDirectWarps) return launch_staging<T, kNB, kDirectWarps>(a, group_rows, stream, tail);
  }
  return launch_staging<T, kNB, kWideWarps>(a, group_rows, stream, tail);
}

template <Type T>
Status launch_batch(const GroupedArgs& a, int group_rows, cudaStream_t stream, const CombineTail& tail) {
  switch (entries_per_batch(a.batch)) {
    case 1: return launch_warps<T, 1>(a, group_rows, stream, tail);
    case 2: return launch_warps<T, 2>(a, group_rows, stream, tail);
    default: return launch_warps<T, 4>(a, group_rows, stream, tail);
  }
}

}  // namespace

bool grouped_direct_supports(Type t, const GroupedArgs& a) {
  if (!switches().grouped_direct) return false;  // STRATA_GROUPED_DIRECT=0: grouped_mmvq_kernel for every type
  int elems = 0;
  switch (t) {
    case Type::IQ3_XXS: elems = 256; break;
    case Type::Q2_0: elems = 64; break;
    case Type::IQ4_NL: elems = 32; break;
    case Type::Q5_1: elems = 32; break;
    default: return false;
  }
  // Each entry costs this kernel its dp4a and shared loads again, while grouped_mmvq_kernel's
  // tensor cores take up to 8 entries at the cost of one: on the H200 (native_expert_grouped at
  // the released geometry, IQ3_XXS gate/up, Q2_0 down, parity --bench) this one took
  // 0.039 / 0.050 / 0.082 / 0.112 ms at T = 1 / 2 / 4 / 8, that one 0.050 / 0.063 / 0.083 / 0.087.
  if (a.batch > kDirectMaxEntries) return false;
  const int nbatch = entries_per_batch(a.batch);
  const uintptr_t align = stages(nbatch) ? 16 : 4;
  const auto aligned = [align](const void* p) { return reinterpret_cast<uintptr_t>(p) % align == 0; };
  // Whole blocks, rows 4-byte aligned (see the header), tensors 16-byte aligned where the tile is
  // staged (from the 16-byte boundary at or before it), and shared memory within 48 KB.
  return (a.nchunks * 32) % elems == 0 && a.row_bytes % 4 == 0 && aligned(a.w0) && aligned(a.w1) &&
         smem_for(t, a, nbatch) <= 48 * 1024;
}

int grouped_direct_tiles(Type t, const GroupedArgs& a) {
  const int tile_rows = tile_rows_of(t, a.nchunks, warps_for(entries_per_batch(a.batch)));
  return tile_rows > 0 ? (a.rows + tile_rows - 1) / tile_rows : 0;
}

Status launch_grouped_direct(Type t, const GroupedArgs& a, int group_rows, cudaStream_t stream, const CombineTail* tail) {
  const CombineTail none{};
  const CombineTail& c = tail != nullptr ? *tail : none;
  if (tail != nullptr && (tail->tile_count == nullptr || tail->sum.out != a.out || a.out_stride != tail->sum.H ||
                          tail->sum.H != a.rows || tail->T < 1))
    return Status::error("cuda: grouped_direct: a combine tail needs tile_count, sum.out == out, sum.H == rows == "
                         "out_stride and T >= 1");
  switch (t) {
    case Type::IQ3_XXS: return launch_batch<Type::IQ3_XXS>(a, group_rows, stream, c);
    case Type::Q2_0: return launch_batch<Type::Q2_0>(a, group_rows, stream, c);
    case Type::IQ4_NL: return launch_batch<Type::IQ4_NL>(a, group_rows, stream, c);
    case Type::Q5_1: return launch_batch<Type::Q5_1>(a, group_rows, stream, c);
    default: return Status::error("cuda: grouped_direct: unsupported type");
  }
}

}  // namespace strata::cuda::moe_detail
