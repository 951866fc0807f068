// Parity of the PLE injection (ple.h) against reference::ple_inject's arithmetic from the key and
// value projections on (the table rows and the projections are get_rows' and linear()'s cases):
// grouped norms, the signed-sqrt gate, reference::causal_conv_silu on the normalised gated value
// with the history rows, X += GV + C. Also the history move of ple_conv_commit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "parity_harness.h"
#include "ple.h"
#include "strata/reference/ops.h"

namespace strata::cuda {
namespace {

// As the HC norms (parity_hc.cpp): double sums in another order and CUDA's expf against the
// host's, ~1e-7 relative; the gate passes a dot of H products through a sqrt and a sigmoid,
// which does not amplify it. 1e-5 catches any wrong tap, row or stream.
constexpr double kPleRelTol = 1e-5;

struct PleGeometry {
  int S, H, ngram, K;
};
// Released (S=4, H=2560, ngram 3, kernel 4), tiny, and odd (ngram 2, kernel 3, H not a multiple of 4).
constexpr PleGeometry kGeometries[] = {{4, 2560, 3, 4}, {2, 64, 3, 4}, {3, 37, 2, 3}};
constexpr int kTs[] = {1, 2, 4, 8};

struct PleInputs {
  std::vector<float> kp, vp, x, norm_key, norm_query, norm_conv, conv_w;
  std::vector<float> history;  // [history rows, S*H], oldest first
};

// reference::ple_inject after the projections: x is updated, `history` becomes the last rows of
// [history; N] and `n_rows` receives N [T, S*H].
void reference_inject(const PleDims& d, const PleInputs& in, int T, std::vector<float>& x, std::vector<float>& history,
                      std::vector<float>& n_rows) {
  const int64_t wide = static_cast<int64_t>(d.S) * d.H;
  const float sqrt_h = static_cast<float>(std::sqrt(static_cast<double>(d.H)));
  std::vector<float> key(in.kp), query(x.size()), gated(static_cast<size_t>(T * wide));
  n_rows.assign(static_cast<size_t>(T * wide), 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    const auto row = [&](std::vector<float>& v) { return std::span<float>(v.data() + t * wide, static_cast<size_t>(wide)); };
    reference::grouped_rms_norm(row(key), in.norm_key, d.H, d.eps, row(key));
    reference::grouped_rms_norm(row(x), in.norm_query, d.H, d.eps, row(query));
    for (int64_t s = 0; s < d.S; ++s) {
      const int64_t o = t * wide + s * d.H;
      float a = reference::dot(key.data() + o, query.data() + o, d.H) / sqrt_h;
      const float sign = a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : 0.0f);
      a = std::sqrt(std::max(std::fabs(a), 1e-6f)) * sign;
      const float gate = reference::sigmoid(a);
      for (int64_t j = 0; j < d.H; ++j) gated[o + j] = gate * in.vp[t * d.H + j];
    }
    reference::grouped_rms_norm(row(gated), in.norm_conv, d.H, d.eps, row(n_rows));
  }
  std::vector<float> conv(static_cast<size_t>(T * wide));
  reference::causal_conv_silu(in.conv_w.data(), wide, d.conv_kernel, d.ngram, history, n_rows.data(), T, conv.data());
  for (int64_t i = 0; i < T * wide; ++i) x[i] += gated[i] + conv[i];
}

PleInputs make_inputs(uint64_t seed, const PleDims& d, int T, bool fresh) {
  const size_t wide = static_cast<size_t>(d.S) * d.H;
  PleInputs in;
  in.kp = random_normal(seed, wide * T);
  in.vp = random_normal(seed + 1, static_cast<size_t>(d.H) * T);
  in.x = random_normal(seed + 2, wide * T, 3.0f);
  in.norm_key = norm_weight(seed + 3, wide);
  in.norm_query = norm_weight(seed + 4, wide);
  in.norm_conv = norm_weight(seed + 5, wide);
  in.conv_w = random_normal(seed + 6, wide * d.conv_kernel, 0.5f);
  // A sequence's start holds zeros; a later window holds earlier N rows (unit scale, as N is).
  in.history = fresh ? std::vector<float>(wide * d.history(), 0.0f) : random_normal(seed + 7, wide * d.history());
  return in;
}

// The inputs on the device; `hist` is the history buffer as given (previous rows, then room).
struct PleDevice {
  DeviceBuffer kp, vp, x, norm_key, norm_query, norm_conv, conv_w, hist;
};

Status upload_inputs(const PleInputs& in, const std::vector<float>& hist, PleDevice& dev) {
  STRATA_TRY(upload(dev.kp, in.kp));
  STRATA_TRY(upload(dev.vp, in.vp));
  STRATA_TRY(upload(dev.x, in.x));
  STRATA_TRY(upload(dev.norm_key, in.norm_key));
  STRATA_TRY(upload(dev.norm_query, in.norm_query));
  STRATA_TRY(upload(dev.norm_conv, in.norm_conv));
  STRATA_TRY(upload(dev.conv_w, in.conv_w));
  STRATA_TRY(upload(dev.hist, hist));
  return Status::ok_status();
}

Status ple_inject_case(const ParityOptions& opt, Reporter& rep, const PleGeometry& g, int T, bool fresh) {
  const PleDims d{g.S, g.H, g.ngram, g.K, 1e-6f};
  const std::string line =
      fmt::format("ple_inject(T={}, S={}, H={}, ngram={}, K={}, history={})", T, g.S, g.H, g.ngram, g.K, fresh ? "zeros" : "rows");
  if (!rep.wanted(line)) return Status::ok_status();
  const PleInputs in = make_inputs(case_seed(opt.seed, line), d, T, fresh);
  const size_t wide = static_cast<size_t>(g.S) * g.H, hist_rows = static_cast<size_t>(d.history());

  std::vector<float> want_x(in.x), want_hist(in.history), want_n;
  reference_inject(d, in, T, want_x, want_hist, want_n);

  // The device history holds the previous rows, then the window's N rows (poisoned before).
  std::vector<float> hist(in.history);
  hist.resize((hist_rows + T) * wide, std::nanf(""));
  PleDevice dev;
  STRATA_TRY(upload_inputs(in, hist, dev));
  const auto launch = [&] {
    return ple_inject(d, dev.kp.get<float>(), dev.vp.get<float>(), dev.norm_key.get<float>(), dev.norm_query.get<float>(),
                      dev.norm_conv.get<float>(), dev.conv_w.get<float>(), dev.hist.get<float>(), dev.x.get<float>(), T, nullptr);
  };
  STRATA_TRY(launch());
  std::vector<float> got, got_h;
  STRATA_TRY(download_synced(got, dev.x, in.x.size()));
  STRATA_TRY(download_synced(got_h, dev.hist, hist.size()));

  // x, then the N rows, then the history rows (which must be untouched), in one comparison.
  std::vector<float> want(want_x);
  got.insert(got.end(), got_h.begin() + static_cast<int64_t>(hist_rows * wide), got_h.end());
  want.insert(want.end(), want_n.begin(), want_n.end());
  const Diff dd = diff(got.data(), want.data(), got.size());
  const bool history_kept = std::memcmp(got_h.data(), in.history.data(), hist_rows * wide * sizeof(float)) == 0;

  CaseResult r = make_case(
      "ple_inject", line, {{"T", T}, {"S", g.S}, {"H", g.H}, {"ngram", g.ngram}, {"K", g.K}, {"history", fresh ? "zeros" : "rows"}});
  const bool ok = judge(r, dd, kPleRelTol) && history_kept;
  if (!history_kept) {
    r.status = "FAIL";
    r.detail += " (history rows changed)";
  }
  // Re-running writes the same N rows and adds to x again; only the time matters here.
  if (ok) STRATA_TRY(add_timing(opt, r, launch));
  rep.add(std::move(r));
  return Status::ok_status();
}

// ple_conv_commit(n): rows n .. n + history - 1 of [history; T rows] move to the front, exactly.
Status ple_commit_case(const ParityOptions& opt, Reporter& rep, const PleGeometry& g, int T, int n) {
  const PleDims d{g.S, g.H, g.ngram, g.K, 1e-6f};
  const std::string line = fmt::format("ple_conv_commit(T={}, n={}, S={}, H={}, ngram={}, K={})", T, n, g.S, g.H, g.ngram, g.K);
  if (!rep.wanted(line)) return Status::ok_status();
  const size_t wide = static_cast<size_t>(g.S) * g.H, hist_rows = static_cast<size_t>(d.history());
  const std::vector<float> hist = random_normal(case_seed(opt.seed, line), (hist_rows + T) * wide);
  std::vector<float> want(hist.begin() + static_cast<int64_t>(n * wide),
                          hist.begin() + static_cast<int64_t>((n + hist_rows) * wide));
  DeviceBuffer dh;
  STRATA_TRY(upload(dh, hist));
  STRATA_TRY(ple_conv_commit(d, dh.get<float>(), n, nullptr));
  std::vector<float> got;
  STRATA_TRY(download_synced(got, dh, hist_rows * wide));
  const Diff dd = diff(got.data(), want.data(), want.size());
  CaseResult r = make_case("ple_conv_commit", line, {{"T", T}, {"n", n}, {"S", g.S}, {"H", g.H}, {"ngram", g.ngram}, {"K", g.K}});
  r.status = dd.finite && dd.max_abs == 0.0 ? "OK" : "FAIL";
  r.detail = dd.text();
  rep.add(std::move(r));
  return Status::ok_status();
}

// Two windows with a commit between them against the reference over all rows at once: the
// history the device keeps is what the next window's conv reads.
Status ple_two_windows_case(const ParityOptions& opt, Reporter& rep, const PleGeometry& g, int T1, int T2) {
  const PleDims d{g.S, g.H, g.ngram, g.K, 1e-6f};
  const std::string line = fmt::format("ple_inject(windows={}+{}, S={}, H={}, ngram={}, K={})", T1, T2, g.S, g.H, g.ngram, g.K);
  if (!rep.wanted(line)) return Status::ok_status();
  const int T = T1 + T2;
  const PleInputs in = make_inputs(case_seed(opt.seed, line), d, T, true);
  const size_t wide = static_cast<size_t>(g.S) * g.H, hist_rows = static_cast<size_t>(d.history());
  std::vector<float> want_x(in.x), want_hist(in.history), want_n;
  reference_inject(d, in, T, want_x, want_hist, want_n);

  std::vector<float> hist(in.history);
  hist.resize((hist_rows + kMaxWindowRows) * wide, std::nanf(""));
  PleDevice dev;
  STRATA_TRY(upload_inputs(in, hist, dev));
  int row0 = 0;
  for (int w : {T1, T2}) {
    const size_t o = static_cast<size_t>(row0) * wide;
    STRATA_TRY(ple_inject(d, dev.kp.get<float>() + o, dev.vp.get<float>() + static_cast<size_t>(row0) * g.H,
                          dev.norm_key.get<float>(), dev.norm_query.get<float>(), dev.norm_conv.get<float>(),
                          dev.conv_w.get<float>(), dev.hist.get<float>(), dev.x.get<float>() + o, w, nullptr));
    STRATA_TRY(ple_conv_commit(d, dev.hist.get<float>(), w, nullptr));
    row0 += w;
  }
  std::vector<float> got, got_h;
  STRATA_TRY(download_synced(got, dev.x, in.x.size()));
  STRATA_TRY(download_synced(got_h, dev.hist, hist_rows * wide));
  std::vector<float> want(want_x);
  got.insert(got.end(), got_h.begin(), got_h.end());
  want.insert(want.end(), want_hist.begin(), want_hist.end());
  const Diff dd = diff(got.data(), want.data(), got.size());
  CaseResult r = make_case("ple_inject", line, {{"T1", T1}, {"T2", T2}, {"S", g.S}, {"H", g.H}, {"ngram", g.ngram}, {"K", g.K}});
  judge(r, dd, kPleRelTol);
  rep.add(std::move(r));
  return Status::ok_status();
}

}  // namespace

Status run_ple_cases(const ParityOptions& opt, Reporter& rep) {
  for (const PleGeometry& g : kGeometries) {
    for (int T : kTs) {
      STRATA_TRY(ple_inject_case(opt, rep, g, T, true));
      STRATA_TRY(ple_inject_case(opt, rep, g, T, false));
      for (int n : {T, T / 2}) STRATA_TRY(ple_commit_case(opt, rep, g, T, n));
    }
    STRATA_TRY(ple_two_windows_case(opt, rep, g, 5, 8));
    STRATA_TRY(ple_two_windows_case(opt, rep, g, 1, 2));
  }
  return Status::ok_status();
}

}  // namespace strata::cuda
