// The `strata parity` harness: cases, reference arithmetic, comparison, reporting and timing.
// The rules it applies are written down in docs/PARITY.md; keep the two in step.
//
// Every case draws fresh random inputs from (seed, case parameters), runs the kernel on
// poisoned (NaN-filled) outputs, compares with the CPU reference and prints one line that names
// all its parameters, so a failing line is its own reproducer:
//   decode(type=..)          host run of the device decoders vs quant::dequantize_row: bit-exact
//   mma_s8(m=16, n=8, k=32)  the tensor-core tile with mmvq's lane mapping vs integer matmul: exact
//   quantize_q8_1(..)        vs quant::quantize_row_q8_1: identical bytes
//   get_rows(..)             vs quant::dequantize_row: identical bytes (memcmp)
//   mmvq(..)                 vs double dot of dequantized W and dequantized reference q8_1(x):
//                            ||y - ref|| / ||ref|| < 1e-5, every element finite
#include "strata/cuda/switches.h"
#include "strata/cuda/parity.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "parity_harness.h"
#include "parity_internal.h"
#include "strata/cuda/device.h"
#include "strata/cuda/get_rows.h"
#include "strata/cuda/mmvq.h"
#include "strata/cuda/quantize.h"
#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"

namespace strata::cuda {
namespace {

using quant::Type;

constexpr double kMmvqRelTol = 1e-5;  // docs/PARITY.md: mmvq bound

// ---- decode (host) -----------------------------------------------------------------------------

void run_decode_checks(const ParityOptions& opt, Reporter& rep) {
  for (Type t : parity_detail::quant_kernel_types()) {
    const int64_t n_blocks = 512;
    CaseResult r;
    r.op = "decode";
    r.line = fmt::format("decode(type={}, blocks={})", type_name(t), n_blocks);
    r.params = {{"type", type_name(t)}, {"blocks", n_blocks}};
    if (!rep.wanted(r.line)) continue;
    auto c = parity_detail::check_decoder_on_host(t, case_seed(opt.seed, r.line), n_blocks);
    if (!c) {
      r.status = "FAIL";
      r.detail = c.error();
    } else if (c->mismatches == 0) {
      r.status = "OK";
      r.detail = "bit-exact (host run of the device decoders)";
    } else {
      r.status = "FAIL";
      r.detail = fmt::format("{} of {} elements differ; first at {}: got {} want {}", c->mismatches, c->elements, c->first_bad,
                             c->got, c->want);
    }
    r.metrics = {{"mismatches", c ? c->mismatches : -1}};
    rep.add(std::move(r));
  }
}

void run_k_scale_words_check(const ParityOptions& opt, Reporter& rep) {
  const int64_t n_sets = 4096;
  CaseResult r;
  r.op = "decode";
  r.line = fmt::format("decode(k_scale_min_words, sets={})", n_sets);
  r.params = {{"sets", n_sets}};
  if (!rep.wanted(r.line)) return;
  const int64_t bad = parity_detail::k_scale_words_mismatches_on_host(case_seed(opt.seed, r.line), n_sets);
  r.status = bad == 0 ? "OK" : "FAIL";
  r.detail = bad == 0 ? "equal to scale_min_k4 on every sub-block (host)"
                      : fmt::format("{} of {} sub-blocks differ from scale_min_k4", bad, 8 * n_sets);
  r.metrics = {{"mismatches", bad}};
  rep.add(std::move(r));
}

// ---- mma tile ------------------------------------------------------------------------------------

Status run_mma_check(const ParityOptions& opt, Reporter& rep) {
  CaseResult r;
  r.op = "mma_s8";
  r.line = "mma_s8(m=16, n=8, k=32)";
  r.params = {{"m", 16}, {"n", 8}, {"k", 32}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  std::mt19937_64 rng(case_seed(opt.seed, r.line));
  std::uniform_int_distribution<int> dist(-128, 127);
  int8_t a[16 * 32], b[8 * 32];
  for (auto& v : a) v = static_cast<int8_t>(dist(rng));
  for (auto& v : b) v = static_cast<int8_t>(dist(rng));
  int32_t c[16 * 8];
  STRATA_TRY(parity_detail::mma_tile_on_device(a, b, c));
  int bad = 0;
  std::string first;
  for (int i = 0; i < 16; ++i)
    for (int t = 0; t < 8; ++t) {
      int32_t want = 0;
      for (int k = 0; k < 32; ++k) want += a[i * 32 + k] * b[t * 32 + k];
      if (c[i * 8 + t] != want && bad++ == 0) first = fmt::format("C[{}][{}] = {}, want {}", i, t, c[i * 8 + t], want);
    }
  r.status = bad == 0 ? "OK" : "FAIL";
  r.detail = bad == 0 ? "exact" : fmt::format("{} of 128 differ; {}", bad, first);
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- quantize_q8_1 ---------------------------------------------------------------------------------

// Rows of x for the quantizer: normal values at several scales, a row of exact ties (max 127 so
// d = 1; halves round away from zero), an all-zero row and a row whose d is an f16 subnormal.
std::vector<float> quantizer_input(uint64_t seed, int64_t cols, int rows) {
  std::vector<float> x = random_normal(seed, static_cast<size_t>(cols * rows));
  std::mt19937_64 rng(seed + 1);
  std::uniform_int_distribution<int> k(-126, 125);
  for (int r = 0; r < rows; ++r) {
    float* row = x.data() + r * cols;
    switch (r % 6) {
      case 1:  // ties
        for (int64_t j = 0; j < cols; ++j) row[j] = (j % 32 == 0) ? 127.0f : static_cast<float>(k(rng)) + 0.5f;
        break;
      case 2: std::fill(row, row + cols, 0.0f); break;
      case 3: for (int64_t j = 0; j < cols; ++j) row[j] *= 1e-6f; break;   // d below f16's normal range
      case 4: for (int64_t j = 0; j < cols; ++j) row[j] *= 300.0f; break;
      default: break;
    }
  }
  return x;
}

Status run_quantize_cases(const ParityOptions& opt, Reporter& rep) {
  const int64_t cols_list[] = {640, 2560, 6144, 10240, 12288};
  const int rows_list[] = {1, 8};
  for (int64_t cols : cols_list)
    for (int rows : rows_list) {
      CaseResult r;
      r.op = "quantize_q8_1";
      r.line = fmt::format("quantize_q8_1(cols={}, rows={})", cols, rows);
      r.params = {{"cols", cols}, {"rows", rows}};
      if (!rep.wanted(r.line)) continue;
      const std::vector<float> x = quantizer_input(case_seed(opt.seed, r.line), cols, std::max(rows, 6));
      const int64_t qrow = q8_1_row_bytes(cols);
      const int64_t qstride = (qrow + 15) / 16 * 16;
      std::vector<uint8_t> want(static_cast<size_t>(qstride * rows), 0xAB), got(want.size(), 0xCD);
      for (int t = 0; t < rows; ++t) quant::quantize_row_q8_1(x.data() + t * cols, want.data() + t * qstride, cols);
      DeviceBuffer dx, dq;
      STRATA_TRY(dx.alloc(x.size() * sizeof(float)));
      STRATA_TRY(dq.alloc(want.size()));
      PARITY_CUDA(cudaMemcpy(dx.get(), x.data(), static_cast<size_t>(cols * rows) * sizeof(float), cudaMemcpyHostToDevice));
      PARITY_CUDA(cudaMemset(dq.get(), 0xAB, want.size()));  // the padding between rows must stay untouched
      STRATA_TRY(quantize_q8_1(dx.get<float>(), cols, cols, rows, dq.get(), qstride));
      PARITY_CUDA(cudaDeviceSynchronize());
      PARITY_CUDA(cudaMemcpy(got.data(), dq.get(), got.size(), cudaMemcpyDeviceToHost));
      int64_t bad = 0, first = -1, max_code_diff = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) {
          if (bad++ == 0) first = static_cast<int64_t>(i);
          const int64_t in_block = static_cast<int64_t>(i % static_cast<size_t>(qstride)) % 36;
          if (in_block >= 4)
            max_code_diff = std::max<int64_t>(max_code_diff, std::abs(static_cast<int8_t>(got[i]) - static_cast<int8_t>(want[i])));
        }
      r.status = bad == 0 ? "OK" : "FAIL";
      r.detail = bad == 0 ? "identical bytes" : fmt::format("{} bytes differ, first at byte {}, max code difference {}", bad, first, max_code_diff);
      r.metrics = {{"bytes_differing", bad}, {"max_code_diff", max_code_diff}};
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

// ---- get_rows ------------------------------------------------------------------------------------

std::vector<Type> all_kernel_types() {
  std::vector<Type> v = parity_detail::quant_kernel_types();
  v.push_back(Type::BF16);
  v.push_back(Type::F16);
  v.push_back(Type::F32);
  return v;
}

Status run_get_rows_cases(const ParityOptions& opt, Reporter& rep) {
  const int64_t cols_list[] = {640, 2560, 6144};
  for (Type t : all_kernel_types())
    for (int64_t cols : cols_list) {
      const auto info = *quant::type_info(t);
      const int64_t src_rows = 257, n_ids = 37;
      CaseResult r;
      r.op = "get_rows";
      r.line = fmt::format("get_rows(type={}, cols={}, src_rows={}, n={})", type_name(t), cols, src_rows, n_ids);
      r.params = {{"type", type_name(t)}, {"cols", cols}, {"src_rows", src_rows}, {"n", n_ids}};
      if (!rep.wanted(r.line)) continue;
      if (cols % info.block_size != 0) {
        r.status = "SKIP";
        r.detail = fmt::format("(cols not a multiple of the block size {})", info.block_size);
        rep.add(std::move(r));
        continue;
      }
      const uint64_t seed = case_seed(opt.seed, r.line);
      const int64_t row_bytes = cols / info.block_size * info.type_size;
      std::vector<uint8_t> src(static_cast<size_t>(row_bytes * src_rows));
      STRATA_TRY(quant::fill_random_blocks(t, seed, src.data(), src_rows * cols / info.block_size, 1.0f));
      // First, last, duplicates, random, and one id out of range (expects a NaN row).
      std::vector<int32_t> ids = {0, static_cast<int32_t>(src_rows - 1), 5, 5};
      std::mt19937_64 rng(seed);
      while (static_cast<int64_t>(ids.size()) < n_ids - 1) ids.push_back(static_cast<int32_t>(rng() % src_rows));
      ids.push_back(static_cast<int32_t>(src_rows + 3));
      std::vector<float> want(static_cast<size_t>(n_ids * cols)), got(want.size());
      for (int64_t i = 0; i < n_ids; ++i) {
        float* dst = want.data() + i * cols;
        if (ids[i] < 0 || ids[i] >= src_rows) {
          const uint32_t nan_bits = 0x7FC00000u;
          for (int64_t j = 0; j < cols; ++j) std::memcpy(dst + j, &nan_bits, 4);
        } else {
          STRATA_TRY(quant::dequantize_row(t, src.data() + ids[i] * row_bytes, dst, cols));
        }
      }
      DeviceBuffer dsrc, dids, ddst;
      STRATA_TRY(dsrc.alloc(src.size()));
      STRATA_TRY(dids.alloc(ids.size() * sizeof(int32_t)));
      STRATA_TRY(ddst.alloc(got.size() * sizeof(float)));
      PARITY_CUDA(cudaMemcpy(dsrc.get(), src.data(), src.size(), cudaMemcpyHostToDevice));
      PARITY_CUDA(cudaMemcpy(dids.get(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      PARITY_CUDA(cudaMemset(ddst.get(), 0xFF, got.size() * sizeof(float)));
      GetRowsArgs a;
      a.type = t;
      a.src = dsrc.get();
      a.src_rows = src_rows;
      a.cols = cols;
      a.ids = dids.get<int32_t>();
      a.n_ids = n_ids;
      a.dst = ddst.get<float>();
      a.dst_stride = cols;
      STRATA_TRY(get_rows(a));
      PARITY_CUDA(cudaDeviceSynchronize());
      PARITY_CUDA(cudaMemcpy(got.data(), ddst.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      int64_t bad = 0, first = -1;
      for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], 4) != 0 && bad++ == 0) first = static_cast<int64_t>(i);
      r.status = bad == 0 ? "OK" : "FAIL";
      r.detail = bad == 0 ? "bit-exact"
                          : fmt::format("{} of {} floats differ; first at row {} col {}: got {} want {}", bad, got.size(),
                                        first / cols, first % cols, got[static_cast<size_t>(first)], want[static_cast<size_t>(first)]);
      r.metrics = {{"floats_differing", bad}};
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

// ---- mmvq ------------------------------------------------------------------------------------------

struct MmvqShape {
  int64_t rows, cols;
  std::vector<int> Ts;
  bool bench;  // the model's shapes are timed; the edge shapes only checked
};

std::vector<MmvqShape> mmvq_shapes() {
  const std::vector<int> window = {1, 2, 4, 8};
  return {
      // The decoder's shapes (release geometry, H = 2560), output rows x input cols.
      {10240, 2560, window, true},   // GDN qkv
      {6144, 2560, window, true},    // GDN z
      {12288, 2560, window, true},   // attention q
      {2560, 6144, window, true},    // ssm_out / attn_output
      {640, 2560, window, true},     // expert gate/up, shared expert
      {2560, 640, window, true},     // expert down, shared expert down
      {512, 2560, window, true},     // k, v, router
      {128, 2560, window, true},     // indexer
      {48, 2560, window, true},      // GDN beta, alpha
      {320, 10240, window, true},    // HC down
      {10240, 320, window, true},    // HC up (K = 320: only the 32/64-element block types)
      {4, 10240, window, true},      // HC inject
      {248320, 2560, {1, 4, 8}, true},  // lm_head
      // Edges: a single row, rows not a multiple of 16, K not a multiple of 256, odd T.
      {1, 256, {3}, false},
      {17, 512, {5}, false},
      {33, 288, {7}, false},
      {100, 1024, {1, 6}, false},
  };
}

// Rows past this many repeat the first ones (row r holds row r % kMmvqDistinctRows), so that the
// lm_head shape costs the host no more random blocks and reference dot products than this.
constexpr int64_t kMmvqDistinctRows = 8192;

struct BenchResult {
  double us = 0, gb_s = 0;
  int copies = 0, launches = 0;
};

// Median time of one launch: a graph of `launches` calls, each on the next of `copies` weight
// buffers (together several times the L2, so the weights come from DRAM as in the engine),
// timed as a whole with events and divided; median over `reps` graph launches after warm-up.
Result<BenchResult> bench_mmvq(const MmvqArgs& base, size_t weight_bytes, size_t l2_bytes, int reps) {
  const size_t stride = (weight_bytes + 255) / 256 * 256;
  const size_t want_total = std::max<size_t>(4 * l2_bytes, 256u << 20);
  int copies = static_cast<int>(std::clamp<size_t>((want_total + stride - 1) / stride, 2, 4096));
  while (copies > 2 && static_cast<size_t>(copies) * stride > (size_t{3} << 30)) --copies;
  const int launches = std::max(copies, 64);
  DeviceBuffer pool;
  STRATA_TRY(pool.alloc(stride * static_cast<size_t>(copies)));
  for (int i = 0; i < copies; ++i)
    PARITY_CUDA(cudaMemcpy(pool.get<uint8_t>() + stride * static_cast<size_t>(i), base.weights, weight_bytes, cudaMemcpyDeviceToDevice));
  cudaStream_t stream = nullptr;
  PARITY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  const auto cleanup = [&] {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    cudaStreamDestroy(stream);
  };
  const auto body = [&]() -> Result<BenchResult> {
    PARITY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status st;
    for (int i = 0; i < launches && st.ok(); ++i) {
      MmvqArgs a = base;
      a.weights = pool.get<uint8_t>() + stride * static_cast<size_t>(i % copies);
      st = mmvq(a, stream);
    }
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (!st.ok()) return st;
    PARITY_CUDA(end);
    PARITY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    PARITY_CUDA(cudaEventCreate(&start));
    PARITY_CUDA(cudaEventCreate(&stop));
    for (int w = 0; w < 2; ++w) PARITY_CUDA(cudaGraphLaunch(exec, stream));
    PARITY_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> ms(static_cast<size_t>(reps));
    for (int i = 0; i < reps; ++i) {
      PARITY_CUDA(cudaEventRecord(start, stream));
      PARITY_CUDA(cudaGraphLaunch(exec, stream));
      PARITY_CUDA(cudaEventRecord(stop, stream));
      PARITY_CUDA(cudaEventSynchronize(stop));
      PARITY_CUDA(cudaEventElapsedTime(&ms[static_cast<size_t>(i)], start, stop));
    }
    PARITY_CUDA(cudaGetLastError());
    std::sort(ms.begin(), ms.end());
    BenchResult b;
    b.us = 1e3 * ms[ms.size() / 2] / launches;
    b.gb_s = static_cast<double>(weight_bytes) / (b.us * 1e-6) / 1e9;
    b.copies = copies;
    b.launches = launches;
    return b;
  };
  auto res = body();
  cleanup();
  return res;
}

struct BenchRow {  // for the closing tables
  std::string type;
  int64_t rows, cols;
  int T;
  double gb_s, roof;
  double us;
};

Status run_mmvq_cases(const ParityOptions& opt, Reporter& rep, double roof_gb_s, size_t l2_bytes, std::vector<BenchRow>& table) {
  for (Type t : all_kernel_types())
    for (const MmvqShape& shape : mmvq_shapes()) {
      const auto info = *quant::type_info(t);
      const bool q8 = mmvq_takes_q8_1(t);
      const int64_t rows = shape.rows, cols = shape.cols;
      const int64_t base_rows = std::min(rows, kMmvqDistinctRows);
      const int64_t weight_bytes = cols / info.block_size * info.type_size * rows;
      // The reference work shared by this shape's T values.
      std::vector<uint8_t> w;
      std::vector<float> wf;
      DeviceBuffer dw;
      int64_t row_bytes = 0;
      for (int T : shape.Ts) {
        CaseResult r;
        r.op = "mmvq";
        r.line = fmt::format("mmvq(type={}, rows={}, cols={}, T={})", type_name(t), rows, cols, T);
        r.params = {{"type", type_name(t)}, {"rows", rows}, {"cols", cols}, {"T", T}};
        if (!rep.wanted(r.line)) continue;
        if (cols % info.block_size != 0) {
          r.status = "SKIP";
          r.detail = fmt::format("(cols not a multiple of the block size {})", info.block_size);
          rep.add(std::move(r));
          continue;
        }
        if (w.empty()) {  // weights: random valid blocks, dequantized once by the reference
          row_bytes = cols / info.block_size * info.type_size;
          w.resize(static_cast<size_t>(row_bytes * base_rows));
          const std::string wname = fmt::format("W(type={}, rows={}, cols={})", type_name(t), rows, cols);
          STRATA_TRY(quant::fill_random_blocks(t, case_seed(opt.seed, wname), w.data(), base_rows * cols / info.block_size, 1.0f));
          wf.resize(static_cast<size_t>(base_rows * cols));
          STRATA_TRY(quant::dequantize_row(t, w.data(), wf.data(), base_rows * cols));
          STRATA_TRY(dw.alloc(static_cast<size_t>(row_bytes * rows)));
          for (int64_t r = 0; r < rows; r += base_rows) {  // repeat the distinct rows down the matrix
            const int64_t n = std::min(base_rows, rows - r);
            PARITY_CUDA(cudaMemcpy(dw.get<uint8_t>() + r * row_bytes, w.data(), static_cast<size_t>(n * row_bytes), cudaMemcpyHostToDevice));
          }
        }
        // Activations: x, the reference's view of it (q8_1 and back, or x itself), on the device.
        const std::vector<float> x = random_normal(case_seed(opt.seed, r.line), static_cast<size_t>(T * cols));
        std::vector<float> xr(x.size());
        const int64_t qstride = (q8_1_row_bytes(cols) + 15) / 16 * 16;
        if (q8) {
          std::vector<uint8_t> xq(static_cast<size_t>(q8_1_row_bytes(cols)));
          for (int i = 0; i < T; ++i) {
            quant::quantize_row_q8_1(x.data() + i * cols, xq.data(), cols);
            STRATA_TRY(quant::dequantize_row(Type::Q8_1, xq.data(), xr.data() + i * cols, cols));
          }
        } else {
          xr = x;
        }
        std::vector<double> base_ref(static_cast<size_t>(T * base_rows));
        parallel_for(base_rows, [&](int64_t b, int64_t e) {
          for (int64_t row = b; row < e; ++row) {
            const float* wr = wf.data() + row * cols;
            for (int i = 0; i < T; ++i) {
              const float* xi = xr.data() + i * cols;
              double s = 0.0;
              for (int64_t k = 0; k < cols; ++k) s += static_cast<double>(wr[k]) * static_cast<double>(xi[k]);
              base_ref[static_cast<size_t>(i * base_rows + row)] = s;
            }
          }
        });
        std::vector<double> ref(static_cast<size_t>(T * rows));
        for (int i = 0; i < T; ++i)
          for (int64_t row = 0; row < rows; ++row)
            ref[static_cast<size_t>(i * rows + row)] = base_ref[static_cast<size_t>(i * base_rows + row % base_rows)];
        DeviceBuffer dx, dact, dy;
        STRATA_TRY(dx.alloc(x.size() * sizeof(float)));
        PARITY_CUDA(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
        MmvqArgs a;
        a.type = t;
        a.weights = dw.get();
        a.rows = rows;
        a.cols = cols;
        a.T = T;
        if (q8) {
          STRATA_TRY(dact.alloc(static_cast<size_t>(qstride * T)));
          STRATA_TRY(quantize_q8_1(dx.get<float>(), cols, cols, T, dact.get(), qstride));
          a.act = dact.get();
          a.act_stride = qstride;
        } else {
          a.act = dx.get();
          a.act_stride = cols * 4;
        }
        STRATA_TRY(dy.alloc(static_cast<size_t>(T * rows) * sizeof(float)));
        PARITY_CUDA(cudaMemset(dy.get(), 0xFF, dy.bytes()));  // NaN: an unwritten output fails
        a.y = dy.get<float>();
        a.y_stride = rows;
        Status kst = mmvq(a);
        if (kst.ok()) {
          const cudaError_t e = cudaDeviceSynchronize();
          if (e != cudaSuccess) kst = Status::error(fmt::format("kernel failed: {}", cudaGetErrorString(e)));
        }
        if (!kst.ok()) {  // a failed case; stop only if the context is gone (a sticky error)
          r.status = "FAIL";
          r.detail = kst.message();
          rep.add(std::move(r));
          if (cudaDeviceSynchronize() != cudaSuccess) return kst;
          cudaGetLastError();
          continue;
        }
        std::vector<float> y(static_cast<size_t>(T * rows));
        PARITY_CUDA(cudaMemcpy(y.data(), dy.get(), y.size() * sizeof(float), cudaMemcpyDeviceToHost));

        double diff2 = 0, ref2 = 0, max_abs = 0;
        int64_t nonfinite = 0, worst = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          if (!std::isfinite(y[i])) {
            ++nonfinite;
            continue;
          }
          const double d = static_cast<double>(y[i]) - ref[i];
          diff2 += d * d;
          ref2 += ref[i] * ref[i];
          if (std::abs(d) > max_abs) {
            max_abs = std::abs(d);
            worst = static_cast<int64_t>(i);
          }
        }
        const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
        const bool ok = nonfinite == 0 && rel < kMmvqRelTol;
        r.status = ok ? "OK" : "FAIL";
        r.detail = fmt::format("rel={:.2e} max_abs={:.2e}", rel, max_abs);
        if (nonfinite) r.detail += fmt::format(" nonfinite={}", nonfinite);
        if (!ok && nonfinite == 0)
          r.detail += fmt::format(" (worst t={} row={}: got {} want {})", worst / rows, worst % rows, y[static_cast<size_t>(worst)],
                                  ref[static_cast<size_t>(worst)]);
        r.metrics = {{"rel", rel}, {"max_abs", max_abs}, {"nonfinite", nonfinite}, {"weight_bytes", weight_bytes}};
        if (auto plan = mmvq_plan(a)) {
          r.metrics["plan"] = {{"kernel", plan->kernel}, {"grid", plan->grid}, {"threads", plan->threads}, {"ksplit", plan->ksplit},
                               {"rows_per_tile", plan->rows_per_tile}, {"ctas_per_sm", plan->ctas_per_sm}, {"smem_bytes", plan->smem_bytes}};
          if (ok && opt.bench && shape.bench) {
            auto b = bench_mmvq(a, static_cast<size_t>(weight_bytes), l2_bytes, opt.bench_reps);
            if (!b) return b.status();
            const double frac = roof_gb_s > 0 ? b->gb_s / roof_gb_s : 0.0;
            r.detail += fmt::format(" | {:.2f} us {:.0f} GB/s {:.1f}% roof ({} ks={} grid={} occ={})", b->us, b->gb_s,
                                    100 * frac, plan->kernel, plan->ksplit, plan->grid, plan->ctas_per_sm);
            r.metrics["bench"] = {{"us", b->us}, {"gb_s", b->gb_s}, {"roof_fraction", frac}, {"copies", b->copies},
                                  {"launches_per_graph", b->launches}, {"reps", opt.bench_reps}};
            table.push_back({type_name(t), rows, cols, T, b->gb_s, frac, b->us});
          }
        }
        rep.add(std::move(r));
      }
    }
  return Status::ok_status();
}

void print_bench_table(const std::vector<BenchRow>& table, double roof) {
  if (table.empty()) return;
  fmt::print("\nmmvq bench: GB/s of weights (% of the {:.0f} GB/s measured read roof), median per launch\n", roof);
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, std::map<int, double>>> by_shape;
  std::vector<std::string> type_order;
  for (const auto& r : table) {
    by_shape[{r.rows, r.cols}][r.type][r.T] = r.gb_s;
    if (std::find(type_order.begin(), type_order.end(), r.type) == type_order.end()) type_order.push_back(r.type);
  }
  for (const auto& [shape, types] : by_shape) {
    fmt::print("rows={} cols={}:  {:>8} {:>12} {:>12} {:>12} {:>12}\n", shape.first, shape.second, "type", "T=1", "T=2", "T=4", "T=8");
    for (const auto& name : type_order) {
      auto it = types.find(name);
      if (it == types.end()) continue;
      std::string line = fmt::format("{:>24} {:>8}", "", name);
      for (int T : {1, 2, 4, 8}) {
        auto jt = it->second.find(T);
        line += jt == it->second.end() ? fmt::format(" {:>12}", "-") : fmt::format(" {:>6.0f} ({:>2.0f}%)", jt->second, 100 * jt->second / roof);
      }
      fmt::print("{}\n", line);
    }
  }
}

// The decode step's mat-vecs (release geometry, model.md section 6; the types of the published
// packs), for the closing summary: time and GB/s at T = 1 and T = 4. K = 640 is no multiple of
// 256, so the down projections use the packs' 32/64-element fallbacks (Q5_0, IQ4_NL, Q2_0).
struct DecodeShape {
  const char* what;
  const char* type;
  int64_t rows, cols;
};
constexpr DecodeShape kDecodeShapes[] = {
    {"HC down", "bf16", 320, 10240},         {"HC up", "bf16", 10240, 320},
    {"HC inject", "bf16", 4, 10240},         {"router", "bf16", 512, 2560},
    {"GDN beta/alpha", "bf16", 48, 2560},    {"GDN qkv", "q5_K", 10240, 2560},
    {"GDN z", "q5_K", 6144, 2560},           {"GDN/attn out", "q5_K", 2560, 6144},
    {"shared gate/up", "q5_K", 640, 2560},   {"shared down (K=640)", "q5_0", 2560, 640},
    {"lm_head", "iq4_xs", 248320, 2560},     {"expert gate/up (1 of 10)", "iq3_xxs", 640, 2560},
    {"expert down (1 of 10)", "q2_0", 2560, 640}, {"expert down (1 of 10)", "iq4_nl", 2560, 640},
};

void print_decode_table(const std::vector<BenchRow>& table) {
  if (table.empty()) return;
  fmt::print("\nmmvq decode shapes: us per launch and GB/s of weights (grouped experts: the mmvq of one expert;\n"
             "the grouped kernel itself is timed by the moe cases)\n");
  fmt::print("{:>26} {:>8} {:>14} {:>22} {:>22}\n", "op", "type", "rows x cols", "T=1", "T=4");
  for (const DecodeShape& d : kDecodeShapes) {
    std::string cells;
    bool any = false;
    for (int T : {1, 4}) {
      auto it = std::find_if(table.begin(), table.end(), [&](const BenchRow& r) {
        return r.rows == d.rows && r.cols == d.cols && r.T == T && r.type == d.type;
      });
      any = any || it != table.end();
      cells += it == table.end() ? fmt::format(" {:>22}", "-") : fmt::format(" {:>8.2f} us {:>6.0f} GB/s", it->us, it->gb_s);
    }
    if (any) fmt::print("{:>26} {:>8} {:>14}{}\n", d.what, d.type, fmt::format("{}x{}", d.rows, d.cols), cells);
  }
}

}  // namespace

Result<ParitySummary> run_parity(const ParityOptions& opt) {
  STRATA_TRY(check_switches());
  Reporter rep(opt);
  nlohmann::json doc = {{"seed", opt.seed}, {"filter", opt.filter}, {"bench", opt.bench}, {"mmvq_rel_tol", kMmvqRelTol}};
  double roof = 0.0;
  std::vector<BenchRow> table;

  // The stages; a returned error means the harness could not go on (a CUDA fault poisons the
  // context), not that a case failed. What ran before is still reported and written.
  const auto stages = [&]() -> Status {
    run_decode_checks(opt, rep);
    run_k_scale_words_check(opt, rep);
    if (opt.host_only) return Status::ok_status();
    STRATA_TRY(check_device(opt.device));
    PARITY_CUDA(cudaSetDevice(opt.device));
    cudaDeviceProp prop{};
    PARITY_CUDA(cudaGetDeviceProperties(&prop, opt.device));
    fmt::print("device cuda:{} {} sm_{}{} {} SMs L2 {} MiB\n", opt.device, prop.name, prop.major, prop.minor, prop.multiProcessorCount,
               prop.l2CacheSize >> 20);
    doc["device"] = {{"index", opt.device}, {"name", prop.name}, {"cc", fmt::format("{}.{}", prop.major, prop.minor)},
                     {"sm_count", prop.multiProcessorCount}, {"l2_bytes", prop.l2CacheSize}};
    if (opt.bench) {
      auto bw = measure_read_bandwidth(opt.device, size_t{2} << 30, 10);
      if (!bw) return bw.status();
      roof = bw->read_gb_s;
      fmt::print("read roof {:.0f} GB/s (strata devices probe, 2 GiB)\n", roof);
      doc["read_roof_gb_s"] = roof;
    }
    STRATA_TRY(run_mma_check(opt, rep));
    STRATA_TRY(run_quantize_cases(opt, rep));
    STRATA_TRY(run_get_rows_cases(opt, rep));
    STRATA_TRY(run_mmvq_cases(opt, rep, roof, static_cast<size_t>(prop.l2CacheSize), table));
    STRATA_TRY(run_hc_cases(opt, rep));
    STRATA_TRY(run_gdn_cases(opt, rep));
    STRATA_TRY(run_attention_cases(opt, rep));
    STRATA_TRY(run_moe_cases(opt, rep));
    STRATA_TRY(run_ple_cases(opt, rep));
    STRATA_TRY(run_head_cases(opt, rep));
    STRATA_TRY(run_decoder_cases(opt, rep));
    return Status::ok_status();
  };
  Status st = stages();
  if (!st.ok()) {
    st = Status::error(st.message() + (rep.current().empty() ? "" : " (while running " + rep.current() + ")"));
    doc["error"] = st.message();
  }

  const ParitySummary& s = rep.summary();
  print_bench_table(table, roof);
  print_decode_table(table);
  if (!rep.failures().empty()) {
    fmt::print("\nfailures:\n");
    for (const auto& f : rep.failures()) fmt::print("  {}\n", f);
  }
  fmt::print("\nparity: {} passed, {} failed, {} skipped{}\n", s.passed, s.failed, s.skipped, st.ok() ? "" : " (stopped early)");
  if (!opt.json_path.empty()) {
    doc["cases"] = std::move(rep.cases());
    doc["summary"] = {{"passed", s.passed}, {"failed", s.failed}, {"skipped", s.skipped}};
    std::ofstream out(opt.json_path);
    if (!out) return Status::error("parity: cannot write " + opt.json_path);
    out << doc.dump(1) << "\n";
  }
  if (!st.ok()) return st;
  return s;
}

}  // namespace strata::cuda
