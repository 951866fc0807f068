// Parity cases of the Gated DeltaNet decode kernels (src/cuda/gdn.h) against the reference:
//   gdn_conv(..)        a sequence of windows, each gdn_conv then gdn_conv_commit(n) of its one
//                       layer with n <= T, against reference::causal_conv_silu on the host's copy
//                       of the history; the committed history must equal the host's bit for bit
//   gdn_conv_commit(layers=..)  several layers' histories in one launch, each moved bit for bit
//                       and its rows past K - 2 untouched
//   gdn_recurrent(..)   against reference::l2_norm / sigmoid / softplus and reference::gdn_recurrent
//                       from a random non-zero state, in place and out of place (out and state)
//   gdn_gated_norm(..)  against reference::rms_norm_gated per (row, head)
//   gdn_recurrent(.., keep)  b and a as the slices of one [T, 2 * n_v_heads] output (the
//                       concatenated beta|alpha projection), with b_keep/a_keep: out and state as
//                       above, and the kept rows equal to the b/a columns bit for bit
//   gdn_conv_recurrent(..)  the fused conv + recurrence of the decoder: bit-equal to gdn_conv then
//                       gdn_recurrent (out, state, c, history, kept b/a) and against the reference
//   gdn_gated_norm(.., q8_1)  z as a slice of the m|z output, and the fused q8_1 rows: f32 as
//                       above, the q8_1 bytes equal to quantize_q8_1 of the y the launch wrote
//   gdn_conv_recurrent(.., fused: norm)  the launch with the gated norm (y, y_q8) inside it,
//                       against the separate launches on the same inputs (gdn_conv_recurrent ->
//                       gdn_gated_norm): every output bit for bit (out, state, c, history, kept
//                       b/a, y, y_q8), and out, state and y against the reference
//   gdn_conv_recurrent(.., fused: gates)  b and a projected in the launch (GdnGateProjection,
//                       F32 / F16 / BF16 weights, u rows at a stride wider than k): the kept
//                       b/a against the host's dot products in double; every other output bit
//                       for bit equal to the same launch given those kept b/a as inputs; out,
//                       state and y against the reference fed with the host's b/a
//   gdn_conv_recurrent(refusals)  arguments of the GdnConvRecurrentArgs form the launch cannot
//                       take return an error
// With opt.bench each case is timed (a CUDA graph of launches, median of opt.bench_reps); the
// recurrent cases also report the state's GB/s (bytes read + written per launch / time), the
// states cycling through copies several times the L2 so that they come from DRAM.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "gdn.h"
#include "linear.h"
#include "parity_harness.h"
#include "strata/reference/gdn.h"
#include "strata/reference/ops.h"
#include "strata/reference/thread_pool.h"
#include "strata/cuda/quantize.h"
#include "strata/quant/scalar.h"

namespace strata::cuda {
namespace {

// The kernels evaluate the reference's formulas in the same order in fp32, but sum in a fixed fp32
// order (warp trees, per-warp partials) where the reference sums in double: each 32..128-term dot
// product differs by ~1e-7..1e-6 relative, and the recurrence carries that over at most 8 rows
// without growth (|exp(g)| <= 1, k unit length). 1e-5 leaves a 10x margin over that.
constexpr double kGdnRelTol = 1e-5;

struct Geometry {
  int n_k_heads, n_v_heads, head_dim, conv_kernel;
};

GdnDims dims_of(const Geometry& g) {
  GdnDims d;
  d.n_k_heads = g.n_k_heads;
  d.n_v_heads = g.n_v_heads;
  d.head_dim = g.head_dim;
  d.conv_kernel = g.conv_kernel;
  return d;
}

// Median milliseconds of one launch: a graph of `launches` calls of launch(i, stream), timed as a
// whole and divided; median over `reps` graph launches after two warm-up ones. Capturing the
// launches into a graph also checks that they are capturable.
Result<double> median_launch_ms(int launches, int reps, const std::function<Status(int, cudaStream_t)>& launch) {
  cudaStream_t stream = nullptr;
  PARITY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  const auto body = [&]() -> Result<double> {
    PARITY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status st;
    for (int i = 0; i < launches && st.ok(); ++i) st = launch(i, stream);
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (!st.ok()) return st;
    PARITY_CUDA(end);
    PARITY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    PARITY_CUDA(cudaEventCreate(&start));
    PARITY_CUDA(cudaEventCreate(&stop));
    for (int w = 0; w < 2; ++w) PARITY_CUDA(cudaGraphLaunch(exec, stream));
    PARITY_CUDA(cudaStreamSynchronize(stream));
    std::vector<float> ms(static_cast<size_t>(std::max(reps, 1)));
    for (float& m : ms) {
      PARITY_CUDA(cudaEventRecord(start, stream));
      PARITY_CUDA(cudaGraphLaunch(exec, stream));
      PARITY_CUDA(cudaEventRecord(stop, stream));
      PARITY_CUDA(cudaEventSynchronize(stop));
      PARITY_CUDA(cudaEventElapsedTime(&m, start, stop));
    }
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(ms[ms.size() / 2]) / launches;
  };
  auto res = body();
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (start) cudaEventDestroy(start);
  if (stop) cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return res;
}

std::string diff_text(const char* what, const Diff& d) { return fmt::format("{} {}", what, d.text()); }
bool within(const Diff& d) { return d.finite && d.rel <= kGdnRelTol; }

// ---- gdn_conv + gdn_conv_commit ----------------------------------------------------------------------

struct Window {
  int T, n;  // rows, then rows accepted by the commit
};

Status run_conv_case(const ParityOptions& opt, Reporter& rep, const Geometry& g, int64_t m_stride) {
  const std::vector<Window> windows = {{1, 1}, {4, 2}, {8, 8}, {2, 0}, {3, 3}, {8, 5}};
  const GdnDims d = dims_of(g);
  const int K = d.conv_kernel;
  const int64_t C = d.conv_dim();
  CaseResult r;
  r.op = "gdn_conv";
  std::string seq;
  for (const Window& w : windows) seq += fmt::format("{}T{}/n{}", seq.empty() ? "" : " ", w.T, w.n);
  r.line = fmt::format("gdn_conv(conv_dim={}, K={}, m_stride={}, windows={})", C, K, m_stride, seq);
  r.params = {{"conv_dim", C}, {"K", K}, {"m_stride", m_stride}, {"windows", seq}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  const std::vector<float> w = random_normal(seed, static_cast<size_t>(C * K), 0.5f);
  std::vector<float> hist = random_normal(seed + 1, static_cast<size_t>(C * (K - 1)));  // a mid-sequence history
  DeviceBuffer dw, dhist, dm, dc;
  STRATA_TRY(upload(dw, w));
  STRATA_TRY(alloc_poisoned(dhist, static_cast<size_t>(C * (K - 1 + kMaxWindowRows))));
  STRATA_TRY(upload_into(dhist, hist));
  STRATA_TRY(alloc_poisoned(dm, static_cast<size_t>(m_stride * kMaxWindowRows)));
  STRATA_TRY(alloc_poisoned(dc, static_cast<size_t>(C * kMaxWindowRows)));
  DeviceBuffer dhists;  // the commit's table of one layer
  STRATA_TRY(upload(dhists, std::vector<float*>{dhist.get<float>()}));

  Diff worst_c;  // over all windows
  bool hist_exact = true;
  std::string hist_note;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const Window win = windows[wi];
    const std::vector<float> m = random_normal(seed + 2 + wi, static_cast<size_t>(m_stride * win.T));
    STRATA_TRY(upload_into(dm, m));
    PARITY_CUDA(cudaMemset(dc.get(), 0xFF, dc.bytes()));
    STRATA_TRY(gdn_conv(d, dm.get<float>(), m_stride, dw.get<float>(), dhist.get<float>(), win.T, dc.get<float>(), nullptr));
    STRATA_TRY(gdn_conv_commit(d, dhists.get<float*>(), 1, win.n, nullptr));
    std::vector<float> got_c, got_hist;
    STRATA_TRY(download_synced(got_c, dc, static_cast<size_t>(C * win.T)));
    STRATA_TRY(download_synced(got_hist, dhist, static_cast<size_t>(C * (K - 1))));

    // Reference: the conv over [history; x], then the history that ends at accepted row n.
    std::vector<float> x(static_cast<size_t>(C * win.T));
    for (int t = 0; t < win.T; ++t) std::copy_n(m.data() + t * m_stride, C, x.data() + t * C);
    std::vector<float> ext = hist;
    ext.insert(ext.end(), x.begin(), x.end());
    std::vector<float> want_c(x.size());
    std::vector<float> ref_hist = hist;  // causal_conv_silu advances its copy by all T rows
    reference::causal_conv_silu(w.data(), C, K, 1, ref_hist, x.data(), win.T, want_c.data());
    hist.assign(ext.begin() + win.n * C, ext.begin() + (win.n + K - 1) * C);

    const Diff dcw = diff(got_c.data(), want_c.data(), want_c.size());
    worst_c.rel = std::max(worst_c.rel, dcw.rel);
    worst_c.max_abs = std::max(worst_c.max_abs, dcw.max_abs);
    worst_c.finite = worst_c.finite && dcw.finite;
    if (std::memcmp(got_hist.data(), hist.data(), hist.size() * sizeof(float)) != 0 && hist_exact) {
      hist_exact = false;
      hist_note = fmt::format(" history differs after window {} (T={}, n={})", wi, win.T, win.n);
    }
  }
  const bool ok = within(worst_c) && hist_exact;
  r.status = ok ? "OK" : "FAIL";
  r.detail = fmt::format("{} history {}{}", worst_c.text(), hist_exact ? "exact" : "MISMATCH", hist_note);
  r.metrics = {{"rel", worst_c.rel}, {"max_abs", worst_c.max_abs}, {"history_exact", hist_exact}};
  if (ok && opt.bench) {
    // gdn_conv is idempotent (it reads history rows 0..K-2 and writes the rows after them).
    auto ms = median_launch_ms(64, opt.bench_reps, [&](int, cudaStream_t s) {
      return gdn_conv(d, dm.get<float>(), m_stride, dw.get<float>(), dhist.get<float>(), kMaxWindowRows,
                      dc.get<float>(), s);
    });
    if (!ms) return ms.status();
    r.metrics["ms"] = *ms;
    r.metrics["T"] = kMaxWindowRows;
    r.detail += fmt::format(" ({:.2f} us at T={})", 1e3 * *ms, kMaxWindowRows);
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// gdn_conv_commit over `layers` layers in one launch, each with its own random history of
// K - 1 + T_max rows: after it, layer l's rows 0 .. K - 2 are its rows n .. n + K - 2 and its rows
// past K - 2 are untouched, bit for bit.
Status run_commit_case(const ParityOptions& opt, Reporter& rep, const Geometry& g, int layers, int n) {
  const GdnDims d = dims_of(g);
  const int K = d.conv_kernel;
  const size_t C = static_cast<size_t>(d.conv_dim()), rows = static_cast<size_t>(K - 1 + kMaxWindowRows);
  const std::string line = fmt::format("gdn_conv_commit(layers={}, conv_dim={}, K={}, n={})", layers, C, K, n);
  CaseResult r = make_case("gdn_conv_commit", line, {{"layers", layers}, {"conv_dim", C}, {"K", K}, {"n", n}});
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);
  std::vector<std::vector<float>> hist;
  std::vector<DeviceBuffer> dhist(layers);
  std::vector<float*> table;
  for (int l = 0; l < layers; ++l) {
    hist.push_back(random_normal(seed + l, rows * C));
    STRATA_TRY(upload(dhist[l], hist[l]));
    table.push_back(dhist[l].get<float>());
  }
  DeviceBuffer dtable;
  STRATA_TRY(upload(dtable, table));
  STRATA_TRY(gdn_conv_commit(d, dtable.get<float*>(), layers, n, nullptr));
  std::string bad;
  for (int l = 0; l < layers && bad.empty(); ++l) {
    std::vector<float> want = hist[l], got;
    std::copy_n(hist[l].begin() + static_cast<int64_t>(n * C), (K - 1) * C, want.begin());
    STRATA_TRY(download_synced(got, dhist[l], rows * C));
    if (std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) != 0) bad = fmt::format("layer {}: history differs", l);
  }
  r.status = bad.empty() ? "OK" : "FAIL";
  r.detail = bad.empty() ? "every layer's history exact" : bad;
  r.metrics = {{"exact", bad.empty()}};
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- gdn_recurrent ---------------------------------------------------------------------------------

// The recurrent kernel's per-launch time over state copies that together exceed the L2 several
// times, so that each launch reads its state from DRAM as in the engine (36 layers of state and the
// weights pass through the L2 between two windows of one layer).
Result<double> bench_recurrent(const GdnDims& d, const DeviceBuffer& dc, const DeviceBuffer& db,
                               const DeviceBuffer& da, int64_t ba_stride, const DeviceBuffer& dA,
                               const DeviceBuffer& ddt, int T, bool in_place, DeviceBuffer& dout, int reps) {
  int l2_bytes = 0;
  int device = 0;
  PARITY_CUDA(cudaGetDevice(&device));
  PARITY_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  const size_t state_floats = static_cast<size_t>(d.n_v_heads) * d.head_dim * d.head_dim;
  const size_t state_bytes = state_floats * sizeof(float);
  const int copies =
      static_cast<int>(std::clamp<size_t>((4 * static_cast<size_t>(l2_bytes) + state_bytes - 1) / state_bytes, 2, 256));
  DeviceBuffer ring;
  STRATA_TRY(ring.alloc(state_bytes * static_cast<size_t>(copies)));
  PARITY_CUDA(cudaMemset(ring.get(), 0, ring.bytes()));
  float* base = ring.get<float>();
  return median_launch_ms(copies, reps, [&](int i, cudaStream_t s) {
    float* in = base + state_floats * static_cast<size_t>(i);
    // Out of place, launch i writes the copy read half a ring later, long evicted by then (writing
    // the next launch's copy would hand that launch its state from L2).
    float* out_state = in_place ? in : base + state_floats * static_cast<size_t>((i + copies / 2) % copies);
    return gdn_recurrent(d, dc.get<float>(), db.get<float>(), da.get<float>(), ba_stride, dA.get<float>(),
                         ddt.get<float>(), in, out_state, T, dout.get<float>(), s);
  });
}

// The reference of gdn_recurrent: split c, l2-normalise q and k per key head, the gates from b/a
// (row t at t * ba_stride), then the recurrent rule; state is advanced in place.
void reference_recurrent(const GdnDims& d, const std::vector<float>& c, const float* b, const float* a,
                         int64_t ba_stride, const std::vector<float>& ssm_a, const std::vector<float>& dt_bias, int T,
                         std::vector<float>& state, std::vector<float>& out, reference::ThreadPool& pool) {
  const int64_t nk = d.n_k_heads, nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim();
  const int64_t key_dim = nk * D, value_dim = nv * D;
  // Reference: split, l2-normalise q and k per key head, the gates, then the recurrent rule.
  std::vector<float> q(static_cast<size_t>(key_dim * T)), k(q.size()), v(static_cast<size_t>(value_dim * T));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = c.data() + t * C;
    std::copy_n(row, key_dim, q.data() + t * key_dim);
    std::copy_n(row + key_dim, key_dim, k.data() + t * key_dim);
    std::copy_n(row + 2 * key_dim, value_dim, v.data() + t * value_dim);
    for (int64_t h = 0; h < nk; ++h) {
      reference::l2_norm({q.data() + t * key_dim + h * D, static_cast<size_t>(D)});
      reference::l2_norm({k.data() + t * key_dim + h * D, static_cast<size_t>(D)});
    }
  }
  std::vector<float> beta(static_cast<size_t>(nv * T)), gate(beta.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      beta[t * nv + h] = reference::sigmoid(b[t * ba_stride + h]);
      gate[t * nv + h] = ssm_a[h] * reference::softplus(a[t * ba_stride + h] + dt_bias[h]);
    }
  out.assign(static_cast<size_t>(value_dim * T), 0.0f);
  reference::gdn_recurrent(reference::GdnShape{nk, nv, D}, q.data(), k.data(), v.data(), gate.data(), beta.data(), T,
                           state.data(), out.data(), pool);
}

// keep: b and a as the two halves of one [T, 2 * n_v_heads] output (b at column 0, a at column
// n_v_heads, the concatenated beta|alpha layout) and copied to b_keep/a_keep by the kernel.
Status run_recurrent_case(const ParityOptions& opt, Reporter& rep, reference::ThreadPool& pool, const Geometry& g,
                          int T, bool in_place, bool keep = false) {
  const GdnDims d = dims_of(g);
  const int64_t nk = d.n_k_heads, nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim();
  const int64_t value_dim = nv * D;
  const int64_t ba_stride = keep ? 2 * nv : nv + 3;  // b and a as columns of a wider projection output
  CaseResult r;
  r.op = "gdn_recurrent";
  r.line = fmt::format("gdn_recurrent(T={}, k_heads={}, v_heads={}, d={}, {}{})", T, nk, nv, D,
                       in_place ? "in-place" : "out-of-place", keep ? ", keep" : "");
  r.params = {{"T", T}, {"k_heads", nk}, {"v_heads", nv}, {"d", D}, {"in_place", in_place}, {"keep", keep}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  const std::vector<float> c = random_normal(seed, static_cast<size_t>(C * T));
  std::vector<float> b = random_normal(seed + 1, static_cast<size_t>(ba_stride * T));
  std::vector<float> a = random_normal(seed + 2, static_cast<size_t>(ba_stride * T));
  if (keep) {
    // One buffer: a's values are those of the b buffer shifted by n_v_heads columns.
    a.assign(b.begin() + nv, b.end());
    a.resize(b.size(), 0.0f);
  }
  std::vector<float> ssm_a = random_normal(seed + 3, static_cast<size_t>(nv), 0.5f);
  for (float& v : ssm_a) v = -std::exp(v);  // A = -exp(A_log), as stored
  const std::vector<float> dt_bias = random_normal(seed + 4, static_cast<size_t>(nv), 0.5f);
  const std::vector<float> state0 = random_normal(seed + 5, static_cast<size_t>(nv * D * D), 0.5f);

  DeviceBuffer dc, db, da, dA, ddt, dstate_in, dstate_out, dout, db_keep, da_keep;
  STRATA_TRY(upload(dc, c));
  STRATA_TRY(upload(db, b));
  STRATA_TRY(upload(da, a));
  const float* b_ptr = db.get<float>();
  const float* a_ptr = keep ? db.get<float>() + nv : da.get<float>();
  if (keep) {
    STRATA_TRY(alloc_poisoned(db_keep, static_cast<size_t>(nv * T)));
    STRATA_TRY(alloc_poisoned(da_keep, static_cast<size_t>(nv * T)));
  }
  STRATA_TRY(upload(dA, ssm_a));
  STRATA_TRY(upload(ddt, dt_bias));
  STRATA_TRY(upload(dstate_in, state0));
  if (!in_place) STRATA_TRY(alloc_poisoned(dstate_out, state0.size()));
  STRATA_TRY(alloc_poisoned(dout, static_cast<size_t>(value_dim * T)));
  float* state_out = in_place ? dstate_in.get<float>() : dstate_out.get<float>();
  STRATA_TRY(gdn_recurrent(d, dc.get<float>(), b_ptr, a_ptr, ba_stride, dA.get<float>(), ddt.get<float>(),
                           dstate_in.get<float>(), state_out, T, dout.get<float>(), nullptr,
                           keep ? db_keep.get<float>() : nullptr, keep ? da_keep.get<float>() : nullptr));
  std::vector<float> got_out, got_state, kept_in;
  STRATA_TRY(download_synced(got_out, dout, static_cast<size_t>(value_dim * T)));
  STRATA_TRY(download_synced(got_state, in_place ? dstate_in : dstate_out, state0.size()));
  if (!in_place) STRATA_TRY(download_synced(kept_in, dstate_in, state0.size()));

  std::vector<float> want_state = state0, want_out;
  reference_recurrent(d, c, b.data(), a.data(), ba_stride, ssm_a, dt_bias, T, want_state, want_out, pool);

  const Diff dout_diff = diff(got_out.data(), want_out.data(), want_out.size());
  const Diff dstate_diff = diff(got_state.data(), want_state.data(), want_state.size());
  const bool in_kept = in_place || std::memcmp(kept_in.data(), state0.data(), state0.size() * sizeof(float)) == 0;
  bool ba_kept = true;
  if (keep) {
    std::vector<float> got_b, got_a;
    STRATA_TRY(download_synced(got_b, db_keep, static_cast<size_t>(nv * T)));
    STRATA_TRY(download_synced(got_a, da_keep, static_cast<size_t>(nv * T)));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nv; ++h)
        ba_kept = ba_kept && std::memcmp(&got_b[t * nv + h], &b[t * ba_stride + h], sizeof(float)) == 0 &&
                  std::memcmp(&got_a[t * nv + h], &a[t * ba_stride + h], sizeof(float)) == 0;
  }
  const bool ok = within(dout_diff) && within(dstate_diff) && in_kept && ba_kept;
  r.status = ok ? "OK" : "FAIL";
  r.detail = diff_text("out", dout_diff) + "; " + diff_text("state", dstate_diff) + (in_kept ? "" : "; state_in was modified") +
             (ba_kept ? "" : "; b_keep/a_keep differ from b/a");
  r.metrics = {{"rel", dout_diff.rel}, {"max_abs", dout_diff.max_abs}, {"state_rel", dstate_diff.rel},
               {"state_max_abs", dstate_diff.max_abs}};
  if (ok && opt.bench) {
    auto ms = bench_recurrent(d, dc, db, da, ba_stride, dA, ddt, T, in_place, dout, opt.bench_reps);
    if (!ms) return ms.status();
    const double state_bytes = 2.0 * static_cast<double>(nv * D * D) * sizeof(float);  // read + written
    const double gb_s = state_bytes / (*ms * 1e-3) / 1e9;
    r.metrics["ms"] = *ms;
    r.metrics["gb_s"] = gb_s;
    r.detail += fmt::format(" ({:.2f} us, {:.0f} GB/s of state)", 1e3 * *ms, gb_s);
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- gdn_conv_recurrent -----------------------------------------------------------------------------

// The buffers both gdn_conv_recurrent cases set up alike: the uploaded inputs and two poisoned copies
// of what a launch writes, [0] for the separate launches and [1] for the fused one.
struct ConvRecurrentBuffers {
  DeviceBuffer dw, dm, dba, dA, ddt, dstate_in;  // dm: the m rows (the m|z rows in the fused-norm case)
  DeviceBuffer hist[2], c[2], state[2], out[2];

  Status upload_inputs(const std::vector<float>& w, const std::vector<float>& m, const std::vector<float>& ba,
                       const std::vector<float>& ssm_a, const std::vector<float>& dt_bias,
                       const std::vector<float>& state0) {
    STRATA_TRY(upload(dw, w));
    STRATA_TRY(upload(dm, m));
    STRATA_TRY(upload(dba, ba));
    STRATA_TRY(upload(dA, ssm_a));
    STRATA_TRY(upload(ddt, dt_bias));
    STRATA_TRY(upload(dstate_in, state0));
    return Status::ok_status();
  }

  // Copy i: the history (room for kMaxWindowRows rows after hist0), c, state and out (T rows).
  Status alloc_copy(int i, const GdnDims& d, int T, const std::vector<float>& hist0, size_t state_n) {
    const int K = d.conv_kernel;
    const int64_t nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim(), value_dim = nv * D;
    const size_t hist_n = static_cast<size_t>(C * (K - 1 + kMaxWindowRows));
    STRATA_TRY(alloc_poisoned(hist[i], hist_n));
    STRATA_TRY(upload_into(hist[i], hist0));
    STRATA_TRY(alloc_poisoned(c[i], static_cast<size_t>(C * kMaxWindowRows)));
    STRATA_TRY(alloc_poisoned(state[i], state_n));
    STRATA_TRY(alloc_poisoned(out[i], static_cast<size_t>(value_dim * T)));
    return Status::ok_status();
  }
};

// The decoder's fused step: m as the slice of the m|z output (stride conv_dim + inner), b/a as the
// halves of the beta|alpha output, b_keep/a_keep set, a mid-sequence history. Against the separate
// gdn_conv + gdn_recurrent launches on the same inputs: out, state, c, the history and the kept b/a
// equal bit for bit (the same per-channel and per-slice code, so any difference is a bug of the
// fusion, e.g. a missing or duplicated writer of c); and out/state against the reference (conv by
// reference::causal_conv_silu, then the recurrence) within kGdnRelTol.
Status run_conv_recurrent_case(const ParityOptions& opt, Reporter& rep, reference::ThreadPool& pool,
                               const Geometry& g, int T) {
  const GdnDims d = dims_of(g);
  const int K = d.conv_kernel;
  const int64_t nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim(), value_dim = nv * D;
  const int64_t m_stride = C + value_dim, ba_stride = 2 * nv;
  CaseResult r;
  r.op = "gdn_conv_recurrent";
  r.line = fmt::format("gdn_conv_recurrent(T={}, k_heads={}, v_heads={}, d={}, K={})", T, d.n_k_heads, nv, D, K);
  r.params = {{"T", T}, {"k_heads", d.n_k_heads}, {"v_heads", nv}, {"d", D}, {"K", K}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  const std::vector<float> w = random_normal(seed, static_cast<size_t>(C * K), 0.5f);
  const std::vector<float> hist0 = random_normal(seed + 1, static_cast<size_t>(C * (K - 1)));
  const std::vector<float> m = random_normal(seed + 2, static_cast<size_t>(m_stride * T));
  const std::vector<float> ba = random_normal(seed + 3, static_cast<size_t>(ba_stride * T));
  std::vector<float> ssm_a = random_normal(seed + 4, static_cast<size_t>(nv), 0.5f);
  for (float& v : ssm_a) v = -std::exp(v);
  const std::vector<float> dt_bias = random_normal(seed + 5, static_cast<size_t>(nv), 0.5f);
  const std::vector<float> state0 = random_normal(seed + 6, static_cast<size_t>(nv * D * D), 0.5f);

  // Two copies of everything a launch writes: [0] the separate kernels, [1] the fused one.
  ConvRecurrentBuffers bufs;
  DeviceBuffer keep_b, keep_a;
  STRATA_TRY(bufs.upload_inputs(w, m, ba, ssm_a, dt_bias, state0));
  for (int i = 0; i < 2; ++i) {
    STRATA_TRY(bufs.alloc_copy(i, d, T, hist0, state0.size()));
  }
  STRATA_TRY(alloc_poisoned(keep_b, static_cast<size_t>(nv * T)));
  STRATA_TRY(alloc_poisoned(keep_a, static_cast<size_t>(nv * T)));
  const float* b_dev = bufs.dba.get<float>();
  const float* a_dev = bufs.dba.get<float>() + nv;
  STRATA_TRY(gdn_conv(d, bufs.dm.get<float>(), m_stride, bufs.dw.get<float>(), bufs.hist[0].get<float>(), T,
                      bufs.c[0].get<float>(), nullptr));
  STRATA_TRY(gdn_recurrent(d, bufs.c[0].get<float>(), b_dev, a_dev, ba_stride, bufs.dA.get<float>(),
                           bufs.ddt.get<float>(), bufs.dstate_in.get<float>(), bufs.state[0].get<float>(), T,
                           bufs.out[0].get<float>(), nullptr));
  STRATA_TRY(gdn_conv_recurrent(d, bufs.dm.get<float>(), m_stride, bufs.dw.get<float>(), bufs.hist[1].get<float>(),
                                bufs.c[1].get<float>(), b_dev, a_dev, ba_stride, bufs.dA.get<float>(),
                                bufs.ddt.get<float>(), bufs.dstate_in.get<float>(), bufs.state[1].get<float>(), T,
                                bufs.out[1].get<float>(), nullptr, keep_b.get<float>(), keep_a.get<float>()));
  std::vector<float> got[2][4];  // out, state, c, hist
  for (int i = 0; i < 2; ++i) {
    STRATA_TRY(download_synced(got[i][0], bufs.out[i], static_cast<size_t>(value_dim * T)));
    STRATA_TRY(download_synced(got[i][1], bufs.state[i], state0.size()));
    STRATA_TRY(download_synced(got[i][2], bufs.c[i], static_cast<size_t>(C * T)));
    STRATA_TRY(download_synced(got[i][3], bufs.hist[i], static_cast<size_t>(C * (K - 1 + T))));
  }
  std::vector<float> got_b, got_a;
  STRATA_TRY(download_synced(got_b, keep_b, static_cast<size_t>(nv * T)));
  STRATA_TRY(download_synced(got_a, keep_a, static_cast<size_t>(nv * T)));

  std::string mismatch;
  const char* names[4] = {"out", "state", "c", "history"};
  for (int j = 0; j < 4; ++j)
    if (std::memcmp(got[0][j].data(), got[1][j].data(), got[0][j].size() * sizeof(float)) != 0)
      mismatch += fmt::format(" {}", names[j]);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h)
      if (std::memcmp(&got_b[t * nv + h], &ba[t * ba_stride + h], sizeof(float)) != 0 ||
          std::memcmp(&got_a[t * nv + h], &ba[t * ba_stride + nv + h], sizeof(float)) != 0) {
        if (mismatch.find("kept b/a") == std::string::npos) mismatch += " kept b/a";
      }

  // Reference: the conv over [history; m rows], then the recurrence.
  std::vector<float> x(static_cast<size_t>(C * T)), want_c(x.size());
  for (int t = 0; t < T; ++t) std::copy_n(m.data() + t * m_stride, C, x.data() + t * C);
  std::vector<float> ref_hist = hist0;
  reference::causal_conv_silu(w.data(), C, K, 1, ref_hist, x.data(), T, want_c.data());
  std::vector<float> want_state = state0, want_out;
  reference_recurrent(d, want_c, ba.data(), ba.data() + nv, ba_stride, ssm_a, dt_bias, T, want_state, want_out, pool);
  const Diff dout = diff(got[1][0].data(), want_out.data(), want_out.size());
  const Diff dstate = diff(got[1][1].data(), want_state.data(), want_state.size());
  const bool ok = mismatch.empty() && within(dout) && within(dstate);
  r.status = ok ? "OK" : "FAIL";
  r.detail = diff_text("out", dout) + "; " + diff_text("state", dstate) +
             (mismatch.empty() ? "; equal to gdn_conv + gdn_recurrent" : "; differs from the separate kernels in" + mismatch);
  r.metrics = {{"rel", dout.rel}, {"state_rel", dstate.rel}, {"exact", mismatch.empty()}};
  if (ok && opt.bench) {
    // Repeatable: it reads history rows 0..K-2 and state_in, and writes other buffers.
    auto ms = median_launch_ms(64, opt.bench_reps, [&](int, cudaStream_t s) {
      return gdn_conv_recurrent(d, bufs.dm.get<float>(), m_stride, bufs.dw.get<float>(), bufs.hist[1].get<float>(),
                                bufs.c[1].get<float>(), b_dev, a_dev, ba_stride, bufs.dA.get<float>(),
                                bufs.ddt.get<float>(), bufs.dstate_in.get<float>(), bufs.state[1].get<float>(), T,
                                bufs.out[1].get<float>(), s, keep_b.get<float>(), keep_a.get<float>());
    });
    if (!ms) return ms.status();
    r.metrics["ms"] = *ms;
    r.detail += fmt::format(" ({:.2f} us)", 1e3 * *ms);
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- gdn_gated_norm --------------------------------------------------------------------------------

// q8: z as the slice of the concatenated m|z output (stride conv_dim + inner, offset conv_dim),
// and the fused q8_1 output checked against quantize_q8_1 of the y the same launch wrote.
Status run_gated_norm_case(const ParityOptions& opt, Reporter& rep, const Geometry& g, int T, bool q8 = false) {
  const GdnDims d = dims_of(g);
  const int64_t nv = d.n_v_heads, D = d.head_dim, value_dim = nv * D;
  const int64_t z_offset = q8 ? d.conv_dim() : 0;
  const int64_t z_stride = q8 ? d.conv_dim() + value_dim : value_dim + 32;  // z as a slice of a wider output
  CaseResult r;
  r.op = "gdn_gated_norm";
  r.line = fmt::format("gdn_gated_norm(T={}, v_heads={}, d={}{})", T, nv, D, q8 ? ", q8_1" : "");
  r.params = {{"T", T}, {"v_heads", nv}, {"d", D}, {"q8_1", q8}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  const std::vector<float> o = random_normal(seed, static_cast<size_t>(value_dim * T));
  const std::vector<float> z = random_normal(seed + 1, static_cast<size_t>(z_stride * T));
  std::vector<float> w = random_normal(seed + 2, static_cast<size_t>(D), 0.1f);
  for (float& x : w) x += 1.0f;  // a plain weight near 1, as trained
  DeviceBuffer dO, dz, dw, dy;
  STRATA_TRY(upload(dO, o));
  STRATA_TRY(upload(dz, z));
  STRATA_TRY(upload(dw, w));
  STRATA_TRY(alloc_poisoned(dy, o.size()));
  const int64_t q8_stride = (value_dim / 32 * 36 + 15) / 16 * 16;
  DeviceBuffer dq8, dq8_want;
  if (q8) {
    STRATA_TRY(alloc_filled(dq8, static_cast<size_t>(q8_stride * T), 0xA5));
    STRATA_TRY(alloc_filled(dq8_want, static_cast<size_t>(q8_stride * T), 0xA5));
  }
  const float* z_dev = dz.get<float>() + z_offset;
  STRATA_TRY(gdn_gated_norm(d, dO.get<float>(), z_dev, z_stride, dw.get<float>(), T, dy.get<float>(), nullptr,
                            q8 ? dq8.get() : nullptr, q8_stride));
  std::vector<float> got;
  STRATA_TRY(download_synced(got, dy, o.size()));
  bool q8_equal = true;
  std::string q8_note;
  if (q8) {
    STRATA_TRY(quantize_q8_1(dy.get<float>(), value_dim, value_dim, T, dq8_want.get(), q8_stride, nullptr));
    std::vector<uint8_t> got_q8, want_q8;
    STRATA_TRY(download_synced(got_q8, dq8, static_cast<size_t>(q8_stride * T)));
    STRATA_TRY(download_synced(want_q8, dq8_want, static_cast<size_t>(q8_stride * T)));
    q8_equal = got_q8 == want_q8;
    if (!q8_equal) {
      size_t at = 0;
      while (at < got_q8.size() && got_q8[at] == want_q8[at]) ++at;
      q8_note = fmt::format("; q8_1 differs from quantize_q8_1(y) at byte {} (row {})", at, at / q8_stride);
    } else {
      q8_note = "; q8_1 bytes equal";
    }
  }

  std::vector<float> want(o.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t off = t * value_dim + h * D;
      reference::rms_norm_gated({o.data() + off, static_cast<size_t>(D)},
                                {z.data() + z_offset + t * z_stride + h * D, static_cast<size_t>(D)}, w, d.eps,
                                {want.data() + off, static_cast<size_t>(D)});
    }
  const Diff df = diff(got.data(), want.data(), want.size());
  const bool ok = within(df) && q8_equal;
  r.status = ok ? "OK" : "FAIL";
  r.detail = df.text() + q8_note;
  r.metrics = {{"rel", df.rel}, {"max_abs", df.max_abs}, {"q8_equal", q8_equal}};
  if (ok && opt.bench) {
    auto ms = median_launch_ms(64, opt.bench_reps, [&](int, cudaStream_t s) {
      return gdn_gated_norm(d, dO.get<float>(), z_dev, z_stride, dw.get<float>(), T, dy.get<float>(), s,
                            q8 ? dq8.get() : nullptr, q8_stride);
    });
    if (!ms) return ms.status();
    r.metrics["ms"] = *ms;
    r.detail += fmt::format(" ({:.2f} us)", 1e3 * *ms);
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- gdn_conv_recurrent with the gated norm ---------------------------------------------------------

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// The inputs of one decoder GDN step that the step cases draw alike, from seeds seed .. seed + 6:
// the conv taps, a mid-sequence history, the m|z rows, A (negative) and the dt bias, the state
// and the gated norm's weights.
struct StepInputs {
  std::vector<float> w, hist0, mz, ssm_a, dt_bias, state0, norm_w;
};

StepInputs step_inputs(uint64_t seed, const GdnDims& d, int T, int64_t mz_stride) {
  const int64_t C = d.conv_dim(), nv = d.n_v_heads, D = d.head_dim;
  StepInputs in;
  in.w = random_normal(seed, static_cast<size_t>(C * d.conv_kernel), 0.5f);
  in.hist0 = random_normal(seed + 1, static_cast<size_t>(C * (d.conv_kernel - 1)));
  in.mz = random_normal(seed + 2, static_cast<size_t>(mz_stride * T));
  in.ssm_a = random_normal(seed + 3, static_cast<size_t>(nv), 0.5f);
  for (float& v : in.ssm_a) v = -std::exp(v);
  in.dt_bias = random_normal(seed + 4, static_cast<size_t>(nv), 0.5f);
  in.state0 = random_normal(seed + 5, static_cast<size_t>(nv * D * D), 0.5f);
  in.norm_w = norm_weight(seed + 6, static_cast<size_t>(D));
  return in;
}

// The reference's step: the conv over [history; m rows], the recurrence on the b/a rows, and the
// gated norm of each (row, head) with z from the m|z rows.
struct StepWant {
  std::vector<float> out, state, y;
};

StepWant reference_step(const GdnDims& d, const StepInputs& in, int64_t mz_stride, const float* ba, int64_t ba_stride,
                        int T, reference::ThreadPool& pool) {
  const int64_t C = d.conv_dim(), nv = d.n_v_heads, D = d.head_dim, value_dim = nv * D;
  std::vector<float> x(static_cast<size_t>(C * T)), c(x.size());
  for (int t = 0; t < T; ++t) std::copy_n(in.mz.data() + t * mz_stride, C, x.data() + t * C);
  std::vector<float> hist = in.hist0;
  reference::causal_conv_silu(in.w.data(), C, d.conv_kernel, 1, hist, x.data(), T, c.data());
  StepWant want;
  want.state = in.state0;
  reference_recurrent(d, c, ba, ba + nv, ba_stride, in.ssm_a, in.dt_bias, T, want.state, want.out, pool);
  want.y.resize(want.out.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t off = t * value_dim + h * D;
      reference::rms_norm_gated({want.out.data() + off, static_cast<size_t>(D)},
                                {in.mz.data() + C + t * mz_stride + h * D, static_cast<size_t>(D)}, in.norm_w, d.eps,
                                {want.y.data() + off, static_cast<size_t>(D)});
    }
  return want;
}

// A step case's device buffers: the inputs (ba: the b|a rows the launches read, at stride
// 2 * n_v_heads) and two poisoned copies of everything a launch writes, the kept b/a, y and y's
// q8_1 rows included.
struct StepBuffers : ConvRecurrentBuffers {
  DeviceBuffer norm, keep_b[2], keep_a[2], y[2], q8[2];

  Status setup(const GdnDims& d, int T, const StepInputs& in, const std::vector<float>& ba, int64_t q8_stride) {
    const int64_t nv = d.n_v_heads, value_dim = nv * d.head_dim;
    STRATA_TRY(upload_inputs(in.w, in.mz, ba, in.ssm_a, in.dt_bias, in.state0));
    STRATA_TRY(upload(norm, in.norm_w));
    for (int i = 0; i < 2; ++i) {
      STRATA_TRY(alloc_copy(i, d, T, in.hist0, in.state0.size()));
      STRATA_TRY(alloc_poisoned(keep_b[i], static_cast<size_t>(nv * T)));
      STRATA_TRY(alloc_poisoned(keep_a[i], static_cast<size_t>(nv * T)));
      STRATA_TRY(alloc_poisoned(y[i], static_cast<size_t>(value_dim * T)));
      STRATA_TRY(alloc_filled(q8[i], static_cast<size_t>(q8_stride * T), 0xA5));
    }
    return Status::ok_status();
  }
};

// What one copy of a step case's launches wrote: out, state, c, the history, y and y's q8_1 rows.
struct StepGot {
  std::vector<float> v[5];
  std::vector<uint8_t> q8;
};
constexpr const char* kStepGotNames[5] = {"out", "state", "c", "history", "y"};

Status download_step(const GdnDims& d, int T, int64_t q8_stride, StepBuffers& bufs, int i, StepGot& got) {
  const int64_t C = d.conv_dim(), value_dim = static_cast<int64_t>(d.n_v_heads) * d.head_dim;
  const size_t state_n = static_cast<size_t>(value_dim) * d.head_dim;
  STRATA_TRY(download_synced(got.v[0], bufs.out[i], static_cast<size_t>(value_dim * T)));
  STRATA_TRY(download_synced(got.v[1], bufs.state[i], state_n));
  STRATA_TRY(download_synced(got.v[2], bufs.c[i], static_cast<size_t>(C * T)));
  STRATA_TRY(download_synced(got.v[3], bufs.hist[i], static_cast<size_t>(C * (d.conv_kernel - 1 + T))));
  STRATA_TRY(download_synced(got.v[4], bufs.y[i], static_cast<size_t>(value_dim * T)));
  return download_synced(got.q8, bufs.q8[i], static_cast<size_t>(q8_stride * T));
}

// The bench of a step case: the case's launch and the one it is compared with, each timed as the
// median over graphs of 64 launches (both repeatable: they read history rows 0..K-2 and
// state_in, and write other buffers), into r's "ms" and `other` metrics and its detail.
using StepLaunch = std::function<Status(cudaStream_t)>;
Status time_step_pair(const ParityOptions& opt, CaseResult& r, const StepLaunch& launch, const char* other,
                      const char* other_text, const StepLaunch& other_launch) {
  auto ms = median_launch_ms(64, opt.bench_reps, [&](int, cudaStream_t s) { return launch(s); });
  if (!ms) return ms.status();
  auto other_ms = median_launch_ms(64, opt.bench_reps, [&](int, cudaStream_t s) { return other_launch(s); });
  if (!other_ms) return other_ms.status();
  r.metrics["ms"] = *ms;
  r.metrics[other] = *other_ms;
  r.detail += fmt::format(" ({:.2f} us; {} {:.2f} us)", 1e3 * *ms, other_text, 1e3 * *other_ms);
  return Status::ok_status();
}

// The names of what differs between two copies' outputs, each with a leading space.
std::string step_mismatch(const StepGot& a, const StepGot& b) {
  std::string m;
  for (int j = 0; j < 5; ++j)
    if (!same_bits(a.v[j], b.v[j])) m += fmt::format(" {}", kStepGotNames[j]);
  if (!same_bits(a.q8, b.q8)) m += " y_q8";
  return m;
}

// The decoder's GDN step with the gated norm in the recurrent launch (GdnConvRecurrentArgs, with
// the q8_1 rows the decoder's quantized ssm_out reads) against the same step as separate launches
// on the same inputs: m and z as the slices of one m|z output, a mid-sequence history, b/a as the
// halves of one [T, 2 * n_v_heads] output, b_keep/a_keep set. Bit for bit: out, state, c, history,
// the kept b/a (also equal to the b/a rows), y and its q8_1 rows. Against the reference (the conv,
// the recurrence, rms_norm_gated): out, state and y within kGdnRelTol.
Status run_fused_step_case(const ParityOptions& opt, Reporter& rep, reference::ThreadPool& pool, const Geometry& g,
                           int T) {
  const GdnDims d = dims_of(g);
  const int K = d.conv_kernel;
  const int64_t nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim(), value_dim = nv * D;
  const int64_t mz_stride = C + value_dim, ba_stride = 2 * nv;
  const int64_t q8_stride = q8_stride_for(value_dim);
  CaseResult r;
  r.op = "gdn_conv_recurrent";
  r.line = fmt::format("gdn_conv_recurrent(T={}, k_heads={}, v_heads={}, d={}, K={}, fused: norm)", T, d.n_k_heads, nv,
                       D, K);
  r.params = {{"T", T}, {"k_heads", d.n_k_heads}, {"v_heads", nv}, {"d", D}, {"K", K}, {"norm", true}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  if (!gdn_fused_norm_supported(d)) {
    r.status = "SKIP";
    r.detail = "the fused norm needs thread-block clusters (compute capability 9.0+)";
    rep.add(std::move(r));
    return Status::ok_status();
  }
  const uint64_t seed = case_seed(opt.seed, r.line);

  const StepInputs in = step_inputs(seed, d, T, mz_stride);
  const std::vector<float> ba = random_normal(seed + 7, static_cast<size_t>(ba_stride * T));

  // [0] the separate launches, [1] the fused one.
  StepBuffers bufs;  // bufs.dm holds the m|z rows
  STRATA_TRY(bufs.setup(d, T, in, ba, q8_stride));
  const float* z_dev = bufs.dm.get<float>() + C;
  const float* b_dev = bufs.dba.get<float>();
  const float* a_dev = bufs.dba.get<float>() + nv;

  // The separate launches.
  const auto separate = [&](cudaStream_t s) -> Status {
    STRATA_TRY(gdn_conv_recurrent(d, bufs.dm.get<float>(), mz_stride, bufs.dw.get<float>(), bufs.hist[0].get<float>(),
                                  bufs.c[0].get<float>(), b_dev, a_dev, ba_stride, bufs.dA.get<float>(),
                                  bufs.ddt.get<float>(), bufs.dstate_in.get<float>(), bufs.state[0].get<float>(), T,
                                  bufs.out[0].get<float>(), s, bufs.keep_b[0].get<float>(), bufs.keep_a[0].get<float>()));
    return gdn_gated_norm(d, bufs.out[0].get<float>(), z_dev, mz_stride, bufs.norm.get<float>(), T, bufs.y[0].get<float>(), s,
                          bufs.q8[0].get(), q8_stride);
  };
  // The fused launch.
  GdnConvRecurrentArgs a;
  a.m = bufs.dm.get<float>();
  a.m_stride = mz_stride;
  a.conv_w = bufs.dw.get<float>();
  a.hist = bufs.hist[1].get<float>();
  a.c = bufs.c[1].get<float>();
  a.b = b_dev;
  a.a = a_dev;
  a.ba_stride = ba_stride;
  a.b_keep = bufs.keep_b[1].get<float>();
  a.a_keep = bufs.keep_a[1].get<float>();
  a.ssm_a = bufs.dA.get<float>();
  a.dt_bias = bufs.ddt.get<float>();
  a.state_in = bufs.dstate_in.get<float>();
  a.state_out = bufs.state[1].get<float>();
  a.out = bufs.out[1].get<float>();
  a.norm.z = z_dev;
  a.norm.z_stride = mz_stride;
  a.norm.w = bufs.norm.get<float>();
  a.norm.y = bufs.y[1].get<float>();
  a.norm.y_q8 = bufs.q8[1].get();
  a.norm.q8_stride = q8_stride;
  a.T = T;
  STRATA_TRY(separate(nullptr));
  STRATA_TRY(gdn_conv_recurrent(d, a, nullptr));

  StepGot got[2];
  std::vector<float> kept_b[2], kept_a[2];
  for (int i = 0; i < 2; ++i) {
    STRATA_TRY(download_step(d, T, q8_stride, bufs, i, got[i]));
    STRATA_TRY(download_synced(kept_b[i], bufs.keep_b[i], static_cast<size_t>(nv * T)));
    STRATA_TRY(download_synced(kept_a[i], bufs.keep_a[i], static_cast<size_t>(nv * T)));
  }
  std::string mismatch = step_mismatch(got[0], got[1]);
  if (!same_bits(kept_b[0], kept_b[1])) mismatch += " kept b";
  if (!same_bits(kept_a[0], kept_a[1])) mismatch += " kept a";
  std::vector<float> want_b(static_cast<size_t>(nv * T)), want_a(want_b.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      want_b[t * nv + h] = ba[t * ba_stride + h];
      want_a[t * nv + h] = ba[t * ba_stride + nv + h];
    }
  if (!same_bits(kept_b[1], want_b) || !same_bits(kept_a[1], want_a)) mismatch += " kept b/a (not the b/a rows)";

  const StepWant want = reference_step(d, in, mz_stride, ba.data(), ba_stride, T, pool);
  const Diff dout = diff(got[1].v[0].data(), want.out.data(), want.out.size());
  const Diff dstate = diff(got[1].v[1].data(), want.state.data(), want.state.size());
  const Diff dy = diff(got[1].v[4].data(), want.y.data(), want.y.size());
  const bool ok = mismatch.empty() && within(dout) && within(dstate) && within(dy);
  r.status = ok ? "OK" : "FAIL";
  r.detail = diff_text("out", dout) + "; " + diff_text("state", dstate) + "; " + diff_text("y", dy) +
             (mismatch.empty() ? "; equal to the separate launches" : "; differs from the separate launches in" + mismatch);
  r.metrics = {{"rel", dout.rel}, {"state_rel", dstate.rel}, {"y_rel", dy.rel}, {"exact", mismatch.empty()}};
  if (ok && opt.bench)
    STRATA_TRY(time_step_pair(
        opt, r, [&](cudaStream_t s) { return gdn_conv_recurrent(d, a, s); }, "separate_ms", "the separate launches",
        separate));
  rep.add(std::move(r));
  return Status::ok_status();
}

// Weights of one float type for the gate projection: the bytes the launch reads and the floats
// they hold (every conversion exact), from random values of deviation sigma.
struct FloatWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};
FloatWeights float_weights(quant::Type type, uint64_t seed, size_t n, float sigma) {
  FloatWeights w;
  w.values = random_normal(seed, n, sigma);
  const size_t elem = type == quant::Type::F32 ? 4 : 2;
  w.bytes.resize(n * elem);
  for (size_t i = 0; i < n; ++i) {
    if (type == quant::Type::F32) {
      std::memcpy(&w.bytes[4 * i], &w.values[i], 4);
      continue;
    }
    const uint16_t h = type == quant::Type::F16 ? quant::fp32_to_fp16(w.values[i]) : quant::fp32_to_bf16(w.values[i]);
    w.values[i] = type == quant::Type::F16 ? quant::fp16_to_fp32(h) : quant::bf16_to_fp32(h);
    std::memcpy(&w.bytes[2 * i], &h, 2);
  }
  return w;
}

// The decoder's GDN step with b and a projected in the launch (the norm too where the device has
// clusters). [1]: the projection from w (2 * n_v_heads rows of k) and u (rows at u_stride = k + 4);
// [0]: the same launch given [1]'s kept b/a as its b/a rows, which must give every output bit for
// bit (the projection changes only where b/a come from). The kept b/a against the host's dots in
// double; out, state (and y) against the reference fed with those.
Status run_gate_projection_case(const ParityOptions& opt, Reporter& rep, reference::ThreadPool& pool,
                                const Geometry& g, int T, quant::Type type, int64_t k) {
  const GdnDims d = dims_of(g);
  const int K = d.conv_kernel;
  const int64_t nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim(), value_dim = nv * D;
  const int64_t mz_stride = C + value_dim, ba_stride = 2 * nv, u_stride = k + 4;
  const int64_t q8_stride = q8_stride_for(value_dim);
  const bool norm = gdn_fused_norm_supported(d);
  const std::string tname(quant::type_info(type)->name);
  CaseResult r;
  r.op = "gdn_conv_recurrent";
  r.line = fmt::format("gdn_conv_recurrent(T={}, k_heads={}, v_heads={}, d={}, K={}, fused: gates {} k={})", T,
                       d.n_k_heads, nv, D, K, tname, k);
  r.params = {{"T", T}, {"k_heads", d.n_k_heads}, {"v_heads", nv}, {"d", D}, {"K", K}, {"gates", true},
              {"type", tname}, {"k", k}, {"norm", norm}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  const StepInputs in = step_inputs(seed, d, T, mz_stride);
  const FloatWeights pw = float_weights(type, seed + 7, static_cast<size_t>(ba_stride * k),
                                        1.0f / std::sqrt(static_cast<float>(k)));
  const std::vector<float> u = random_normal(seed + 8, static_cast<size_t>(u_stride * T));

  // The host's b | a rows: the dots in double, rounded once.
  std::vector<float> want_ba(static_cast<size_t>(ba_stride * T));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t row = 0; row < ba_stride; ++row) {
      double acc = 0.0;
      for (int64_t j = 0; j < k; ++j)
        acc += static_cast<double>(pw.values[row * k + j]) * u[t * u_stride + j];
      want_ba[t * ba_stride + row] = static_cast<float>(acc);
    }

  StepBuffers bufs;  // bufs.dm holds the m|z rows; bufs.dba [0]'s b|a, uploaded below
  DeviceBuffer dpw, du;
  STRATA_TRY(bufs.setup(d, T, in, std::vector<float>(want_ba.size(), 0.0f), q8_stride));
  STRATA_TRY(upload(dpw, pw.bytes));
  STRATA_TRY(upload(du, u));
  const auto args = [&](int i) {
    GdnConvRecurrentArgs a;
    a.m = bufs.dm.get<float>();
    a.m_stride = mz_stride;
    a.conv_w = bufs.dw.get<float>();
    a.hist = bufs.hist[i].get<float>();
    a.c = bufs.c[i].get<float>();
    a.b_keep = bufs.keep_b[i].get<float>();
    a.a_keep = bufs.keep_a[i].get<float>();
    a.ssm_a = bufs.dA.get<float>();
    a.dt_bias = bufs.ddt.get<float>();
    a.state_in = bufs.dstate_in.get<float>();
    a.state_out = bufs.state[i].get<float>();
    a.out = bufs.out[i].get<float>();
    if (norm) {
      a.norm.z = bufs.dm.get<float>() + C;
      a.norm.z_stride = mz_stride;
      a.norm.w = bufs.norm.get<float>();
      a.norm.y = bufs.y[i].get<float>();
      a.norm.y_q8 = bufs.q8[i].get();
      a.norm.q8_stride = q8_stride;
    }
    a.T = T;
    return a;
  };
  GdnConvRecurrentArgs projected = args(1);
  projected.proj.w = dpw.get();
  projected.proj.type = type;
  projected.proj.k = k;
  projected.proj.u = du.get<float>();
  projected.proj.u_stride = u_stride;
  STRATA_TRY(gdn_conv_recurrent(d, projected, nullptr));
  std::vector<float> got_b, got_a;
  STRATA_TRY(download_synced(got_b, bufs.keep_b[1], static_cast<size_t>(nv * T)));
  STRATA_TRY(download_synced(got_a, bufs.keep_a[1], static_cast<size_t>(nv * T)));
  std::vector<float> got_ba(want_ba.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      got_ba[t * ba_stride + h] = got_b[t * nv + h];
      got_ba[t * ba_stride + nv + h] = got_a[t * nv + h];
    }
  STRATA_TRY(upload_into(bufs.dba, got_ba));
  GdnConvRecurrentArgs given = args(0);
  given.b = bufs.dba.get<float>();
  given.a = bufs.dba.get<float>() + nv;
  given.ba_stride = ba_stride;
  STRATA_TRY(gdn_conv_recurrent(d, given, nullptr));

  StepGot got[2];  // without the norm y and y_q8 stay poisoned in both copies
  for (int i = 0; i < 2; ++i) STRATA_TRY(download_step(d, T, q8_stride, bufs, i, got[i]));
  const std::string mismatch = step_mismatch(got[0], got[1]);

  const StepWant want = reference_step(d, in, mz_stride, want_ba.data(), ba_stride, T, pool);
  const Diff dba = diff(got_ba.data(), want_ba.data(), want_ba.size());
  const Diff dout = diff(got[1].v[0].data(), want.out.data(), want.out.size());
  const Diff dstate = diff(got[1].v[1].data(), want.state.data(), want.state.size());
  const Diff dy = norm ? diff(got[1].v[4].data(), want.y.data(), want.y.size()) : Diff{};
  const bool ok = mismatch.empty() && within(dba) && within(dout) && within(dstate) && within(dy);
  r.status = ok ? "OK" : "FAIL";
  r.detail = diff_text("b|a", dba) + "; " + diff_text("out", dout) + "; " + diff_text("state", dstate) +
             (norm ? "; " + diff_text("y", dy) : std::string("; no norm (no clusters)")) +
             (mismatch.empty() ? "; equal to the launch given these b/a" : "; differs from the launch given these b/a in" + mismatch);
  r.metrics = {{"ba_rel", dba.rel}, {"rel", dout.rel}, {"state_rel", dstate.rel}, {"y_rel", dy.rel},
               {"exact", mismatch.empty()}};
  if (ok && opt.bench)
    STRATA_TRY(time_step_pair(
        opt, r, [&](cudaStream_t s) { return gdn_conv_recurrent(d, projected, s); }, "given_ms", "given b/a",
        [&](cudaStream_t s) { return gdn_conv_recurrent(d, given, s); }));
  rep.add(std::move(r));
  return Status::ok_status();
}

// gdn_conv_recurrent refuses the GdnConvRecurrentArgs it cannot take: each call below must return
// an error. Every pointer other than the one under test points at a buffer large enough for the
// call, so that a missing check shows as a FAIL here rather than as a fault. The valid arguments
// they start from (with the norm where the device has clusters) must be accepted.
Status run_refusal_case(const ParityOptions& opt, Reporter& rep) {
  const Geometry g{4, 8, 32, 4};
  const GdnDims d = dims_of(g);
  const int T = 2;
  const int64_t nv = d.n_v_heads, D = d.head_dim, C = d.conv_dim(), value_dim = nv * D;
  const int64_t mz_stride = C + value_dim, q8_stride = q8_stride_for(value_dim);
  CaseResult r;
  r.op = "gdn_conv_recurrent";
  r.line = fmt::format("gdn_conv_recurrent(refusals, k_heads={}, v_heads={}, d={})", d.n_k_heads, nv, D);
  r.params = {{"k_heads", d.n_k_heads}, {"v_heads", nv}, {"d", D}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, r.line);

  DeviceBuffer dw, dmz, dba, dA, ddt, dstate, dnorm, dhist, dc, dout, dkeep_b, dkeep_a, dy, dq8;
  STRATA_TRY(upload(dw, random_normal(seed, static_cast<size_t>(C * d.conv_kernel), 0.5f)));
  STRATA_TRY(upload(dmz, random_normal(seed + 1, static_cast<size_t>(mz_stride * T))));
  STRATA_TRY(upload(dba, random_normal(seed + 2, static_cast<size_t>(2 * nv * T))));
  STRATA_TRY(upload(dA, std::vector<float>(static_cast<size_t>(nv), -1.0f)));
  STRATA_TRY(upload(ddt, std::vector<float>(static_cast<size_t>(nv), 0.0f)));
  STRATA_TRY(upload(dstate, std::vector<float>(static_cast<size_t>(nv * D * D), 0.0f)));
  STRATA_TRY(upload(dnorm, norm_weight(seed + 3, static_cast<size_t>(D))));
  STRATA_TRY(alloc_filled(dhist, sizeof(float) * static_cast<size_t>(C * (d.conv_kernel - 1 + kMaxWindowRows)), 0));
  STRATA_TRY(alloc_poisoned(dc, static_cast<size_t>(C * kMaxWindowRows)));
  STRATA_TRY(alloc_poisoned(dout, static_cast<size_t>(value_dim * kMaxWindowRows)));
  STRATA_TRY(alloc_poisoned(dkeep_b, static_cast<size_t>(nv * kMaxWindowRows)));
  STRATA_TRY(alloc_poisoned(dkeep_a, static_cast<size_t>(nv * kMaxWindowRows)));
  STRATA_TRY(alloc_poisoned(dy, static_cast<size_t>(value_dim * kMaxWindowRows)));
  STRATA_TRY(alloc_filled(dq8, static_cast<size_t>(q8_stride * kMaxWindowRows), 0));

  const bool norm_ok = gdn_fused_norm_supported(d);
  GdnConvRecurrentArgs base;
  base.m = dmz.get<float>();
  base.m_stride = mz_stride;
  base.conv_w = dw.get<float>();
  base.hist = dhist.get<float>();
  base.c = dc.get<float>();
  base.b = dba.get<float>();
  base.a = dba.get<float>() + nv;
  base.ba_stride = 2 * nv;
  base.b_keep = dkeep_b.get<float>();
  base.a_keep = dkeep_a.get<float>();
  base.ssm_a = dA.get<float>();
  base.dt_bias = ddt.get<float>();
  base.state_in = dstate.get<float>();
  base.state_out = dstate.get<float>();
  base.out = dout.get<float>();
  if (norm_ok) {
    base.norm.z = dmz.get<float>() + C;
    base.norm.z_stride = mz_stride;
    base.norm.w = dnorm.get<float>();
    base.norm.y = dy.get<float>();
    base.norm.y_q8 = dq8.get();
    base.norm.q8_stride = q8_stride;
  }
  base.T = T;

  // Each mutation of `base` that must be refused.
  using Mutation = std::function<void(GdnConvRecurrentArgs&)>;
  using Arg = GdnConvRecurrentArgs;
  const float* z = dmz.get<float>() + C;
  std::vector<std::pair<std::string, Mutation>> refusals = {
      {"T = 0", [](Arg& a) { a.T = 0; }},
      {"state_in null", [](Arg& a) { a.state_in = nullptr; }},
      {"a_keep null with b_keep set", [](Arg& a) { a.a_keep = nullptr; }},
      {"b null", [](Arg& a) { a.b = nullptr; }},
      {"norm.y null with norm.z set",
       [z](Arg& a) {
         a.norm.y = nullptr;
         a.norm.z = z;
       }},
      {"proj.u set, proj.w null", [z](Arg& a) { a.proj.u = z; }},
      {"proj.u null", [&dw](Arg& a) { a.proj.w = dw.get(); }},
      {"proj.k not a multiple of 8", [&dw, z](Arg& a) {
         a.proj = {dw.get(), quant::Type::F32, 12, z, 16};
       }},
      {"proj.type Q8_0", [&dw, z](Arg& a) { a.proj = {dw.get(), quant::Type::Q8_0, 8, z, 8}; }},
      {"proj.u_stride < proj.k", [&dw, z](Arg& a) { a.proj = {dw.get(), quant::Type::F32, 16, z, 8}; }},
  };
  if (norm_ok) {
    const std::vector<std::pair<std::string, Mutation>> norm_refusals = {
        {"norm.z null", [](Arg& a) { a.norm.z = nullptr; }},
        {"norm.w null", [](Arg& a) { a.norm.w = nullptr; }},
        {"norm.z_stride < n_v_heads * head_dim", [value_dim](Arg& a) { a.norm.z_stride = value_dim - 1; }},
        {"norm.y_q8 misaligned", [](Arg& a) { a.norm.y_q8 = static_cast<uint8_t*>(a.norm.y_q8) + 4; }},
        {"norm.q8_stride too small", [](Arg& a) { a.norm.q8_stride = 16; }},
        {"norm.y = out", [](Arg& a) { a.norm.y = a.out; }},
    };
    refusals.insert(refusals.end(), norm_refusals.begin(), norm_refusals.end());
  } else {
    DeviceBuffer* y_buf = &dy;
    refusals.push_back({"norm without thread-block clusters", [z, y_buf, mz_stride](Arg& a) {
                          a.norm.z = z;
                          a.norm.z_stride = mz_stride;
                          a.norm.y = y_buf->get<float>();
                        }});
  }

  std::string accepted, first_message;
  for (const auto& [name, mutate] : refusals) {
    Arg a = base;
    mutate(a);
    const Status st = gdn_conv_recurrent(d, a, nullptr);
    if (st.ok()) accepted += " [" + name + "]";
    else if (first_message.empty()) first_message = st.message();
  }
  const Status base_st = gdn_conv_recurrent(d, base, nullptr);
  PARITY_CUDA(cudaDeviceSynchronize());  // a launch a check let through shows here, not in the next case

  const bool ok = base_st.ok() && accepted.empty();
  r.status = ok ? "OK" : "FAIL";
  r.detail = fmt::format("{} refusals{}", refusals.size(), norm_ok ? "" : " (no clusters: the norm's checks not reached)");
  if (!base_st.ok()) r.detail += "; the valid arguments were refused: " + base_st.message();
  if (!accepted.empty()) r.detail += "; accepted:" + accepted;
  if (ok) r.detail += "; e.g. \"" + first_message + "\"";
  r.metrics = {{"refusals", static_cast<int64_t>(refusals.size())}, {"all_refused", accepted.empty()}};
  rep.add(std::move(r));
  return Status::ok_status();
}

}  // namespace

Status run_gdn_cases(const ParityOptions& opt, Reporter& rep) {
  const Geometry released{16, 48, 128, 4};
  const Geometry small{4, 8, 32, 4};
  const Geometry mid{2, 6, 64, 4};
  const Geometry odd{3, 5, 16, 5};  // conv_dim 176 (not a multiple of a CTA), d = 16 (< one warp)
  const int windows[] = {1, 2, 4, 8};

  STRATA_TRY(run_conv_case(opt, rep, released, dims_of(released).conv_dim() + 64));
  STRATA_TRY(run_conv_case(opt, rep, small, dims_of(small).conv_dim()));
  STRATA_TRY(run_conv_case(opt, rep, odd, dims_of(odd).conv_dim() + 3));
  STRATA_TRY(run_commit_case(opt, rep, released, 36, 1));
  STRATA_TRY(run_commit_case(opt, rep, released, 3, 4));
  STRATA_TRY(run_commit_case(opt, rep, small, 5, 8));
  STRATA_TRY(run_commit_case(opt, rep, odd, 2, 3));
  STRATA_TRY(run_commit_case(opt, rep, odd, 2, 0));

  reference::ThreadPool pool;
  for (const Geometry& g : {released, small, mid})
    for (int T : windows)
      for (bool in_place : {true, false}) STRATA_TRY(run_recurrent_case(opt, rep, pool, g, T, in_place));

  for (const Geometry& g : {released, small, odd})
    for (int T : windows) STRATA_TRY(run_gated_norm_case(opt, rep, g, T));

  // The fused paths of the decoder's GDN step, T = 1..8: b/a from the concatenated beta|alpha
  // output with the kept copies, and the gated norm reading z from m|z and writing q8_1.
  for (const Geometry& g : {released, small, mid})
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      STRATA_TRY(run_recurrent_case(opt, rep, pool, g, T, /*in_place=*/T == 1, /*keep=*/true));
      STRATA_TRY(run_gated_norm_case(opt, rep, g, T, /*q8=*/true));
      STRATA_TRY(run_conv_recurrent_case(opt, rep, pool, g, T));
    }

  // The gated norm in the recurrent launch (GdnConvRecurrentArgs) at every head dim, then the
  // refusals.
  for (const Geometry& g : {released, mid, small})
    for (int T : {1, 2, 3, 8}) STRATA_TRY(run_fused_step_case(opt, rep, pool, g, T));
  // The gate projection in the launch: the released width (2560) in every float type and window
  // size, and a width of one 16-byte vector per lane or less.
  for (quant::Type type : {quant::Type::BF16, quant::Type::F32, quant::Type::F16})
    for (int T : {1, 2, 4, 8}) STRATA_TRY(run_gate_projection_case(opt, rep, pool, released, T, type, 2560));
  STRATA_TRY(run_gate_projection_case(opt, rep, pool, small, 3, quant::Type::BF16, 264));
  STRATA_TRY(run_gate_projection_case(opt, rep, pool, mid, 1, quant::Type::F32, 8));
  return run_refusal_case(opt, rep);
}

}  // namespace strata::cuda
