// Parity of the head's tail (head.h) against the CPU sampler: argmax_rows against engine::argmax
// and sample_rows against engine::Sampler::distribution walked with the same uniform u (what
// Sampler::sample does with its own draw). Both compare token ids, which must be identical. Rows
// carry planted ties (at the maximum, across the top-k cut, a row of +-0), NaN and +-inf.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "head.h"
#include "parity_harness.h"
#include "strata/engine/sampler.h"

namespace strata::cuda {
namespace {

constexpr int64_t kVocabs[] = {248320, 1000, 37};  // released, below kMaxSampleTopK, tiny
constexpr int kTs[] = {1, 2, 4, 8};
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Compares the device's token ids with the CPU's row by row and reports the case: OK when all are
// equal (then timed with opt.bench), else FAIL naming the first differing row (row_label(t)).
template <class L, class F>
Status report_ids(const ParityOptions& opt, Reporter& rep, CaseResult r, const std::vector<int32_t>& got,
                  const std::vector<int32_t>& want, const L& row_label, const F& launch) {
  int bad = 0;
  for (size_t t = 0; t < got.size(); ++t)
    if (got[t] != want[t] && bad++ == 0) r.detail = fmt::format("{}: got {} want {}", row_label(t), got[t], want[t]);
  r.status = bad == 0 ? "OK" : "FAIL";
  if (bad == 0) {
    r.detail = "ids identical";
    STRATA_TRY(add_timing(opt, r, launch));
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// A few random positions of a row of n set to v.
void plant(std::vector<float>& row, std::mt19937_64& rng, int count, float v) {
  for (int i = 0; i < count; ++i) row[rng() % row.size()] = v;
}

// Row r of an argmax case: r % 5 picks plain, tied maxima among NaN and +-inf, a row of +-0 led by
// NaN, nothing finite, or the maximum at the last index.
std::vector<float> argmax_row(uint64_t seed, int64_t n, int r) {
  std::vector<float> row = random_normal(seed, static_cast<size_t>(n));
  std::mt19937_64 rng(seed + 1);
  switch (r % 5) {
    case 1: {
      plant(row, rng, 3, 10.0f);
      plant(row, rng, 2, kNaN);
      plant(row, rng, 1, kInf);
      plant(row, rng, 1, -kInf);
      break;
    }
    case 2:
      for (int64_t i = 0; i < n; ++i) row[i] = i % 2 == 0 ? -0.0f : 0.0f;
      row[0] = kNaN;
      break;
    case 3:
      for (int64_t i = 0; i < n; ++i) row[i] = i % 3 == 0 ? kNaN : (i % 3 == 1 ? -kInf : kInf);
      break;
    case 4:
      row[n - 1] = 10.0f;
      plant(row, rng, 3, kNaN);
      row[n - 1] = 10.0f;
      break;
    default:
      break;
  }
  return row;
}

Status argmax_case(const ParityOptions& opt, Reporter& rep, int64_t n, int T) {
  const std::string line = fmt::format("argmax_rows(T={}, n_vocab={})", T, n);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  std::vector<float> logits;
  std::vector<int32_t> want;
  for (int r = 0; r < T; ++r) {
    const std::vector<float> row = argmax_row(seed + 17 * r, n, r);
    want.push_back(engine::argmax(row));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  DeviceBuffer dl, dout;
  STRATA_TRY(upload(dl, logits));
  STRATA_TRY(alloc_filled(dout, static_cast<size_t>(T) * sizeof(int32_t), 0x7F));
  const auto launch = [&] { return argmax_rows(dl.get<float>(), T, n, dout.get<int32_t>(), nullptr); };
  STRATA_TRY(launch());
  std::vector<int32_t> got;
  STRATA_TRY(download_synced(got, dout, static_cast<size_t>(T)));
  return report_ids(opt, rep, make_case("argmax_rows", line, {{"T", T}, {"n_vocab", n}}), got, want,
                    [](size_t t) { return fmt::format("row {}", t); }, launch);
}

// Row r of a sampling case: r % 4 picks plain (sigma 2), a tie of 2k+3 entries at the value
// ranked k/2 (so the top-k cut falls inside it) with NaN and +-inf, a row of +-0 (one tie over
// the whole vocabulary), or a peaked row (sigma 6: top-p stops early).
std::vector<float> sample_row(uint64_t seed, int64_t n, int k, int r) {
  std::vector<float> row = random_normal(seed, static_cast<size_t>(n), r % 4 == 3 ? 6.0f : 2.0f);
  std::mt19937_64 rng(seed + 1);
  if (r % 4 == 1) {
    std::vector<float> sorted(row);
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const int64_t at = std::min<int64_t>(std::max(k, 1), n) / 2;
    plant(row, rng, 2 * k + 3, sorted[static_cast<size_t>(at)]);
    plant(row, rng, 3, kNaN);
    plant(row, rng, 1, kInf);
    plant(row, rng, 1, -kInf);
  } else if (r % 4 == 2) {
    for (int64_t i = 0; i < n; ++i) row[i] = i % 2 == 0 ? 0.0f : -0.0f;
  }
  return row;
}

// Sampler::sample's walk over distribution() with a given u.
int32_t cpu_token(engine::Sampler& sampler, const std::vector<float>& row, double u) {
  const std::vector<engine::TokenProb> dist = sampler.distribution(row);
  if (dist.empty()) return -1;
  double cum = 0.0;
  for (const engine::TokenProb& t : dist) {
    cum += t.prob;
    if (u < cum) return t.id;
  }
  return dist.back().id;
}

Status sample_case(const ParityOptions& opt, Reporter& rep, int64_t n, int T, const SampleParams& p) {
  const std::string line = fmt::format("sample_rows(T={}, n_vocab={}, temp={}, top_k={}, top_p={}, min_p={})", T, n,
                                       p.temperature, p.top_k, p.top_p, p.min_p);
  if (!rep.wanted(line)) return Status::ok_status();
  const uint64_t seed = case_seed(opt.seed, line);
  engine::SamplerConfig cfg;
  cfg.temperature = p.temperature;
  cfg.top_k = p.top_k;
  cfg.top_p = p.top_p;
  cfg.min_p = p.min_p;
  auto sampler = engine::Sampler::create(cfg);
  if (!sampler) return sampler.status();
  std::mt19937_64 rng(seed);
  std::vector<float> logits;
  std::vector<double> u;
  std::vector<int32_t> want;
  for (int r = 0; r < T; ++r) {
    const std::vector<float> row = sample_row(seed + 17 * r, n, p.top_k, r);
    // The sampler's own construction of u; the last row takes the largest u (the walk's end).
    u.push_back(r == T - 1 && T > 1 ? 1.0 - 0x1.0p-53 : static_cast<double>(rng() >> 11) * 0x1.0p-53);
    want.push_back(cpu_token(*sampler, row, u.back()));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  DeviceBuffer dl, du, dout, dscratch;
  STRATA_TRY(upload(dl, logits));
  STRATA_TRY(upload(du, u));
  STRATA_TRY(alloc_filled(dout, static_cast<size_t>(T) * sizeof(int32_t), 0x7F));
  STRATA_TRY(dscratch.alloc(static_cast<size_t>(sample_scratch_bytes(T, n))));
  const auto launch = [&] {
    return sample_rows(dl.get<float>(), T, n, p, du.get<double>(), dscratch.get(), dout.get<int32_t>(), nullptr);
  };
  STRATA_TRY(launch());
  std::vector<int32_t> got;
  STRATA_TRY(download_synced(got, dout, static_cast<size_t>(T)));
  return report_ids(
      opt, rep,
      make_case("sample_rows", line,
                {{"T", T}, {"n_vocab", n}, {"temperature", p.temperature}, {"top_k", p.top_k}, {"top_p", p.top_p}, {"min_p", p.min_p}}),
      got, want, [&](size_t t) { return fmt::format("row {} (u={})", t, u[t]); }, launch);
}

// top_k off over a vocabulary larger than kMaxSampleTopK is the host sampler's: a clear error.
Status sample_refusal_case(Reporter& rep) {
  const int64_t n = 248320;
  const std::string line = fmt::format("sample_rows(T=1, n_vocab={}, top_k=0): refused", n);
  if (!rep.wanted(line)) return Status::ok_status();
  DeviceBuffer dl, du, dout;
  STRATA_TRY(dl.alloc(static_cast<size_t>(n) * sizeof(float)));
  STRATA_TRY(du.alloc(sizeof(double)));
  STRATA_TRY(dout.alloc(sizeof(int32_t)));
  SampleParams p;
  p.top_k = 0;
  const Status st = sample_rows(dl.get<float>(), 1, n, p, du.get<double>(), nullptr, dout.get<int32_t>(), nullptr);
  CaseResult r = make_case("sample_rows", line, {{"T", 1}, {"n_vocab", n}, {"top_k", 0}});
  r.status = st.ok() ? "FAIL" : "OK";
  r.detail = st.ok() ? "accepted (expected an error)" : st.message();
  rep.add(std::move(r));
  return Status::ok_status();
}

SampleParams params(float temperature, int32_t top_k, float top_p, float min_p) {
  SampleParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

}  // namespace

Status run_head_cases(const ParityOptions& opt, Reporter& rep) {
  for (int64_t n : kVocabs)
    for (int T : kTs) STRATA_TRY(argmax_case(opt, rep, n, T));
  const SampleParams sets[] = {
      params(1.0f, 40, 0.95f, 0.05f),  // a chat default
      params(0.7f, 1024, 1.0f, 0.0f),  // the largest k, nothing else
      params(1.3f, 20, 0.8f, 0.0f),    // top-p only after top-k
      params(0.8f, 1, 1.0f, 0.0f),     // k = 1: the argmax
      params(1.0f, 64, 1.0f, 0.1f),    // min-p only after top-k
      params(2.0f, 1000, 0.9f, 0.02f),
  };
  for (int64_t n : kVocabs) {
    for (const SampleParams& p : sets)
      for (int T : {1, 8}) STRATA_TRY(sample_case(opt, rep, n, T, p));
    for (int T : {2, 4}) STRATA_TRY(sample_case(opt, rep, n, T, sets[0]));
    // top_k off fits on the GPU when the vocabulary is at most kMaxSampleTopK.
    if (n <= kMaxSampleTopK) STRATA_TRY(sample_case(opt, rep, n, 8, params(1.0f, 0, 0.9f, 0.05f)));
  }
  STRATA_TRY(sample_refusal_case(rep));
  return Status::ok_status();
}

}  // namespace strata::cuda
