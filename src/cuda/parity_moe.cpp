// Parity of the MoE kernels (moe.h) against the CPU reference: router_topk against
// reference::route (with planted ties), native_expert_grouped against host code that follows
// reference::moe_layer's routed part (weights through the reference dequantizers, activations
// through the reference q8_1 quantizer and back for quantized types, as run_mmvq_cases does),
// swiglu (and its q8_1 bytes) and shared_gate_add; the decode path's fused forms: shared_down_fused
// (the shared expert's SwiGLU and down in one launch) against the host, route_and_group
// (router + grouping in one kernel) against reference::route and group_expert_entries,
// expert_combine_shared against the host sum and bit for bit against expert_combine +
// shared_gate_add, native_expert_grouped_pregrouped bit for bit against native_expert_grouped, and
// expert_gate_up_grouped + expert_down_combine (the routed sum in the down launch) bit for bit
// against expert_mlp_grouped + expert_combine_shared.
#include <algorithm>
#include <cstring>
#include <limits>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "moe.h"
#include "parity_harness.h"
#include "strata/cuda/quantize.h"
#include "strata/quant/dequant.h"
#include "strata/quant/quantize.h"
#include "strata/reference/hc.h"
#include "strata/reference/moe.h"
#include "strata/reference/ops.h"

namespace strata::cuda {
namespace {

using quant::Type;

// fp32 accumulation in a different order than the double host sums: ~1e-6 relative at these K.
constexpr double kMoeRelTol = 1e-5;
// The router's weights p_e / sum differ from the reference's only by expf against std::exp (an ulp
// or two of each p) and the order of the softmax's double sum.
constexpr double kRouterRelTol = 1e-5;
// route_and_group's weights: the same arithmetic, held to what it costs (a few ulps, ~3e-7).
constexpr double kRouteGroupRelTol = 1e-6;

// ---- helpers ---------------------------------------------------------------------------------------

// Runs a kernel call and reports a failure (FAIL line) or a sticky CUDA error (harness stop).
// Returns true when the call and the device synchronisation succeeded.
template <class F>
Result<bool> run_call(CaseResult& r, Reporter& rep, F call) {
  Status st = call();
  if (st.ok()) {
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) st = Status::error(fmt::format("kernel failed: {}", cudaGetErrorString(e)));
  }
  if (st.ok()) return true;
  r.status = "FAIL";
  r.detail = st.message();
  rep.add(std::move(r));
  if (cudaDeviceSynchronize() != cudaSuccess) return st;
  cudaGetLastError();
  return false;
}

// With opt.bench, the median time of `call` (no warm-up) into r: metrics["ms"] and " | .. ms" on
// the detail.
template <class F>
Status add_ms(const ParityOptions& opt, CaseResult& r, const F& call) {
  if (!opt.bench) return Status::ok_status();
  auto ms = median_event_ms(opt.bench_reps, [] {}, call);
  if (!ms) return ms.status();
  r.metrics["ms"] = *ms;
  r.detail += fmt::format(" | {:.4f} ms", *ms);
  return Status::ok_status();
}

// The reference's view of activation rows: q8_1 and back for a weight type that takes q8_1,
// else the rows themselves.
std::vector<float> reference_view(const std::vector<float>& x, int64_t rows, int64_t cols, bool q8) {
  if (!q8) return x;
  std::vector<float> out(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(q8_1_row_bytes(cols)));
  for (int64_t r = 0; r < rows; ++r) {
    quant::quantize_row_q8_1(x.data() + r * cols, q.data(), cols);
    (void)quant::dequantize_row(Type::Q8_1, q.data(), out.data() + r * cols, cols);
  }
  return out;
}

// ---- router -----------------------------------------------------------------------------------------

// T rows of n random logits with planted ties: three experts share the top logit, two share the
// k-th largest (one of them then falls just outside the k), and when n > 32 so do two experts 32
// apart (one lane's slots in the device's routing warp).
std::vector<float> router_logits_with_ties(const ParityOptions& opt, const std::string& line, int T, int n, int k) {
  std::vector<float> logits = random_normal(case_seed(opt.seed, line), static_cast<size_t>(T * n), 2.0f);
  std::mt19937_64 rng(case_seed(opt.seed, line + " ties"));
  for (int t = 0; t < T; ++t) {
    float* x = logits.data() + static_cast<int64_t>(t) * n;
    const float top = *std::max_element(x, x + n) + 0.5f;
    for (int i = 0; i < 3; ++i) x[rng() % n] = top;
    std::vector<float> sorted(x, x + n);
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    const float kth = sorted[static_cast<size_t>(std::min(k, n) - 1)];
    for (int i = 0; i < 2; ++i) x[rng() % n] = kth;
    if (n > 32) {
      const int c = static_cast<int>(rng() % static_cast<uint64_t>(n - 32));
      x[c] = x[c + 32] = kth;
    }
  }
  return logits;
}

// reference::route of each row: ids and weights [T, k].
void reference_routes(const std::vector<float>& logits, int T, int n, int k, std::vector<int32_t>& ids, std::vector<float>& w) {
  for (int t = 0; t < T; ++t) {
    const reference::Routing ro = reference::route({logits.data() + static_cast<int64_t>(t) * n, static_cast<size_t>(n)}, k);
    ids.insert(ids.end(), ro.experts.begin(), ro.experts.end());
    w.insert(w.end(), ro.weights.begin(), ro.weights.end());
  }
}

Status run_router_cases(const ParityOptions& opt, Reporter& rep) {
  struct Shape {
    int n_expert, k;
  };
  const Shape shapes[] = {{512, 10}, {500, 10}, {16, 4}, {100, 7}};
  for (const Shape& sh : shapes)
    for (int T : {1, 2, 4, 8}) {
      CaseResult r = make_case("router_topk", fmt::format("router_topk(T={}, n_expert={}, k={})", T, sh.n_expert, sh.k), {{"T", T}, {"n_expert", sh.n_expert}, {"k", sh.k}});
      if (!rep.wanted(r.line)) continue;
      const int n = sh.n_expert, k = sh.k;
      const std::vector<float> logits = router_logits_with_ties(opt, r.line, T, n, k);
      std::vector<int32_t> want_ids;
      std::vector<float> want_w;
      reference_routes(logits, T, n, k, want_ids, want_w);
      DeviceBuffer dl, di, dw;
      STRATA_TRY(upload(dl, logits));
      STRATA_TRY(alloc_filled(di, want_ids.size() * sizeof(int32_t), 0xFF));
      STRATA_TRY(alloc_poisoned(dw, want_w.size()));
      const auto call = [&] { return router_topk(dl.get<float>(), T, n, k, di.get<int32_t>(), dw.get<float>(), nullptr); };
      auto ran = run_call(r, rep, call);
      if (!ran) return ran.status();
      if (!*ran) continue;
      std::vector<int32_t> ids;
      std::vector<float> w;
      STRATA_TRY(download(ids, di.get(), want_ids.size()));
      STRATA_TRY(download(w, dw.get(), want_w.size()));
      int64_t id_mismatch = 0;
      for (size_t i = 0; i < ids.size(); ++i) id_mismatch += ids[i] != want_ids[i];
      const Diff d = diff(w.data(), want_w.data(), w.size());
      const bool ok = id_mismatch == 0 && d.finite && d.rel < kRouterRelTol;
      r.status = ok ? "OK" : "FAIL";
      r.detail = fmt::format("ids_mismatch={} {}", id_mismatch, d.text());
      r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"ids_mismatch", id_mismatch}};
      STRATA_TRY(add_ms(opt, r, call));
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

// ---- swiglu and shared_gate_add ------------------------------------------------------------------------

Status run_swiglu_cases(const ParityOptions& opt, Reporter& rep) {
  for (int n : {640, 64, 96})
    for (int T : {1, 2, 4, 8}) {
      CaseResult r = make_case("swiglu", fmt::format("swiglu(T={}, n={})", T, n), {{"T", T}, {"n", n}});
      if (!rep.wanted(r.line)) continue;
      const int64_t stride = 2 * n + 32;  // g and u as halves of one row, as a fused gate/up output
      const std::vector<float> gu = random_normal(case_seed(opt.seed, r.line), static_cast<size_t>(T * stride), 3.0f);
      std::vector<float> want(static_cast<size_t>(T * n));
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < n; ++i) want[t * n + i] = reference::silu(gu[t * stride + i]) * gu[t * stride + n + i];
      const int64_t q8_stride = q8_1_row_bytes(n) + 4;
      DeviceBuffer dgu, dh, dq;
      STRATA_TRY(upload(dgu, gu));
      STRATA_TRY(alloc_poisoned(dh, want.size()));
      STRATA_TRY(alloc_filled(dq, static_cast<size_t>(q8_stride * T), 0xFF));
      const float* g = dgu.get<float>();
      const auto call = [&] { return swiglu(g, g + n, stride, T, n, dh.get<float>(), dq.get(), q8_stride, nullptr); };
      auto ran = run_call(r, rep, call);
      if (!ran) return ran.status();
      if (!*ran) continue;
      std::vector<float> h;
      std::vector<uint8_t> q;
      STRATA_TRY(download(h, dh.get(), want.size()));
      STRATA_TRY(download(q, dq.get(), static_cast<size_t>(q8_stride * T)));
      // The q8_1 bytes must be the reference quantizer's of the h the kernel produced, bit for bit.
      int64_t bad_bytes = 0;
      std::vector<uint8_t> qw(static_cast<size_t>(q8_1_row_bytes(n)));
      for (int t = 0; t < T; ++t) {
        quant::quantize_row_q8_1(h.data() + t * n, qw.data(), n);
        for (size_t i = 0; i < qw.size(); ++i) bad_bytes += q[t * q8_stride + i] != qw[i];
      }
      const Diff d = diff(h.data(), want.data(), h.size());
      const bool ok = bad_bytes == 0 && d.finite && d.rel < kMoeRelTol;
      r.status = ok ? "OK" : "FAIL";
      r.detail = fmt::format("{} q8_bad_bytes={}", d.text(), bad_bytes);
      r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"q8_bad_bytes", bad_bytes}};
      STRATA_TRY(add_ms(opt, r, call));
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

Status run_shared_gate_cases(const ParityOptions& opt, Reporter& rep) {
  for (int n : {2560, 100})
    for (int T : {1, 2, 4, 8}) {
      CaseResult r = make_case("shared_gate_add", fmt::format("shared_gate_add(T={}, n={})", T, n), {{"T", T}, {"n", n}});
      if (!rep.wanted(r.line)) continue;
      const uint64_t seed = case_seed(opt.seed, r.line);
      const std::vector<float> y0 = random_normal(seed, static_cast<size_t>(T * n));
      const std::vector<float> s = random_normal(seed + 1, static_cast<size_t>(T * n));
      const std::vector<float> gl = random_normal(seed + 2, static_cast<size_t>(T), 2.0f);
      std::vector<float> want = y0;
      for (int t = 0; t < T; ++t) {
        const float gate = reference::sigmoid(gl[t]);
        for (int j = 0; j < n; ++j) want[t * n + j] += s[t * n + j] * gate;
      }
      DeviceBuffer dy, ds, dg;
      STRATA_TRY(upload(dy, y0));
      STRATA_TRY(upload(ds, s));
      STRATA_TRY(upload(dg, gl));
      const auto call = [&] { return shared_gate_add(dy.get<float>(), ds.get<float>(), dg.get<float>(), T, n, nullptr); };
      auto ran = run_call(r, rep, call);
      if (!ran) return ran.status();
      if (!*ran) continue;
      std::vector<float> y;
      STRATA_TRY(download(y, dy.get(), want.size()));
      const Diff d = diff(y.data(), want.data(), y.size());
      r.status = d.finite && d.rel < kMoeRelTol ? "OK" : "FAIL";
      r.detail = d.text();
      r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}};
      STRATA_TRY(add_ms(opt, r, call));  // y accumulates across reps; only the time is used
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

// ---- native_expert_grouped -------------------------------------------------------------------------------

struct Geometry {
  int n_expert, n_ff, n_embd, pool;  // pool: the experts the cases route to (only they hold data)
  bool fused;                        // gate_up as one tensor, else gate and up
  bool floats;                       // also the F32 / F16 / BF16 pairs (the tiny test models' shapes)
};

// One role's expert matrices: the whole tensor on the device (zero outside the pool's experts,
// which no case reads) and the pool experts' reference values on the host.
struct Experts {
  Type type{};
  int64_t rows_pe = 0, cols = 0, row_bytes = 0;  // rows per expert (gate/up: 2 * n_ff, gate first)
  std::map<int, std::vector<float>> deq;         // expert -> rows_pe x cols
  DeviceBuffer d0, d1;                           // d1: the up half when gate and up are separate
  int64_t bytes_pe = 0;                          // weight bytes one expert's call reads
};

// The kernels' view of a case's expert tensors: gate|up as one tensor (fused) or two, and down.
ExpertWeights expert_weights(const Geometry& g, const Experts& gu, const Experts& dn) {
  const auto tensor = [](const Experts& ex, const DeviceBuffer& d, int64_t rows) {
    DTensor t;
    t.type = ex.type;
    t.data = d.get();
    t.rows = rows;
    t.cols = ex.cols;
    t.row_bytes = ex.row_bytes;
    return t;
  };
  const int64_t E = g.n_expert;
  ExpertWeights w;
  w.n_expert = g.n_expert;
  w.n_ff = g.n_ff;
  w.n_embd = g.n_embd;
  if (g.fused) {
    w.gate_up = tensor(gu, gu.d0, E * 2 * g.n_ff);
  } else {
    w.gate = tensor(gu, gu.d0, E * g.n_ff);
    w.up = tensor(gu, gu.d1, E * g.n_ff);
  }
  w.down = tensor(dn, dn.d0, E * g.n_embd);
  return w;
}

Status make_experts(Type t, const Geometry& g, int64_t rows_pe, int64_t cols, bool split_halves, const std::vector<int>& pool,
                    uint64_t seed, Experts& ex) {
  const auto info = *quant::type_info(t);
  ex.type = t;
  ex.rows_pe = rows_pe;
  ex.cols = cols;
  ex.row_bytes = cols / info.block_size * info.type_size;
  ex.bytes_pe = rows_pe * ex.row_bytes;
  ex.deq.clear();
  const int64_t part_rows = split_halves ? rows_pe / 2 : rows_pe;
  const size_t part_bytes = static_cast<size_t>(part_rows * ex.row_bytes);
  STRATA_TRY(alloc_filled(ex.d0, part_bytes * g.n_expert, 0));
  if (split_halves) {
    STRATA_TRY(alloc_filled(ex.d1, part_bytes * g.n_expert, 0));
  } else {
    ex.d1.reset();
  }
  std::vector<uint8_t> w(static_cast<size_t>(rows_pe * ex.row_bytes));
  const float scale = 2.0f / std::sqrt(static_cast<float>(cols));  // keeps each dot product O(1)
  for (int e : pool) {
    STRATA_TRY(quant::fill_random_blocks(t, seed + static_cast<uint64_t>(e), w.data(), rows_pe * cols / info.block_size, scale));
    std::vector<float> f(static_cast<size_t>(rows_pe * cols));
    STRATA_TRY(quant::dequantize_row(t, w.data(), f.data(), rows_pe * cols));
    ex.deq[e] = std::move(f);
    PARITY_CUDA(cudaMemcpy(ex.d0.get<uint8_t>() + e * part_bytes, w.data(), part_bytes, cudaMemcpyHostToDevice));
    if (split_halves)
      PARITY_CUDA(cudaMemcpy(ex.d1.get<uint8_t>() + e * part_bytes, w.data() + part_bytes, part_bytes, cudaMemcpyHostToDevice));
  }
  return Status::ok_status();
}

// out[p, r] = sum_c W_e[r, c] x[p, c] in double, for entries p with experts e_p.
std::vector<float> expert_matvec(const Experts& ex, const std::vector<int>& expert_of, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(expert_of.size()), rows = ex.rows_pe, cols = ex.cols;
  std::vector<float> out(static_cast<size_t>(n * rows));
  parallel_for(n * rows, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t p = i / rows, r = i % rows;
      const float* w = ex.deq.at(expert_of[p]).data() + r * cols;
      const float* xp = x.data() + p * cols;
      double s = 0.0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[c]) * xp[c];
      out[static_cast<size_t>(i)] = static_cast<float>(s);
    }
  });
  return out;
}

// A window's routing: T rows of k distinct experts from the pool (in random order, with random
// weights), so rows share experts and groups have 1..T entries.
struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
Routing make_routing(const std::vector<int>& pool, int T, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Routing ro;
  for (int t = 0; t < T; ++t) {
    std::vector<int> p = pool;
    std::shuffle(p.begin(), p.end(), rng);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    std::vector<float> w(static_cast<size_t>(k));
    float sum = 0.0f;
    for (float& v : w) sum += (v = u(rng));
    for (int j = 0; j < k; ++j) {
      ro.ids.push_back(p[static_cast<size_t>(j)]);
      ro.weights.push_back(w[static_cast<size_t>(j)] / sum);
    }
  }
  return ro;
}

// The reference's routed sum (moe_layer): experts in ascending id, each adding out * w to its
// rows; `order` lists the entries by (expert, row), as the device groups them.
std::vector<float> routed_sum(const std::vector<float>& out, const std::vector<int>& order, const Routing& ro, int k, int T, int64_t H) {
  std::vector<float> y(static_cast<size_t>(T * H), 0.0f);
  for (size_t p = 0; p < order.size(); ++p) {
    const int i = order[p];
    float* dst = y.data() + static_cast<int64_t>(i / k) * H;
    for (int64_t j = 0; j < H; ++j) dst[j] += out[p * H + j] * ro.weights[static_cast<size_t>(i)];
  }
  return y;
}

Status run_grouped_case(const ParityOptions& opt, Reporter& rep, const Geometry& g, const Experts& gu, const Experts& dn,
                        int T, int k, const std::vector<int>& pool, int64_t l2_bytes) {
  CaseResult r;
  r.op = "native_expert_grouped";
  r.line = fmt::format("native_expert_grouped(gate_up={}, down={}, n_expert={}, n_ff={}, n_embd={}, T={}{})", type_name(gu.type),
                       type_name(dn.type), g.n_expert, g.n_ff, g.n_embd, T, g.fused ? ", fused" : "");
  r.params = {{"gate_up", type_name(gu.type)}, {"down", type_name(dn.type)}, {"n_expert", g.n_expert}, {"n_ff", g.n_ff},
              {"n_embd", g.n_embd}, {"T", T}, {"k", k}, {"fused", g.fused}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const int64_t H = g.n_embd, ff = g.n_ff;
  const int n = T * k;
  const bool q8_in = mmvq_takes_q8_1(gu.type), q8_mid = mmvq_takes_q8_1(dn.type);
  const uint64_t seed = case_seed(opt.seed, r.line);
  const Routing ro = make_routing(pool, T, k, seed);
  const std::vector<float> u = random_normal(seed + 1, static_cast<size_t>(T * H));

  // The device's entry order: (expert, row) ascending, i.e. (expert, entry index).
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ro.ids[a] != ro.ids[b] ? ro.ids[a] < ro.ids[b] : a < b; });
  std::vector<int> expert_of(static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) expert_of[p] = ro.ids[static_cast<size_t>(order[p])];

  // Device inputs: u (f32 and q8_1), routing, NaN-filled scratch (stale) and y.
  const ExpertWeights w = expert_weights(g, gu, dn);
  DeviceBuffer du, duq, dids, dw, dscratch, dy;
  STRATA_TRY(upload(du, u));
  const int64_t q8s = q8_stride_for(H);
  STRATA_TRY(duq.alloc(static_cast<size_t>(q8s * T)));
  STRATA_TRY(quantize_q8_1(du.get<float>(), H, H, T, duq.get(), q8s));
  STRATA_TRY(upload(dids, ro.ids));
  STRATA_TRY(upload(dw, ro.weights));
  ExpertScratch scratch;
  scratch.cap_entries = kMaxWindowRows * k;  // sized for the longest window, as the decoder does
  const ExpertScratchLayout lay = expert_scratch_layout(w, scratch.cap_entries);
  STRATA_TRY(alloc_filled(dscratch, static_cast<size_t>(lay.bytes), 0xFF));
  scratch.base = dscratch.get();
  scratch.bytes = lay.bytes;
  STRATA_TRY(alloc_poisoned(dy, static_cast<size_t>(T * H)));
  Act act;
  act.f32 = du.get<float>();
  act.f32_stride = H;
  act.q8 = duq.get();
  act.q8_stride = q8s;
  act.cols = H;
  act.T = T;
  const auto call = [&] {
    return native_expert_grouped(w, act, dids.get<int32_t>(), dw.get<float>(), k, scratch, dy.get<float>(), nullptr);
  };
  auto ran = run_call(r, rep, call);
  if (!ran) return ran.status();
  if (!*ran) return Status::ok_status();

  // Read back y and the intermediates.
  const uint8_t* sb = dscratch.get<uint8_t>();
  std::vector<float> y, gu_dev, h_dev;
  std::vector<uint8_t> hq_dev;
  STRATA_TRY(download(y, dy.get(), static_cast<size_t>(T * H)));
  STRATA_TRY(download(gu_dev, sb + lay.gate_up, static_cast<size_t>(n * 2 * ff)));
  STRATA_TRY(download(h_dev, sb + lay.h, static_cast<size_t>(n * ff)));
  if (q8_mid) STRATA_TRY(download(hq_dev, sb + lay.h_q8, static_cast<size_t>(n * lay.h_q8_stride)));

  // gate/up against the reference on the entries' (quantized) activation rows.
  const std::vector<float> ur = reference_view(u, T, H, q8_in);
  std::vector<float> x(static_cast<size_t>(n * H));
  for (int p = 0; p < n; ++p) std::copy_n(ur.data() + static_cast<int64_t>(order[p] / k) * H, H, x.data() + p * H);
  const std::vector<float> gu_ref = expert_matvec(gu, expert_of, x);
  const Diff d_gu = diff(gu_dev.data(), gu_ref.data(), gu_ref.size());

  // h against silu(gate) * up of the reference gate/up; its q8_1 bytes against the reference
  // quantizer of the kernel's own h, bit for bit.
  std::vector<float> h_ref(static_cast<size_t>(n * ff));
  for (int p = 0; p < n; ++p)
    for (int64_t i = 0; i < ff; ++i) h_ref[p * ff + i] = reference::silu(gu_ref[p * 2 * ff + i]) * gu_ref[p * 2 * ff + ff + i];
  const Diff d_h = diff(h_dev.data(), h_ref.data(), h_ref.size());
  int64_t q8_bad = 0;
  if (q8_mid) {
    std::vector<uint8_t> qw(static_cast<size_t>(q8_1_row_bytes(ff)));
    for (int p = 0; p < n; ++p) {
      quant::quantize_row_q8_1(h_dev.data() + p * ff, qw.data(), ff);
      for (size_t i = 0; i < qw.size(); ++i) q8_bad += hq_dev[p * lay.h_q8_stride + i] != qw[i];
    }
  }

  // y: down on the kernel's h as quantized (the same h quantization on both sides: one q8_1 code
  // that rounds the other way at a tie-near value moves y by ~1e-3 relative, far above what the
  // kernels' arithmetic may cost), then the routed sum in ascending expert id.
  std::vector<float> hq(static_cast<size_t>(n * ff));
  for (int p = 0; p < n; ++p) {
    if (q8_mid) STRATA_TRY(quant::dequantize_row(Type::Q8_1, hq_dev.data() + p * lay.h_q8_stride, hq.data() + p * ff, ff));
    else std::copy_n(h_dev.data() + p * ff, ff, hq.data() + p * ff);
  }
  const std::vector<float> y_ref = routed_sum(expert_matvec(dn, expert_of, hq), order, ro, k, T, H);
  const Diff d_y = diff(y.data(), y_ref.data(), y_ref.size());
  // For information: the whole chain on the host (h from the reference gate/up, quantized by the
  // reference quantizer), which differs from the kernel's h in the rare q8_1 rounding flips.
  const std::vector<float> y_chain = routed_sum(expert_matvec(dn, expert_of, reference_view(h_ref, n, ff, q8_mid)), order, ro, k, T, H);
  const Diff d_chain = diff(y.data(), y_chain.data(), y_chain.size());

  const std::set<int> distinct(expert_of.begin(), expert_of.end());
  const bool ok = d_y.finite && d_y.rel < kMoeRelTol && d_gu.finite && d_gu.rel < kMoeRelTol && d_h.finite && d_h.rel < kMoeRelTol &&
                  q8_bad == 0;
  r.status = ok ? "OK" : "FAIL";
  r.detail = fmt::format("{} gate_up_rel={:.1e} h_rel={:.1e} h_q8_bad_bytes={} groups={} (chain_rel={:.1e})", d_y.text(), d_gu.rel,
                         d_h.rel, q8_bad, distinct.size(), d_chain.rel);
  r.metrics = {{"rel", d_y.rel},     {"max_abs", d_y.max_abs}, {"gate_up_rel", d_gu.rel}, {"h_rel", d_h.rel},
               {"h_q8_bad", q8_bad}, {"groups", distinct.size()}, {"chain_rel", d_chain.rel}};
  if (opt.bench) {
    // The call as the decoder runs it: captured once into a graph (which also checks that it is
    // capturable), replayed; weights stream from DRAM as in the engine (an L2-sized write between
    // replays evicts them).
    DeviceBuffer flush;
    STRATA_TRY(flush.alloc(static_cast<size_t>(2 * l2_bytes)));
    cudaStream_t cs = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    PARITY_CUDA(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    PARITY_CUDA(cudaStreamBeginCapture(cs, cudaStreamCaptureModeGlobal));
    const Status cst = native_expert_grouped(w, act, dids.get<int32_t>(), dw.get<float>(), k, scratch, dy.get<float>(), cs);
    PARITY_CUDA(cudaStreamEndCapture(cs, &graph));
    if (!cst.ok()) return cst;
    PARITY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    const auto replay = [&] {
      PARITY_CUDA(cudaGraphLaunch(exec, cs));
      return Status::ok_status();
    };
    auto ms = median_event_ms(opt.bench_reps, [&] { cudaMemsetAsync(flush.get(), 0, flush.bytes(), cs); }, replay, cs);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(cs);
    if (!ms) return ms.status();
    const double bytes = static_cast<double>(distinct.size()) * static_cast<double>(gu.bytes_pe + dn.bytes_pe);
    r.metrics["ms"] = *ms;
    r.metrics["gb_s"] = bytes / (*ms * 1e6);
    r.detail += fmt::format(" | {:.4f} ms {:.0f} GB/s of weights", *ms, bytes / (*ms * 1e6));
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

Status run_grouped_cases(const ParityOptions& opt, Reporter& rep) {
  // The released geometry (gate and up as two tensors) and small odd ones (fused gate_up; n_ff 256
  // lets the 256-element down types in).
  const Geometry geometries[] = {{512, 640, 2560, 24, false, false}, {16, 64, 256, 16, true, true}, {16, 256, 512, 16, false, true}};
  const Type gate_types[] = {Type::IQ2_XXS, Type::IQ2_XS, Type::IQ2_S, Type::IQ3_XXS, Type::IQ3_S, Type::IQ1_M,
                             Type::IQ4_XS,  Type::Q2_0,   Type::Q4_K,  Type::Q5_K,    Type::Q8_0};
  const Type down_types[] = {Type::IQ4_NL, Type::IQ4_XS, Type::Q2_0, Type::Q5_0, Type::Q5_1, Type::Q8_0, Type::Q6_K};
  const Type float_types[] = {Type::F32, Type::F16, Type::BF16};
  const int k = 10;
  int l2 = 0;
  PARITY_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, opt.device));

  for (const Geometry& g : geometries) {
    // The pool: experts 0 and n_expert - 1 (the tensor's edges) and random others.
    std::vector<int> pool;
    std::mt19937_64 rng(case_seed(opt.seed, fmt::format("moe pool {}", g.n_expert)));
    pool.push_back(0);
    pool.push_back(g.n_expert - 1);
    while (static_cast<int>(pool.size()) < std::min(g.pool, g.n_expert)) {
      const int e = static_cast<int>(rng() % g.n_expert);
      if (std::find(pool.begin(), pool.end(), e) == pool.end()) pool.push_back(e);
    }
    std::vector<std::pair<Type, Type>> pairs;
    for (Type a : gate_types)
      for (Type b : down_types) pairs.push_back({a, b});
    if (g.floats) {
      for (Type t : float_types) pairs.push_back({t, t});
      pairs.push_back({Type::F32, Type::Q8_0});  // mixed: f32 gate/up feeding a quantized down
    }

    Experts gu;
    std::map<Type, Experts> downs;  // every down type of the geometry, made on first use
    for (const auto& [gt, dt] : pairs) {
      const auto gi = *quant::type_info(gt);
      const auto di = *quant::type_info(dt);
      const bool skip = g.n_embd % gi.block_size != 0 || g.n_ff % di.block_size != 0;
      std::vector<std::string> lines;
      for (int T : {1, 2, 4, 8})
        lines.push_back(fmt::format("native_expert_grouped(gate_up={}, down={}, n_expert={}, n_ff={}, n_embd={}, T={}{})", type_name(gt),
                                    type_name(dt), g.n_expert, g.n_ff, g.n_embd, T, g.fused ? ", fused" : ""));
      bool any = false;
      for (const auto& l : lines) any = any || rep.wanted(l);
      if (!any) continue;
      if (skip) {
        for (const auto& l : lines) {
          if (!rep.wanted(l)) continue;
          CaseResult r;
          r.op = "native_expert_grouped";
          r.line = l;
          r.status = "SKIP";
          r.detail = "(a row length is not a multiple of the block size)";
          rep.add(std::move(r));
        }
        continue;
      }
      // Weights are made once per (geometry, type) and reused by the following pairs.
      if (gu.type != gt || gu.deq.empty())
        STRATA_TRY(make_experts(gt, g, 2 * g.n_ff, g.n_embd, !g.fused, pool,
                                case_seed(opt.seed, fmt::format("gate_up {} {}", type_name(gt), g.n_expert)), gu));
      Experts& dn = downs[dt];
      if (dn.deq.empty())
        STRATA_TRY(make_experts(dt, g, g.n_embd, g.n_ff, false, pool,
                                case_seed(opt.seed, fmt::format("down {} {}", type_name(dt), g.n_expert)), dn));
      for (int T : {1, 2, 4, 8}) STRATA_TRY(run_grouped_case(opt, rep, g, gu, dn, T, std::min(k, g.n_expert), pool, l2));
    }
  }
  return Status::ok_status();
}

// ---- the decode path's fused forms -----------------------------------------------------------------------

// The grouping arrays of a scratch for n entries, as read back from the device.
struct Grouping {
  int n_groups = -1;  // -1: out of range (the rest is then not read)
  std::vector<int> group_expert, group_start, entry_row, row_entries;
  std::vector<float> entry_weight;
};

Status read_grouping(const DeviceBuffer& d, const ExpertScratchLayout& l, int n, Grouping& g) {
  const uint8_t* b = d.get<uint8_t>();
  std::vector<int> ng;
  STRATA_TRY(download(ng, b + l.n_groups, 1));
  g.n_groups = ng[0] >= 1 && ng[0] <= n ? ng[0] : -1;
  if (g.n_groups < 0) return Status::ok_status();
  STRATA_TRY(download(g.group_expert, b + l.group_expert, static_cast<size_t>(g.n_groups)));
  STRATA_TRY(download(g.group_start, b + l.group_start, static_cast<size_t>(g.n_groups + 1)));
  STRATA_TRY(download(g.entry_row, b + l.entry_row, static_cast<size_t>(n)));
  STRATA_TRY(download(g.entry_weight, b + l.entry_weight, static_cast<size_t>(n)));
  STRATA_TRY(download(g.row_entries, b + l.row_entries, static_cast<size_t>(n)));
  return Status::ok_status();
}

// The grouping the device must make of ids/weights [T, k] (entries sorted by (expert, index)).
Grouping host_grouping(const std::vector<int32_t>& ids, const std::vector<float>& w, int k) {
  const int n = static_cast<int>(ids.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] != ids[b] ? ids[a] < ids[b] : a < b; });
  Grouping g;
  g.n_groups = 0;
  g.entry_row.resize(static_cast<size_t>(n));
  g.entry_weight.resize(static_cast<size_t>(n));
  g.row_entries.resize(static_cast<size_t>(n));
  std::vector<int> filled(static_cast<size_t>(n / k), 0);
  for (int p = 0; p < n; ++p) {
    const int i = order[static_cast<size_t>(p)], row = i / k;
    if (p == 0 || ids[order[p - 1]] != ids[i]) {
      g.group_expert.push_back(ids[i]);
      g.group_start.push_back(p);
      ++g.n_groups;
    }
    g.entry_row[p] = row;
    g.entry_weight[p] = w[i];
    g.row_entries[row * k + filled[row]++] = p;  // a row's entries meet in ascending expert id
  }
  g.group_start.push_back(n);
  return g;
}

// Differences between two groupings (weights compared bit for bit); 0 when identical.
int64_t grouping_mismatch(const Grouping& a, const Grouping& b) {
  if (a.n_groups < 0 || b.n_groups < 0 || a.n_groups != b.n_groups) return 1 << 20;
  int64_t bad = 0;
  const auto count = [&](const auto& x, const auto& y) {
    for (size_t i = 0; i < x.size(); ++i) bad += std::memcmp(&x[i], &y[i], sizeof(x[i])) != 0;
  };
  count(a.group_expert, b.group_expert);
  count(a.group_start, b.group_start);
  count(a.entry_row, b.entry_row);
  count(a.entry_weight, b.entry_weight);
  count(a.row_entries, b.row_entries);
  return bad;
}

int64_t bits_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return bad;
}

// A scratch for entries of `ew`'s shape (kMaxWindowRows * k entries, as the decoder sizes it),
// every byte 0xFF (stale).
Status alloc_scratch(const ExpertWeights& ew, int k, DeviceBuffer& d, ExpertScratch& scratch, ExpertScratchLayout& l) {
  scratch.cap_entries = kMaxWindowRows * k;
  l = expert_scratch_layout(ew, scratch.cap_entries);
  STRATA_TRY(alloc_filled(d, static_cast<size_t>(l.bytes), 0xFF));
  scratch.base = d.get();
  scratch.bytes = l.bytes;
  return Status::ok_status();
}

// route_and_group: ids exact and weights (1e-6) against reference::route per row, with planted
// ties; the grouping identical (weights bit for bit) to group_expert_entries' of the kernel's own
// ids/weights and to the host's grouping of them. The logits sit in rows of n + 1 (the router_gi
// layout) whose extra column is NaN, so a read past the row's n shows. Row nan_row (>= 0) gets
// one NaN logit, which makes every p of that row NaN: it must still get k distinct experts, all
// tied, hence 0..k-1, with NaN weights (reference::top_k has no defined order there), and leave
// the other rows alone.
Status run_route_group_case(const ParityOptions& opt, Reporter& rep, CaseResult r, int T, int n, int k, int nan_row) {
  const int nent = T * k;
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = router_logits_with_ties(opt, r.line, T, n, k);
  if (nan_row >= 0) logits[static_cast<size_t>(nan_row * n) + case_seed(opt.seed, r.line + " nan") % static_cast<uint64_t>(n)] = qnan;
  std::vector<int32_t> want_ids;
  std::vector<float> want_w;
  for (int t = 0; t < T; ++t) {
    if (t == nan_row) {
      for (int i = 0; i < k; ++i) {
        want_ids.push_back(i);
        want_w.push_back(qnan);
      }
      continue;
    }
    const reference::Routing ro = reference::route({logits.data() + static_cast<int64_t>(t) * n, static_cast<size_t>(n)}, k);
    want_ids.insert(want_ids.end(), ro.experts.begin(), ro.experts.end());
    want_w.insert(want_w.end(), ro.weights.begin(), ro.weights.end());
  }
  const int64_t stride = n + 1;
  std::vector<float> strided(static_cast<size_t>(T * stride), qnan);
  for (int t = 0; t < T; ++t) std::copy_n(logits.data() + static_cast<int64_t>(t) * n, n, strided.data() + t * stride);
  ExpertWeights ew;  // the scratch layout's shape only: no weights are read
  ew.n_expert = n;
  ew.n_ff = 32;
  ew.n_embd = 32;
  DeviceBuffer dl, di, dw, dfused, dold;
  ExpertScratch fused, old;
  ExpertScratchLayout lay;
  STRATA_TRY(upload(dl, strided));
  STRATA_TRY(alloc_filled(di, static_cast<size_t>(nent) * sizeof(int32_t), 0xFF));
  STRATA_TRY(alloc_poisoned(dw, static_cast<size_t>(nent)));
  STRATA_TRY(alloc_scratch(ew, k, dfused, fused, lay));
  STRATA_TRY(alloc_scratch(ew, k, dold, old, lay));
  const auto call = [&] {
    return route_and_group(dl.get<float>(), stride, T, k, ew, fused, di.get<int32_t>(), dw.get<float>(), nullptr);
  };
  auto ran = run_call(r, rep, call);
  if (!ran) return ran.status();
  if (!*ran) return Status::ok_status();
  auto ran_old = run_call(r, rep, [&] { return group_expert_entries(ew, di.get<int32_t>(), dw.get<float>(), T, k, old, nullptr); });
  if (!ran_old) return ran_old.status();
  if (!*ran_old) return Status::ok_status();
  std::vector<int32_t> ids;
  std::vector<float> w;
  STRATA_TRY(download(ids, di.get(), static_cast<size_t>(nent)));
  STRATA_TRY(download(w, dw.get(), static_cast<size_t>(nent)));
  Grouping g_fused, g_old;
  STRATA_TRY(read_grouping(dfused, lay, nent, g_fused));
  STRATA_TRY(read_grouping(dold, lay, nent, g_old));
  int64_t id_mismatch = 0, nan_mismatch = 0;
  std::vector<float> got_num, want_num;  // the weights of the rows with numbers
  for (size_t i = 0; i < ids.size(); ++i) {
    id_mismatch += ids[i] != want_ids[i];
    if (std::isnan(want_w[i])) {
      nan_mismatch += !std::isnan(w[i]);
    } else {
      got_num.push_back(w[i]);
      want_num.push_back(want_w[i]);
    }
  }
  const Diff d = diff(got_num.data(), want_num.data(), got_num.size());
  const int64_t vs_old = grouping_mismatch(g_fused, g_old);
  const int64_t vs_host = grouping_mismatch(g_fused, host_grouping(want_ids, w, k));
  const bool ok = id_mismatch == 0 && nan_mismatch == 0 && d.finite && d.rel <= kRouteGroupRelTol && vs_old == 0 && vs_host == 0;
  r.status = ok ? "OK" : "FAIL";
  r.detail = fmt::format("ids_mismatch={} {} grouping_vs_group_entries={} grouping_vs_host={} groups={}", id_mismatch, d.text(),
                         vs_old, vs_host, g_fused.n_groups);
  if (nan_row >= 0) r.detail += fmt::format(" nan_row_weights_not_nan={}", nan_mismatch);
  r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"ids_mismatch", id_mismatch}, {"tol", kRouteGroupRelTol},
               {"grouping_vs_old", vs_old}, {"grouping_vs_host", vs_host}, {"nan_mismatch", nan_mismatch}};
  STRATA_TRY(add_ms(opt, r, call));
  rep.add(std::move(r));
  return Status::ok_status();
}

// Rows wider than the router's warp holds in registers (512 experts, 16 per lane): route_and_group
// and router_topk refuse them with an error that names the limit, before any launch.
Status run_router_refusal_cases(Reporter& rep) {
  const int T = 1, n = 513, k = 10;
  const auto judge_refusal = [&](CaseResult r, const Status& st) {
    const bool names_limit = !st.ok() && st.message().find("512") != std::string::npos;
    r.status = names_limit ? "OK" : "FAIL";
    r.detail = st.ok() ? "accepted (expected an error)" : st.message();
    rep.add(std::move(r));
  };
  const nlohmann::json params = {{"T", T}, {"n_expert", n}, {"k", k}};
  CaseResult rg = make_case("route_and_group", fmt::format("moe/route_and_group(T={}, n_expert={}, k={}): refused", T, n, k), params);
  CaseResult rt = make_case("router_topk", fmt::format("router_topk(T={}, n_expert={}, k={}): refused", T, n, k), params);
  const bool want_rg = rep.wanted(rg.line), want_rt = rep.wanted(rt.line);
  if (!want_rg && !want_rt) return Status::ok_status();
  ExpertWeights ew;
  ew.n_expert = n;
  ew.n_ff = 32;
  ew.n_embd = 32;
  DeviceBuffer dl, di, dw, dsc;
  ExpertScratch scratch;
  ExpertScratchLayout lay;
  STRATA_TRY(alloc_poisoned(dl, static_cast<size_t>(T * n)));
  STRATA_TRY(alloc_filled(di, static_cast<size_t>(T * k) * sizeof(int32_t), 0xFF));
  STRATA_TRY(alloc_poisoned(dw, static_cast<size_t>(T * k)));
  STRATA_TRY(alloc_scratch(ew, k, dsc, scratch, lay));
  if (want_rg)
    judge_refusal(std::move(rg), route_and_group(dl.get<float>(), n, T, k, ew, scratch, di.get<int32_t>(), dw.get<float>(), nullptr));
  if (want_rt) judge_refusal(std::move(rt), router_topk(dl.get<float>(), T, n, k, di.get<int32_t>(), dw.get<float>(), nullptr));
  return Status::ok_status();
}

Status run_route_group_cases(const ParityOptions& opt, Reporter& rep) {
  struct Shape {
    int n_expert, k;
  };
  const Shape shapes[] = {{512, 10}, {500, 10}, {16, 4}, {100, 7}, {40, 10}, {33, 32}};
  for (const Shape& sh : shapes) {
    const int n = sh.n_expert, k = sh.k;
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      CaseResult r = make_case("route_and_group", fmt::format("moe/route_and_group(T={}, n_expert={}, k={})", T, n, k),
                               {{"T", T}, {"n_expert", n}, {"k", k}});
      if (!rep.wanted(r.line)) continue;
      STRATA_TRY(run_route_group_case(opt, rep, std::move(r), T, n, k, -1));
    }
    for (int T : {1, 3, 8}) {
      const int nan_row = T / 2;
      CaseResult r = make_case("route_and_group", fmt::format("moe/route_and_group(T={}, n_expert={}, k={}, nan_row={})", T, n, k, nan_row),
                               {{"T", T}, {"n_expert", n}, {"k", k}, {"nan_row", nan_row}});
      if (!rep.wanted(r.line)) continue;
      STRATA_TRY(run_route_group_case(opt, rep, std::move(r), T, n, k, nan_row));
    }
  }
  return run_router_refusal_cases(rep);
}

// expert_combine_shared over random entry outputs and a grouping of random routes: against the
// host (routed sum in ascending expert id, then + s * sigmoid(gate)) at 1e-5, and bit for bit
// against expert_combine followed by shared_gate_add (the path it replaces); with the wide
// combine, the residual bit for bit as reference::hc_combine. The gate logits sit
// at column 1 of rows of 3 (a strided gate, as router_gi's output has it).
Status run_combine_shared_cases(const ParityOptions& opt, Reporter& rep) {
  struct Shape {
    int n_expert, k, H;
  };
  const Shape shapes[] = {{64, 10, 2560}, {16, 4, 100}};
  for (const Shape& sh : shapes)
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      CaseResult r = make_case("expert_combine_shared",
                               fmt::format("moe/expert_combine_shared(T={}, n_expert={}, k={}, H={})", T, sh.n_expert, sh.k, sh.H),
                               {{"T", T}, {"n_expert", sh.n_expert}, {"k", sh.k}, {"H", sh.H}});
      if (!rep.wanted(r.line)) continue;
      const int k = sh.k, H = sh.H, nent = T * k;
      const uint64_t seed = case_seed(opt.seed, r.line);
      std::vector<int> pool(static_cast<size_t>(sh.n_expert));
      std::iota(pool.begin(), pool.end(), 0);
      const Routing ro = make_routing(pool, T, k, seed);
      const std::vector<float> out = random_normal(seed + 1, static_cast<size_t>(nent * H));
      const std::vector<float> sh_out = random_normal(seed + 2, static_cast<size_t>(T * H));
      const int64_t gate_stride = 3;
      std::vector<float> gl = random_normal(seed + 3, static_cast<size_t>(T * gate_stride), 2.0f);
      ExpertWeights ew;
      ew.n_expert = sh.n_expert;
      ew.n_ff = 32;
      ew.n_embd = H;
      DeviceBuffer dids, dw, dsc, ds, dg, dy_new, dy_old;
      ExpertScratch scratch;
      ExpertScratchLayout lay;
      STRATA_TRY(upload(dids, ro.ids));
      STRATA_TRY(upload(dw, ro.weights));
      STRATA_TRY(alloc_scratch(ew, k, dsc, scratch, lay));
      PARITY_CUDA(cudaMemcpy(dsc.get<uint8_t>() + lay.out, out.data(), out.size() * sizeof(float), cudaMemcpyHostToDevice));
      STRATA_TRY(upload(ds, sh_out));
      STRATA_TRY(upload(dg, gl));
      STRATA_TRY(alloc_poisoned(dy_new, static_cast<size_t>(T * H)));
      STRATA_TRY(alloc_poisoned(dy_old, static_cast<size_t>(T * H)));
      const float* gate = dg.get<float>() + 1;
      auto grouped = run_call(r, rep, [&] { return group_expert_entries(ew, dids.get<int32_t>(), dw.get<float>(), T, k, scratch, nullptr); });
      if (!grouped) return grouped.status();
      if (!*grouped) continue;
      const auto call = [&] {
        return expert_combine_shared(ew, T, k, scratch, ds.get<float>(), gate, gate_stride, dy_new.get<float>(), nullptr);
      };
      auto ran = run_call(r, rep, call);
      if (!ran) return ran.status();
      if (!*ran) continue;
      auto ran_old = run_call(r, rep, [&] {
        STRATA_TRY(expert_combine(ew, T, k, scratch, dy_old.get<float>(), nullptr));
        return shared_gate_add(dy_old.get<float>(), ds.get<float>(), gate, gate_stride, T, H, nullptr);
      });
      if (!ran_old) return ran_old.status();
      if (!*ran_old) continue;
      std::vector<float> y_new, y_old;
      STRATA_TRY(download(y_new, dy_new.get(), static_cast<size_t>(T * H)));
      STRATA_TRY(download(y_old, dy_old.get(), static_cast<size_t>(T * H)));
      // The host: out rows are in the device's entry order, (expert, index).
      std::vector<int> order(static_cast<size_t>(nent));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int a, int b) { return ro.ids[a] != ro.ids[b] ? ro.ids[a] < ro.ids[b] : a < b; });
      std::vector<float> want = routed_sum(out, order, ro, k, T, H);
      for (int t = 0; t < T; ++t) {
        const float g = reference::sigmoid(gl[static_cast<size_t>(t * gate_stride + 1)]);
        for (int j = 0; j < H; ++j) want[t * H + j] += sh_out[t * H + j] * g;
      }
      const Diff d = diff(y_new.data(), want.data(), want.size());
      const int64_t bits = bits_mismatch(y_new, y_old);
      // The wide combine in the same launch, in place and out of place (S = 3 streams): y's bits
      // unchanged, the residual bit for bit reference::hc_combine of that y.
      const int S = 3;
      const std::vector<float> x = random_normal(seed + 4, static_cast<size_t>(T * S * H));
      const std::vector<float> alpha = random_normal(seed + 5, static_cast<size_t>(T * S));
      std::vector<float> x_want = x;
      reference::hc_combine(x_want, y_new, alpha, S, H, T);
      DeviceBuffer dx, dx_out, dalpha, dy_wide;
      STRATA_TRY(upload(dx, x));
      STRATA_TRY(upload(dalpha, alpha));
      STRATA_TRY(alloc_poisoned(dx_out, x.size()));
      STRATA_TRY(alloc_poisoned(dy_wide, static_cast<size_t>(T * H)));
      int64_t wide_bits = 0;
      for (bool in_place : {false, true}) {
        WideCombine wide;
        wide.x = dx.get<float>();
        wide.alpha = dalpha.get<float>();
        wide.S = S;
        wide.out = in_place ? dx.get<float>() : dx_out.get<float>();
        STRATA_TRY(expert_combine_shared(ew, T, k, scratch, ds.get<float>(), gate, gate_stride, dy_wide.get<float>(),
                                         nullptr, &wide));
        std::vector<float> got_x, got_y, x_in;
        STRATA_TRY(download(got_x, in_place ? dx.get() : dx_out.get(), x.size()));
        STRATA_TRY(download(got_y, dy_wide.get(), static_cast<size_t>(T * H)));
        STRATA_TRY(download(x_in, dx.get(), x.size()));
        wide_bits += bits_mismatch(got_x, x_want) + bits_mismatch(got_y, y_new) + (in_place ? 0 : bits_mismatch(x_in, x));
      }
      const bool ok = d.finite && d.rel <= kMoeRelTol && bits == 0 && wide_bits == 0;
      r.status = ok ? "OK" : "FAIL";
      r.detail = fmt::format("{} bits_vs_combine_then_gate_add={} wide_combine_bits_differing={}", d.text(), bits, wide_bits);
      r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"tol", kMoeRelTol}, {"bits_vs_old", bits}, {"wide_bits", wide_bits}};
      STRATA_TRY(add_ms(opt, r, call));
      rep.add(std::move(r));
    }
  return Status::ok_status();
}

// The experts of a grouped case: min(g.pool, n_expert) distinct random experts, the only ones
// holding weights, and their gate/up and down matrices; `tag` names the case family in the seeds.
struct PooledExperts {
  std::vector<int> pool;
  Experts gu, dn;
};

Status make_pooled_experts(const ParityOptions& opt, const char* tag, const Geometry& g, Type gate, Type down,
                           PooledExperts& px) {
  std::mt19937_64 prng(case_seed(opt.seed, fmt::format("{} pool {}", tag, g.n_expert)));
  while (static_cast<int>(px.pool.size()) < std::min(g.pool, g.n_expert)) {
    const int e = static_cast<int>(prng() % g.n_expert);
    if (std::find(px.pool.begin(), px.pool.end(), e) == px.pool.end()) px.pool.push_back(e);
  }
  STRATA_TRY(make_experts(gate, g, 2 * g.n_ff, g.n_embd, !g.fused, px.pool,
                          case_seed(opt.seed, fmt::format("{} gate_up {}", tag, type_name(gate))), px.gu));
  return make_experts(down, g, g.n_embd, g.n_ff, false, px.pool,
                      case_seed(opt.seed, fmt::format("{} down {}", tag, type_name(down))), px.dn);
}

// A window of a grouped case on the device: T rows of router logits (the pool's experts lifted
// by 8, so the routes land on experts with weights), u (seed + 1) with its q8_1 form, and the
// ids / weights buffers route_and_group writes (poisoned).
struct GroupedWindow {
  DeviceBuffer logits, u, u_q8, ids, weights;
  Act act;
};

Status make_grouped_window(uint64_t seed, const Geometry& g, const std::vector<int>& pool, int T, int k,
                           GroupedWindow& gw) {
  const int64_t H = g.n_embd;
  std::vector<float> logits = random_normal(seed, static_cast<size_t>(T * g.n_expert));
  for (int t = 0; t < T; ++t)
    for (int e : pool) logits[static_cast<size_t>(t * g.n_expert + e)] += 8.0f;
  const std::vector<float> u = random_normal(seed + 1, static_cast<size_t>(T * H));
  STRATA_TRY(upload(gw.logits, logits));
  STRATA_TRY(upload(gw.u, u));
  const int64_t q8s = q8_stride_for(H);
  STRATA_TRY(gw.u_q8.alloc(static_cast<size_t>(q8s * T)));
  STRATA_TRY(quantize_q8_1(gw.u.get<float>(), H, H, T, gw.u_q8.get(), q8s));
  STRATA_TRY(alloc_filled(gw.ids, static_cast<size_t>(T * k) * sizeof(int32_t), 0xFF));
  STRATA_TRY(alloc_poisoned(gw.weights, static_cast<size_t>(T * k)));
  gw.act.f32 = gw.u.get<float>();
  gw.act.f32_stride = H;
  gw.act.q8 = gw.u_q8.get();
  gw.act.q8_stride = q8s;
  gw.act.cols = H;
  gw.act.T = T;
  return Status::ok_status();
}

// native_expert_grouped_pregrouped on route_and_group's grouping against native_expert_grouped on
// the same ids/weights (its own grouping launch): y and every entry's down output bit for bit.
// Routes come from random logits lifted for the pool's experts (the ones holding weights).
Status run_pregrouped_cases(const ParityOptions& opt, Reporter& rep) {
  struct Case {
    Geometry g;
    Type gate, down;
  };
  const Case cases[] = {{{512, 640, 2560, 24, false, false}, Type::IQ3_XXS, Type::Q2_0},
                        {{16, 64, 256, 16, true, true}, Type::Q4_K, Type::Q8_0},
                        {{16, 64, 256, 16, true, true}, Type::F32, Type::F32}};
  for (const Case& c : cases) {
    const Geometry& g = c.g;
    const int k = std::min(10, g.n_expert);
    std::vector<std::string> lines;
    for (int T = 1; T <= kMaxWindowRows; ++T)
      lines.push_back(fmt::format("moe/native_expert_grouped_pregrouped(gate_up={}, down={}, n_expert={}, n_ff={}, n_embd={}, T={}{})",
                                  type_name(c.gate), type_name(c.down), g.n_expert, g.n_ff, g.n_embd, T, g.fused ? ", fused" : ""));
    bool any = false;
    for (const auto& l : lines) any = any || rep.wanted(l);
    if (!any) continue;
    PooledExperts px;
    STRATA_TRY(make_pooled_experts(opt, "pregrouped", g, c.gate, c.down, px));
    const ExpertWeights w = expert_weights(g, px.gu, px.dn);
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      CaseResult r = make_case("native_expert_grouped_pregrouped", lines[static_cast<size_t>(T - 1)],
                               {{"gate_up", type_name(c.gate)}, {"down", type_name(c.down)}, {"n_expert", g.n_expert}, {"T", T}, {"k", k}});
      if (!rep.wanted(r.line)) continue;
      const int64_t H = g.n_embd;
      GroupedWindow gw;
      STRATA_TRY(make_grouped_window(case_seed(opt.seed, r.line), g, px.pool, T, k, gw));
      DeviceBuffer dsa, dsb, dya, dyb;
      ExpertScratch sa, sb;
      ExpertScratchLayout lay;
      STRATA_TRY(alloc_scratch(w, k, dsa, sa, lay));
      STRATA_TRY(alloc_scratch(w, k, dsb, sb, lay));
      STRATA_TRY(alloc_poisoned(dya, static_cast<size_t>(T * H)));
      STRATA_TRY(alloc_poisoned(dyb, static_cast<size_t>(T * H)));
      int32_t* ids = gw.ids.get<int32_t>();
      float* weights = gw.weights.get<float>();
      auto ran = run_call(r, rep, [&] {
        STRATA_TRY(route_and_group(gw.logits.get<float>(), g.n_expert, T, k, w, sa, ids, weights, nullptr));
        STRATA_TRY(native_expert_grouped_pregrouped(w, gw.act, k, sa, dya.get<float>(), nullptr));
        return native_expert_grouped(w, gw.act, ids, weights, k, sb, dyb.get<float>(), nullptr);
      });
      if (!ran) return ran.status();
      if (!*ran) continue;
      std::vector<float> ya, yb, oa, ob;
      STRATA_TRY(download(ya, dya.get(), static_cast<size_t>(T * H)));
      STRATA_TRY(download(yb, dyb.get(), static_cast<size_t>(T * H)));
      STRATA_TRY(download(oa, dsa.get<uint8_t>() + lay.out, static_cast<size_t>(T * k * H)));
      STRATA_TRY(download(ob, dsb.get<uint8_t>() + lay.out, static_cast<size_t>(T * k * H)));
      const int64_t y_bits = bits_mismatch(ya, yb), out_bits = bits_mismatch(oa, ob);
      bool finite = true;
      for (float v : ya) finite = finite && std::isfinite(v);
      const bool ok = finite && y_bits == 0 && out_bits == 0;
      r.status = ok ? "OK" : "FAIL";
      r.detail = fmt::format("y_bits_mismatch={} out_bits_mismatch={}{}", y_bits, out_bits, finite ? "" : " non-finite");
      r.metrics = {{"y_bits", y_bits}, {"out_bits", out_bits}};
      rep.add(std::move(r));
    }
  }
  return Status::ok_status();
}

// expert_gate_up_grouped + expert_down_combine (the decoder's path: where grouped_direct_kernel
// serves the down call, the routed sum runs in its launch's tail) against expert_mlp_grouped +
// expert_combine_shared on the same grouping: y, the wide residual (S = 4, out of place) and
// every entry's down output bit for bit; run twice on the same tile counts (their reset), which
// must read 0 after each run. Without a shared expert (s null) too; the small Q4_K case and T > 4
// take the separate combine launch (no direct kernel), so both forms are covered.
Status run_down_combine_cases(const ParityOptions& opt, Reporter& rep) {
  struct Case {
    Geometry g;
    Type gate, down;
    bool shared;
  };
  const Case cases[] = {{{512, 640, 2560, 24, false, false}, Type::IQ3_XXS, Type::Q2_0, true},
                        {{512, 640, 2560, 24, false, false}, Type::IQ3_XXS, Type::IQ4_NL, true},
                        {{512, 640, 2560, 24, false, false}, Type::IQ3_XXS, Type::IQ4_NL, false},
                        {{16, 64, 256, 16, true, true}, Type::Q4_K, Type::Q8_0, true}};
  for (const Case& c : cases) {
    const Geometry& g = c.g;
    const int k = std::min(10, g.n_expert);
    std::vector<std::string> lines;
    for (int T = 1; T <= kMaxWindowRows; ++T)
      lines.push_back(fmt::format("moe/expert_down_combine(gate_up={}, down={}, n_expert={}, n_ff={}, n_embd={}, T={}{})",
                                  type_name(c.gate), type_name(c.down), g.n_expert, g.n_ff, g.n_embd, T,
                                  c.shared ? ", shared" : ""));
    bool any = false;
    for (const auto& l : lines) any = any || rep.wanted(l);
    if (!any) continue;
    PooledExperts px;
    STRATA_TRY(make_pooled_experts(opt, "down_combine", g, c.gate, c.down, px));
    const ExpertWeights w = expert_weights(g, px.gu, px.dn);
    const int S = 4;
    const int cap = static_cast<int>(g.n_embd);
    DeviceBuffer dtiles;
    STRATA_TRY(alloc_filled(dtiles, static_cast<size_t>(cap) * sizeof(uint32_t), 0));
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      CaseResult r = make_case("expert_down_combine", lines[static_cast<size_t>(T - 1)],
                               {{"gate_up", type_name(c.gate)}, {"down", type_name(c.down)}, {"n_expert", g.n_expert},
                                {"T", T}, {"k", k}, {"shared", c.shared}});
      if (!rep.wanted(r.line)) continue;
      const int64_t H = g.n_embd;
      const uint64_t seed = case_seed(opt.seed, r.line);
      GroupedWindow gw;
      STRATA_TRY(make_grouped_window(seed, g, px.pool, T, k, gw));
      const std::vector<float> sh = random_normal(seed + 2, static_cast<size_t>(T * H));
      const std::vector<float> gl = random_normal(seed + 3, static_cast<size_t>(T), 2.0f);
      const std::vector<float> x = random_normal(seed + 4, static_cast<size_t>(T * S * H));
      const std::vector<float> alpha = random_normal(seed + 5, static_cast<size_t>(T * S));
      DeviceBuffer dsa, dsb, dya, dyb, ds, dg, dx, dalpha, dxa, dxb;
      ExpertScratch sa, sb;
      ExpertScratchLayout lay;
      STRATA_TRY(upload(ds, sh));
      STRATA_TRY(upload(dg, gl));
      STRATA_TRY(upload(dx, x));
      STRATA_TRY(upload(dalpha, alpha));
      STRATA_TRY(alloc_scratch(w, k, dsa, sa, lay));
      STRATA_TRY(alloc_scratch(w, k, dsb, sb, lay));
      STRATA_TRY(alloc_poisoned(dya, static_cast<size_t>(T * H)));
      STRATA_TRY(alloc_poisoned(dxa, x.size()));
      const Act& act = gw.act;
      int32_t* ids = gw.ids.get<int32_t>();
      float* weights = gw.weights.get<float>();
      const float* s_ptr = c.shared ? ds.get<float>() : nullptr;
      const float* g_ptr = c.shared ? dg.get<float>() : nullptr;
      WideCombine wa;
      wa.x = dx.get<float>();
      wa.alpha = dalpha.get<float>();
      wa.S = S;
      wa.out = dxa.get<float>();
      auto ran = run_call(r, rep, [&] {
        STRATA_TRY(route_and_group(gw.logits.get<float>(), g.n_expert, T, k, w, sa, ids, weights, nullptr));
        STRATA_TRY(route_and_group(gw.logits.get<float>(), g.n_expert, T, k, w, sb, ids, weights, nullptr));
        STRATA_TRY(expert_mlp_grouped(w, act, k, sa, nullptr));
        if (c.shared) return expert_combine_shared(w, T, k, sa, s_ptr, g_ptr, 1, dya.get<float>(), nullptr, &wa);
        STRATA_TRY(expert_combine(w, T, k, sa, dya.get<float>(), nullptr));
        // expert_combine has no wide form: the residual as reference::hc_combine of that y.
        return Status::ok_status();
      });
      if (!ran) return ran.status();
      if (!*ran) continue;
      std::vector<float> ya, xa, oa;
      STRATA_TRY(download(ya, dya.get(), static_cast<size_t>(T * H)));
      if (c.shared) {
        STRATA_TRY(download(xa, dxa.get(), x.size()));
      } else {
        xa = x;
        reference::hc_combine(xa, ya, alpha, S, static_cast<int>(H), T);
      }
      STRATA_TRY(download(oa, dsa.get<uint8_t>() + lay.out, static_cast<size_t>(T * k * H)));
      int64_t y_bits = 0, x_bits = 0, out_bits = 0, counts_left = 0;
      bool finite = true;
      for (float v : ya) finite = finite && std::isfinite(v);
      bool reported = false;  // run_call added a FAIL line (and took r)
      for (int rep_i = 0; rep_i < 2 && !reported; ++rep_i) {
        STRATA_TRY(alloc_poisoned(dyb, static_cast<size_t>(T * H)));
        STRATA_TRY(alloc_poisoned(dxb, x.size()));
        WideCombine wb = wa;
        wb.out = dxb.get<float>();
        auto ran_b = run_call(r, rep, [&] {
          STRATA_TRY(expert_gate_up_grouped(w, act, k, sb, nullptr));
          return expert_down_combine(w, T, k, sb, s_ptr, g_ptr, 1, dyb.get<float>(), &wb, dtiles.get<uint32_t>(), cap,
                                     nullptr);
        });
        if (!ran_b) return ran_b.status();
        reported = !*ran_b;
        if (reported) break;
        std::vector<float> yb, xb, ob;
        std::vector<uint32_t> tiles;
        STRATA_TRY(download(yb, dyb.get(), static_cast<size_t>(T * H)));
        STRATA_TRY(download(xb, dxb.get(), x.size()));
        STRATA_TRY(download(ob, dsb.get<uint8_t>() + lay.out, static_cast<size_t>(T * k * H)));
        STRATA_TRY(download(tiles, dtiles.get(), static_cast<size_t>(cap)));
        y_bits += bits_mismatch(ya, yb);
        x_bits += bits_mismatch(xa, xb);
        out_bits += bits_mismatch(oa, ob);
        for (uint32_t v : tiles) counts_left += v != 0;
      }
      if (reported) continue;
      const bool ok = finite && y_bits == 0 && x_bits == 0 && out_bits == 0 && counts_left == 0;
      r.status = ok ? "OK" : "FAIL";
      r.detail = fmt::format("y_bits_mismatch={} wide_bits_mismatch={} out_bits_mismatch={} tile_counts_left={}{}", y_bits,
                             x_bits, out_bits, counts_left, finite ? "" : " non-finite");
      r.metrics = {{"y_bits", y_bits}, {"wide_bits", x_bits}, {"out_bits", out_bits}, {"tile_counts_left", counts_left}};
      rep.add(std::move(r));
    }
  }
  return Status::ok_status();
}

}  // namespace

// ---- the shared expert's SwiGLU and down in one launch ---------------------------------------------

// shared_down_fused against the reference: h = silu(gate) * up, its q8_1 form, down in double.
// The h the launch leaves and its q8_1 bytes are checked as swiglu's are.
Status run_shared_down_cases(const ParityOptions& opt, Reporter& rep) {
  struct Shape {
    int n_ff, n_embd;
  };
  for (const Shape sh : {Shape{640, 2560}, Shape{256, 512}})
    for (Type t : {Type::Q5_1, Type::IQ4_NL, Type::Q2_0})
      for (int T : {1, 2, 4}) {
        const int n = sh.n_ff;
        CaseResult r = make_case("shared_down_fused",
                                 fmt::format("moe/shared_down_fused(down={}, n_ff={}, n_embd={}, T={})", type_name(t), n, sh.n_embd, T),
                                 {{"T", T}, {"n_ff", n}, {"n_embd", sh.n_embd}});
        if (!rep.wanted(r.line)) continue;
        const Geometry g{1, n, sh.n_embd, 1, false, false};
        Experts dn;
        STRATA_TRY(make_experts(t, g, sh.n_embd, n, false, {0}, case_seed(opt.seed, r.line), dn));
        DTensor down;
        down.type = t;
        down.data = dn.d0.get();
        down.rows = sh.n_embd;
        down.cols = n;
        down.row_bytes = dn.row_bytes;
        if (!shared_down_fused_supports(down, T)) {
          r.status = "FAIL";
          r.detail = "shared_down_fused_supports refused a type the decoder relies on";
          rep.add(std::move(r));
          continue;
        }
        const std::vector<float> gu = random_normal(case_seed(opt.seed, r.line + " gate_up"), static_cast<size_t>(T) * 2 * n, 3.0f);
        std::vector<float> h_ref(static_cast<size_t>(T) * n);
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < n; ++j) h_ref[i * n + j] = reference::silu(gu[i * 2 * n + j]) * gu[i * 2 * n + n + j];
        const std::vector<float> want = expert_matvec(dn, std::vector<int>(static_cast<size_t>(T), 0), reference_view(h_ref, T, n, true));
        int32_t words[4];
        shared_grouping_words(T, words);
        const int64_t q8_stride = (q8_1_row_bytes(n) + 15) / 16 * 16;
        DeviceBuffer dgu, dgroup, ds, dh, dq;
        STRATA_TRY(upload(dgu, gu));
        STRATA_TRY(upload(dgroup, std::vector<int32_t>(words, words + 4)));
        STRATA_TRY(alloc_poisoned(ds, want.size()));
        STRATA_TRY(alloc_poisoned(dh, h_ref.size()));
        STRATA_TRY(alloc_filled(dq, static_cast<size_t>(q8_stride * T), 0xFF));
        const auto call = [&] {
          return shared_down_fused(down, dgu.get<float>(), T, dgroup.get<int32_t>(), ds.get<float>(), dh.get<float>(), dq.get(),
                                   q8_stride, nullptr);
        };
        auto ran = run_call(r, rep, call);
        if (!ran) return ran.status();
        if (!*ran) continue;
        std::vector<float> y, h;
        std::vector<uint8_t> q;
        STRATA_TRY(download(y, ds.get(), want.size()));
        STRATA_TRY(download(h, dh.get(), h_ref.size()));
        STRATA_TRY(download(q, dq.get(), static_cast<size_t>(q8_stride * T)));
        int64_t bad_bytes = 0;
        std::vector<uint8_t> qw(static_cast<size_t>(q8_1_row_bytes(n)));
        for (int i = 0; i < T; ++i) {
          quant::quantize_row_q8_1(h.data() + static_cast<size_t>(i) * n, qw.data(), n);
          for (size_t b = 0; b < qw.size(); ++b) bad_bytes += q[i * q8_stride + b] != qw[b];
        }
        const Diff dh_diff = diff(h.data(), h_ref.data(), h.size());
        const Diff d = diff(y.data(), want.data(), y.size());
        r.status = d.finite && d.rel < kMoeRelTol && dh_diff.finite && dh_diff.rel < kMoeRelTol && bad_bytes == 0 ? "OK" : "FAIL";
        r.detail = fmt::format("{} h_rel={:.3g} q8_bad_bytes={}", d.text(), dh_diff.rel, bad_bytes);
        r.metrics = {{"rel", d.rel}, {"max_abs", d.max_abs}, {"h_rel", dh_diff.rel}, {"q8_bad_bytes", bad_bytes}};
        STRATA_TRY(add_ms(opt, r, call));
        rep.add(std::move(r));
      }
  return Status::ok_status();
}

Status run_moe_cases(const ParityOptions& opt, Reporter& rep) {
  STRATA_TRY(run_router_cases(opt, rep));
  STRATA_TRY(run_swiglu_cases(opt, rep));
  STRATA_TRY(run_shared_gate_cases(opt, rep));
  STRATA_TRY(run_shared_down_cases(opt, rep));
  STRATA_TRY(run_grouped_cases(opt, rep));
  STRATA_TRY(run_route_group_cases(opt, rep));
  STRATA_TRY(run_combine_shared_cases(opt, rep));
  STRATA_TRY(run_pregrouped_cases(opt, rep));
  STRATA_TRY(run_down_combine_cases(opt, rep));
  return Status::ok_status();
}

}  // namespace strata::cuda
