// Parity of the hyper-connection kernels (hc.h) against the reference arithmetic of
// src/reference/hc.cpp: reference::grouped_rms_norm, silu / sigmoid of reference/ops.h and
// reference::hc_combine, at the released geometry (S=4, H=2560, rank 320), a tiny one (S=2, H=64,
// rank 16) and an odd one (S=3, H=37, rank 19: the scalar norm path), T in {1, 2, 4, 8}.
#include <algorithm>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "hc.h"
#include "parity_harness.h"
#include "strata/reference/hc.h"
#include "strata/reference/ops.h"

namespace strata::cuda {
namespace {

// The kernels keep the reference's order; what differs is the order of the double sums of squares
// (rounded to the same float nearly always) and CUDA's expf (<= 2 ulp) against the host's: about
// 1e-7 relative, so 1e-5 leaves room without hiding a wrong index or a missed term.
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

Status hc_combine_case(const ParityOptions& opt, Reporter& rep, const HcGeometry& g, int T) {
  const std::string line = fmt::format("hc_combine(T={}, S={}, H={})", T, g.S, g.H);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  const size_t n = static_cast<size_t>(T) * g.S * g.H;
  const std::vector<float> x = random_normal(seed, n), y = random_normal(seed + 1, static_cast<size_t>(T) * g.H);
  std::vector<float> alpha = random_normal(seed + 2, static_cast<size_t>(T) * g.S, 0.3f);
  for (float& v : alpha) v += 1.0f;
  std::vector<float> want(x);
  reference::hc_combine(want, y, alpha, g.S, g.H, T);
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
  return Status::ok_status();
}

}  // namespace strata::cuda
