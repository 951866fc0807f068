// Parity of the hyper-connection kernels (hc.h) against the reference arithmetic of
// src/reference/hc.cpp: reference::grouped_rms_norm, silu / sigmoid of reference/ops.h and
// reference::hc_combine, at the released geometry (S=4, H=2560, rank 320), a tiny one (S=2, H=64,
// rank 16) and an odd one (S=3, H=37, rank 19: the scalar norm path), T in {1, 2, 4, 8}.
// The fused pair (hc_pre, hc_post) runs against reference::hc_mix itself (weights wrapped as
// model::Tensor) at the released geometry (S=4, H=2560, rank 320) and a small one (S=4, H=96,
// rank 32), T = 1..8, F32 / F16 / BF16 weights, with and without inject, and with the previous
// combine folded into hc_pre.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "hc.h"
#include "linear.h"
#include "parity_harness.h"
#include "strata/cuda/quantize.h"
#include "strata/quant/quantize.h"
#include "strata/reference/hc.h"
#include "strata/reference/matmul.h"
#include "strata/reference/ops.h"

namespace strata::cuda {
namespace {

// The kernels keep the reference's order; what differs is the order of the double sums of squares
// (rounded to the same float nearly always), CUDA's expf (<= 2 ulp) against the host's, and in
// hc_pre the dots' order and their operand (w * (x * norm) summed, then times inv_rms, where the
// reference sums w * ((x * inv_rms) * norm)): a few ulp per product, about 1e-7 relative over a
// row, so 1e-5 leaves room without hiding a wrong index or a missed term.
constexpr double kHcRelTol = 1e-5;
// combine, broadcast and add are one IEEE rounding per element on both sides: bit-exact.
constexpr double kExactTol = 0.0;

struct HcGeometry {
  int S, H, rank;
};
constexpr HcGeometry kGeometries[] = {{4, 2560, 320}, {2, 64, 16}, {3, 37, 19}};
constexpr int kTs[] = {1, 2, 4, 8};

// Fills the case's status from the comparison and, with opt.bench, times `launch`.
template <class F>
Status finish(const ParityOptions& opt, Reporter& rep, CaseResult r, const Diff& d, double tol, const F& launch) {
  if (judge(r, d, tol)) STRATA_TRY(add_timing(opt, r, launch));
  rep.add(std::move(r));
  return Status::ok_status();
}

// Runs `launch` once, reads back `out` (want.size() floats) and finishes the case against want.
template <class F>
Status check_output(const ParityOptions& opt, Reporter& rep, CaseResult r, const F& launch, const DeviceBuffer& out,
                    const std::vector<float>& want, double tol) {
  STRATA_TRY(launch());
  std::vector<float> got;
  STRATA_TRY(download_synced(got, out, want.size()));
  return finish(opt, rep, std::move(r), diff(got.data(), want.data(), want.size()), tol, launch);
}

Status hc_norm_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T) {
  const std::string line = fmt::format("hc_norm(T={}, S={}, H={})", T, g.S, g.H);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  const size_t wide = static_cast<size_t>(g.S) * g.H, n = wide * T;
  const float eps = 1e-6f;
  std::vector<float> x = random_normal(seed, n, 2.0f), w = norm_weight(seed + 1, wide);
  // Streams of different scale: one statistic per stream, not per row.
  for (int t = 0; t < T; ++t)
    for (int s = 0; s < g.S; ++s)
      for (int j = 0; j < g.H; ++j) x[(t * g.S + s) * static_cast<size_t>(g.H) + j] *= static_cast<float>(1 + 3 * s);
  std::vector<float> want(n);
  for (int t = 0; t < T; ++t)
    reference::grouped_rms_norm({x.data() + t * wide, wide}, w, g.H, eps, {want.data() + t * wide, wide});
  DeviceBuffer dx, dw, dy;
  STRATA_TRY(upload(dx, x));
  STRATA_TRY(upload(dw, w));
  STRATA_TRY(alloc_poisoned(dy, n));
  const auto launch = [&] { return hc_norm(dx.get<float>(), dw.get<float>(), T, g.S, g.H, eps, dy.get<float>(), nullptr); };
  return check_output(opt, rep, make_case("hc_norm", line, {{"T", T}, {"S", g.S}, {"H", g.H}}), launch, dy, want, kHcRelTol);
}

Status hc_down_act_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T) {
  const std::string line = fmt::format("hc_down_act(T={}, rank={}, S={})", T, g.rank, g.S);
  if (!rep.wanted(line)) return Status::ok_status();
  const size_t n = static_cast<size_t>(T) * g.rank;
  const std::vector<float> d = random_normal(case_seed(opt.seed, line), n, 4.0f);
  std::vector<float> want(d);
  const float s = static_cast<float>(g.S);
  for (float& v : want) v = reference::silu(v / s);
  DeviceBuffer dd;
  STRATA_TRY(upload(dd, d));
  const auto launch = [&] { return hc_down_act(dd.get<float>(), T, g.rank, g.S, nullptr); };
  return check_output(opt, rep, make_case("hc_down_act", line, {{"T", T}, {"rank", g.rank}, {"S", g.S}}), launch, dd, want,
                      kHcRelTol);
}

// u and alpha as src/reference/hc.cpp (the stream sum in order, then / S).
Status hc_gate_mean_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T, bool inject) {
  const std::string line = fmt::format("hc_gate_mean(T={}, S={}, H={}, inject={})", T, g.S, g.H, inject ? 1 : 0);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  const size_t wide = static_cast<size_t>(g.S) * g.H;
  const std::vector<float> gl = random_normal(seed, wide * T, 2.0f), xn = random_normal(seed + 1, wide * T);
  const std::vector<float> a = random_normal(seed + 2, static_cast<size_t>(T) * g.S, 3.0f);
  const float s = static_cast<float>(g.S);
  std::vector<float> want(static_cast<size_t>(T) * g.H + (inject ? static_cast<size_t>(T) * g.S : 0));
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < g.H; ++j) {
      float acc = 0.0f;
      for (int k = 0; k < g.S; ++k) {
        const size_t i = t * wide + static_cast<size_t>(k) * g.H + j;
        acc += reference::sigmoid(gl[i]) * xn[i];
      }
      want[static_cast<size_t>(t) * g.H + j] = acc / s;
    }
  if (inject)
    for (size_t i = 0; i < a.size(); ++i) want[static_cast<size_t>(T) * g.H + i] = 2.0f * reference::sigmoid(a[i] / s);
  DeviceBuffer dg, dxn, da, du, dalpha;
  STRATA_TRY(upload(dg, gl));
  STRATA_TRY(upload(dxn, xn));
  STRATA_TRY(upload(da, a));
  STRATA_TRY(alloc_poisoned(du, static_cast<size_t>(T) * g.H));
  STRATA_TRY(alloc_poisoned(dalpha, static_cast<size_t>(T) * g.S));
  const auto launch = [&] {
    return hc_gate_mean(dg.get<float>(), dxn.get<float>(), inject ? da.get<float>() : nullptr, T, g.S, g.H, du.get<float>(),
                        dalpha.get<float>(), nullptr);
  };
  STRATA_TRY(launch());
  std::vector<float> got;
  STRATA_TRY(download_synced(got, du, static_cast<size_t>(T) * g.H));
  if (inject) {
    std::vector<float> alpha;
    STRATA_TRY(download_synced(alpha, dalpha, static_cast<size_t>(T) * g.S));
    got.insert(got.end(), alpha.begin(), alpha.end());
  }
  return finish(opt, rep, make_case("hc_gate_mean", line, {{"T", T}, {"S", g.S}, {"H", g.H}, {"inject", inject}}),
                diff(got.data(), want.data(), want.size()), kHcRelTol, launch);
}

// The combine cases' inputs (alpha around 1, as 2 sigmoid(a / S) is) and the reference's result.
struct CombineCase {
  std::vector<float> x, y, alpha, want;
  CombineCase(uint64_t seed, const HcGeometry& g, int T)
      : x(random_normal(seed, static_cast<size_t>(T) * g.S * g.H)),
        y(random_normal(seed + 1, static_cast<size_t>(T) * g.H)),
        alpha(random_normal(seed + 2, static_cast<size_t>(T) * g.S, 0.3f)) {
    for (float& v : alpha) v += 1.0f;
    want = x;
    reference::hc_combine(want, y, alpha, g.S, g.H, T);
  }
};

Status hc_combine_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T) {
  const std::string line = fmt::format("hc_combine(T={}, S={}, H={})", T, g.S, g.H);
  if (!rep.wanted(line)) return Status::ok_status();
  const CombineCase c(case_seed(opt.seed, line), g, T);
  const std::vector<float>& x = c.x;
  const std::vector<float>& y = c.y;
  const std::vector<float>& alpha = c.alpha;
  const std::vector<float>& want = c.want;
  DeviceBuffer dx, dy, da;
  STRATA_TRY(upload(dx, x));
  STRATA_TRY(upload(dy, y));
  STRATA_TRY(upload(da, alpha));
  const auto launch = [&] { return hc_combine(dx.get<float>(), dy.get<float>(), da.get<float>(), T, g.S, g.H, nullptr); };
  return check_output(opt, rep, make_case("hc_combine", line, {{"T", T}, {"S", g.S}, {"H", g.H}}), launch, dx, want, kExactTol);
}

Status hc_broadcast_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T) {
  const std::string line = fmt::format("hc_broadcast(T={}, S={}, H={})", T, g.S, g.H);
  if (!rep.wanted(line)) return Status::ok_status();
  const size_t n = static_cast<size_t>(T) * g.S * g.H;
  const std::vector<float> e = random_normal(case_seed(opt.seed, line), static_cast<size_t>(T) * g.H);
  std::vector<float> want(n);
  for (int t = 0; t < T; ++t)
    for (int s = 0; s < g.S; ++s)
      for (int j = 0; j < g.H; ++j)
        want[(static_cast<size_t>(t) * g.S + s) * g.H + j] = e[static_cast<size_t>(t) * g.H + j];
  DeviceBuffer de, dx;
  STRATA_TRY(upload(de, e));
  STRATA_TRY(alloc_poisoned(dx, n));
  const auto launch = [&] { return hc_broadcast(de.get<float>(), T, g.S, g.H, dx.get<float>(), nullptr); };
  return check_output(opt, rep, make_case("hc_broadcast", line, {{"T", T}, {"S", g.S}, {"H", g.H}}), launch, dx, want, kExactTol);
}

Status add_inplace_case(const ParityOptions& opt, Reporter& rep, int64_t n) {
  const std::string line = fmt::format("add_inplace(n={})", n);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  const std::vector<float> y = random_normal(seed, static_cast<size_t>(n)), x = random_normal(seed + 1, static_cast<size_t>(n));
  std::vector<float> want(y);
  for (size_t i = 0; i < want.size(); ++i) want[i] += x[i];
  DeviceBuffer dy, dx;
  STRATA_TRY(upload(dy, y));
  STRATA_TRY(upload(dx, x));
  const auto launch = [&] { return add_inplace(dy.get<float>(), dx.get<float>(), n, nullptr); };
  return check_output(opt, rep, make_case("add_inplace", line, {{"n", n}}), launch, dy, want, kExactTol);
}

// ---- the fused pair: hc_pre and hc_post ----------------------------------------------------------

constexpr HcGeometry kFusedGeometries[] = {{4, 2560, 320}, {4, 96, 32}};

// A random float matrix (F32 / F16 / BF16) on the host, as the reference's model::Tensor, and on
// the device, as the kernels' DTensor. Not movable: tensor points into bytes.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  model::Tensor tensor;
  DeviceBuffer dev;
  DTensor view() const {
    DTensor d;
    d.type = tensor.type;
    d.data = dev.get();
    d.rows = tensor.rows();
    d.cols = tensor.cols();
    d.row_bytes = static_cast<int64_t>(tensor.row_bytes);
    return d;
  }
};

// Entries of scale ~ 2 / sqrt(cols), so every dot product stays O(1).
Status make_matrix(quant::Type type, int64_t rows, int64_t cols, uint64_t seed, HostMatrix& m) {
  const auto info = *quant::type_info(type);
  const int64_t row_bytes = cols / info.block_size * info.type_size;
  m.bytes.assign(static_cast<size_t>(rows * row_bytes), 0);
  STRATA_TRY(quant::fill_random_blocks(type, seed, m.bytes.data(), rows * cols / info.block_size,
                                       2.0f / std::sqrt(static_cast<float>(cols))));
  m.tensor.type = type;
  m.tensor.ne = {cols, rows, 1, 1};
  m.tensor.data = m.bytes.data();
  m.tensor.row_bytes = static_cast<uint64_t>(row_bytes);
  m.tensor.f32 = type == quant::Type::F32 ? reinterpret_cast<const float*>(m.bytes.data()) : nullptr;
  return upload(m.dev, m.bytes);
}

// The worse of two comparisons (each part of an output judged on its own scale).
Diff worse(const Diff& a, const Diff& b) {
  Diff d;
  d.rel = std::max(a.rel, b.rel);
  d.max_abs = std::max(a.max_abs, b.max_abs);
  d.finite = a.finite && b.finite;
  return d;
}

// One site: inputs, the reference's values and the device buffers of both kernels.
struct FusedSite {
  int T = 1;
  HcGeometry g{};
  bool fold = false;
  std::vector<float> x, norm;  // x: the X the mix takes (after the folded combine)
  std::vector<float> x_prev, y, alpha_prev;  // fold: x = x_prev + alpha_prev (x) y
  HostMatrix down, up, inject;
  model::Tensor norm_tensor;
  // Reference values.
  std::vector<float> r, alpha, inv_rms, u;
  // Device.
  DeviceBuffer dx, dnorm, dr, dalpha, dinv, du, dq8, dq8_want;
  DeviceBuffer dy, dalpha_prev, dx_out;  // fold: dx holds x_prev
  int64_t q8_stride = 0;
};

// reference::grouped_rms_norm's statistic (ops.cpp keeps it internal): the sum of squares in
// double, the mean rounded to float, then 1 / sqrt(mean + eps) in float.
float reference_inv_rms(const float* x, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  return 1.0f / std::sqrt(mean + eps);
}

Status make_fused_site(const std::string& line, uint64_t run_seed, const HcGeometry& g, int T, quant::Type type,
                       bool with_inject, bool fold, reference::ThreadPool& pool, FusedSite& f) {
  const uint64_t seed = case_seed(run_seed, line);
  const int64_t wide = static_cast<int64_t>(g.S) * g.H;
  const float eps = 1e-6f, s = static_cast<float>(g.S);
  f.T = T;
  f.g = g;
  f.x = random_normal(seed, static_cast<size_t>(wide * T), 2.0f);
  for (int t = 0; t < T; ++t)  // streams of different scale: one statistic per stream
    for (int k = 0; k < g.S; ++k)
      for (int j = 0; j < g.H; ++j) f.x[(static_cast<size_t>(t) * g.S + k) * g.H + j] *= static_cast<float>(1 + 3 * k);
  f.fold = fold;
  if (fold) {  // the X before the combine, the block output and its alpha; x becomes the combined X
    f.x_prev = f.x;
    f.y = random_normal(seed + 5, static_cast<size_t>(T) * g.H);
    f.alpha_prev = random_normal(seed + 6, static_cast<size_t>(T) * g.S, 0.3f);
    for (float& v : f.alpha_prev) v += 1.0f;
    reference::hc_combine(f.x, f.y, f.alpha_prev, g.S, g.H, T);
  }
  f.norm = norm_weight(seed + 1, static_cast<size_t>(wide));
  STRATA_TRY(make_matrix(type, g.rank, wide, seed + 2, f.down));
  STRATA_TRY(make_matrix(type, wide, g.rank, seed + 3, f.up));
  if (with_inject) STRATA_TRY(make_matrix(type, g.S, wide, seed + 4, f.inject));
  f.norm_tensor.type = quant::Type::F32;
  f.norm_tensor.ne = {wide, 1, 1, 1};
  f.norm_tensor.data = reinterpret_cast<const uint8_t*>(f.norm.data());
  f.norm_tensor.row_bytes = static_cast<uint64_t>(wide) * sizeof(float);
  f.norm_tensor.f32 = f.norm.data();

  // r as reference::hc_mix computes it on the way (it returns only u and alpha).
  std::vector<float> xn(f.x.size());
  for (int t = 0; t < T; ++t)
    reference::grouped_rms_norm({f.x.data() + t * wide, static_cast<size_t>(wide)}, f.norm, g.H, eps,
                                {xn.data() + t * wide, static_cast<size_t>(wide)});
  f.r = reference::matmul(f.down.tensor, xn, T, pool);
  for (float& v : f.r) v = reference::silu(v / s);
  reference::HcWeights w;
  w.norm = &f.norm_tensor;
  w.down = &f.down.tensor;
  w.up = &f.up.tensor;
  w.inject = with_inject ? &f.inject.tensor : nullptr;
  reference::HcMix mix = reference::hc_mix(w, g.S, g.H, eps, f.x, T, pool);
  f.u = std::move(mix.u);
  f.alpha = std::move(mix.alpha);
  f.inv_rms.resize(static_cast<size_t>(T) * g.S);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < g.S; ++k)
      f.inv_rms[static_cast<size_t>(t) * g.S + k] = reference_inv_rms(f.x.data() + t * wide + k * g.H, g.H, eps);

  STRATA_TRY(upload(f.dx, fold ? f.x_prev : f.x));
  if (fold) {
    STRATA_TRY(upload(f.dy, f.y));
    STRATA_TRY(upload(f.dalpha_prev, f.alpha_prev));
    STRATA_TRY(alloc_poisoned(f.dx_out, f.x.size()));
  }
  STRATA_TRY(upload(f.dnorm, f.norm));
  STRATA_TRY(alloc_poisoned(f.dr, static_cast<size_t>(T) * g.rank));
  STRATA_TRY(alloc_poisoned(f.dalpha, static_cast<size_t>(T) * g.S));
  STRATA_TRY(alloc_poisoned(f.dinv, static_cast<size_t>(T) * g.S));
  STRATA_TRY(alloc_poisoned(f.du, static_cast<size_t>(T) * g.H));
  f.q8_stride = q8_stride_for(g.H);
  STRATA_TRY(alloc_filled(f.dq8, static_cast<size_t>(T * f.q8_stride), 0xA5));
  return alloc_filled(f.dq8_want, static_cast<size_t>(T * f.q8_stride), 0x5A);
}

HcPreArgs pre_args(const FusedSite& f) {
  HcPreArgs a;
  a.x = f.dx.get<float>();
  a.norm = f.dnorm.get<float>();
  a.down = f.down.view();
  if (!f.alpha.empty()) a.inject = f.inject.view();
  a.T = f.T;
  a.S = f.g.S;
  a.H = f.g.H;
  a.rank = f.g.rank;
  a.eps = 1e-6f;
  a.r = f.dr.get<float>();
  a.alpha = f.dalpha.get<float>();
  a.inv_rms = f.dinv.get<float>();
  if (f.fold) {
    a.y = f.dy.get<float>();
    a.alpha_prev = f.dalpha_prev.get<float>();
    a.x_out = f.dx_out.get<float>();
  }
  return a;
}

HcPostArgs post_args(const FusedSite& f) {
  HcPostArgs a;
  a.x = f.fold ? f.dx_out.get<float>() : f.dx.get<float>();
  a.norm = f.dnorm.get<float>();
  a.inv_rms = f.dinv.get<float>();
  a.r = f.dr.get<float>();
  a.up = f.up.view();
  a.T = f.T;
  a.S = f.g.S;
  a.H = f.g.H;
  a.rank = f.g.rank;
  a.u = f.du.get<float>();
  a.u_q8 = f.dq8.get();
  a.u_q8_stride = f.q8_stride;
  return a;
}

// hc_pre: r, alpha (with inject) and inv_rms, each within kHcRelTol of the reference; with the
// fold, x_out bit-identical to reference::hc_combine.
// hc_post, fed by that hc_pre as in the decoder: u within kHcRelTol of reference::hc_mix's u, and
// its q8_1 bytes identical to quantize_q8_1 run on the same device u.
Status hc_fused_case(const ParityOptions& opt, Reporter& rep, reference::ThreadPool& pool, const HcGeometry& g, int T,
                     quant::Type type, bool with_inject, bool fold) {
  const std::string params = fmt::format("T={}, S={}, H={}, rank={}, type={}, inject={}, fold={}", T, g.S, g.H, g.rank,
                                         type_name(type), with_inject ? 1 : 0, fold ? 1 : 0);
  const std::string pre_line = "hc_pre(" + params + ")", post_line = "hc_post(" + params + ")";
  const bool want_pre = rep.wanted(pre_line), want_post = rep.wanted(post_line);
  if (!want_pre && !want_post) return Status::ok_status();
  FusedSite f;
  STRATA_TRY(make_fused_site(pre_line, opt.seed, g, T, type, with_inject, fold, pool, f));
  const nlohmann::json jp = {{"T", T},           {"S", g.S},           {"H", g.H},   {"rank", g.rank},
                             {"type", type_name(type)}, {"inject", with_inject}, {"fold", fold}};
  const HcPreArgs pre = pre_args(f);
  const HcPostArgs post = post_args(f);
  const auto launch_pre = [&] { return hc_pre(pre, nullptr); };
  const auto launch_post = [&] { return hc_post(post, nullptr); };
  STRATA_TRY(launch_pre());
  if (want_pre) {
    std::vector<float> r, alpha, inv;
    STRATA_TRY(download_synced(r, f.dr, f.r.size()));
    STRATA_TRY(download_synced(inv, f.dinv, f.inv_rms.size()));
    Diff d = worse(diff(r.data(), f.r.data(), r.size()), diff(inv.data(), f.inv_rms.data(), inv.size()));
    if (with_inject) {
      STRATA_TRY(download_synced(alpha, f.dalpha, f.alpha.size()));
      d = worse(d, diff(alpha.data(), f.alpha.data(), alpha.size()));
    }
    int64_t x_out_differing = 0;
    if (fold) {
      std::vector<float> x_out;
      STRATA_TRY(download_synced(x_out, f.dx_out, f.x.size()));
      for (size_t i = 0; i < x_out.size(); ++i)
        if (std::memcmp(&x_out[i], &f.x[i], sizeof(float)) != 0) ++x_out_differing;
    }
    rep.wanted(pre_line);  // the case in flight again, should timing fault
    CaseResult res = make_case("hc_pre", pre_line, jp);
    const bool ok = judge(res, d, kHcRelTol);
    if (fold) res.metrics["x_out_differing"] = x_out_differing;
    if (x_out_differing > 0) {
      res.status = "FAIL";
      res.detail += fmt::format(" x_out differs from reference::hc_combine in {} of {} values", x_out_differing, f.x.size());
    } else if (ok) {
      STRATA_TRY(add_timing(opt, res, launch_pre));
    }
    rep.add(std::move(res));
  }
  if (!want_post) return Status::ok_status();
  rep.wanted(post_line);
  STRATA_TRY(launch_pre());  // the timing above may have run it again: same values
  STRATA_TRY(launch_post());
  std::vector<float> u;
  STRATA_TRY(download_synced(u, f.du, f.u.size()));
  STRATA_TRY(quantize_q8_1(f.du.get<float>(), g.H, g.H, T, f.dq8_want.get(), f.q8_stride, nullptr));
  std::vector<uint8_t> q8, q8_want;
  STRATA_TRY(download_synced(q8, f.dq8, static_cast<size_t>(T * f.q8_stride)));
  STRATA_TRY(download_synced(q8_want, f.dq8_want, static_cast<size_t>(T * f.q8_stride)));
  // Only the q8_1 row's bytes (the stride's padding is neither kernel's).
  const int64_t row_bytes = q8_1_row_bytes(g.H);
  int64_t mismatched = 0;
  for (int t = 0; t < T; ++t)
    for (int64_t i = 0; i < row_bytes; ++i) {
      const size_t at = static_cast<size_t>(t * f.q8_stride + i);
      if (q8[at] != q8_want[at]) ++mismatched;
    }
  CaseResult res = make_case("hc_post", post_line, jp);
  const bool ok = judge(res, diff(u.data(), f.u.data(), u.size()), kHcRelTol);
  res.metrics["q8_bytes_differing"] = mismatched;
  if (mismatched > 0) {
    res.status = "FAIL";
    res.detail += fmt::format(" q8_1 bytes differing from quantize_q8_1: {} of {}", mismatched, T * row_bytes);
  } else if (ok) {
    STRATA_TRY(add_timing(opt, res, launch_post));
  }
  rep.add(std::move(res));
  return Status::ok_status();
}

}  // namespace

Status run_hc_cases(const ParityOptions& opt, Reporter& rep) {
  for (const HcGeometry& g : kGeometries)
    for (int T : kTs) {
      STRATA_TRY(hc_norm_case(opt, rep, g, T));
      STRATA_TRY(hc_down_act_case(opt, rep, g, T));
      STRATA_TRY(hc_gate_mean_case(opt, rep, g, T, true));
      STRATA_TRY(hc_gate_mean_case(opt, rep, g, T, false));
      STRATA_TRY(hc_combine_case(opt, rep, g, T));
      STRATA_TRY(hc_broadcast_case(opt, rep, g, T));
    }
  // The shared expert's [T, H] into the routed sum, an odd length, and a long one.
  for (int64_t n : {int64_t{2560}, int64_t{8} * 2560, int64_t{4097}, int64_t{3} << 20}) STRATA_TRY(add_inplace_case(opt, rep, n));
  reference::ThreadPool pool;
  for (const HcGeometry& g : kFusedGeometries)
    for (int T = 1; T <= kMaxWindowRows; ++T)
      for (quant::Type type : {quant::Type::F32, quant::Type::F16, quant::Type::BF16})
        for (bool inject : {true, false}) {
          STRATA_TRY(hc_fused_case(opt, rep, pool, g, T, type, inject, false));
          if (inject) STRATA_TRY(hc_fused_case(opt, rep, pool, g, T, type, inject, true));  // the ffn site's fold
        }
  return Status::ok_status();
}

}  // namespace strata::cuda
