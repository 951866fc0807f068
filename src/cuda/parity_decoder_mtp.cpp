// Parity of the CUDA decoder's MTP draft head (src/cuda/decoder_mtp.cpp) against the reference
// backend's (engine::ReferenceBackend over reference::forward_mtp), both driven through the
// engine's MTP contract (include/strata/engine/backend.h) on the same --model file:
//   decoder_mtp   a random prompt of 37 tokens (the GPU in windows of T = 1..8, which also makes
//                 it fill pending slots early), then
//                   mtp_sync         the draft logits of slots 0 .. P-2
//                   mtp_start(x)     slot P-1
//                   mtp_continue x3  a chain of 3 speculative slots (drafts: the reference's argmax)
//                 then a verify window [x, d1, d2, d3] committed at 2 rows (the chain's slots are
//                 dropped, only the kept rows feed the MTP) and mtp_start(y) + 2 chain steps.
//                 Every row's logits within the bound (relative L2 per row), the row counts equal.
//   decoder_mtp_stages  the prompt's first 25 tokens, then every stage of the MTP steps that fill slots
//                 0 .. P-2 (mtp_input, the block's stages, mtp_mix, mtp_head) against
//                 reference::forward_mtp's, per slot: the first stage beyond the bound says where
//                 a decoder_mtp difference starts.
// Models without an MTP block, and quantized ones, report SKIP. `--filter decoder_mtp` runs only
// these cases.
#include <algorithm>
#include <map>
#include <tuple>
#include <cmath>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "parity_harness.h"
#include "strata/cuda/decoder.h"
#include "strata/cuda/mmvq.h"
#include "strata/engine/backend.h"
#include "strata/reference/forward.h"
#include "strata/reference/model.h"
#include "strata/reference/state.h"

namespace strata::cuda {
namespace {

// f32 weights: the reference's arithmetic in another order through the trunk and the MTP block,
// as decoder_stages' bound for every stage (parity_decoder.cpp): 1e-4 relative per logit row. A
// wrong slot, position, token or row (rel ~1) or a dropped term fails. Quantized models are
// skipped: there a q8_1 code flip can turn a router near-tie into other experts, which moves a
// whole logit row by far more than any bound that still means something (decoder_stages
// handles such flips stage by stage; the MTP head is the trunk's block code on its own cache).
constexpr double kMtpF32RelTol = 1e-4;
constexpr int kMtpPrompt = 37;
// The stage case's prompt: short enough that its rows never outgrow the decoder's pending MTP rows
// (4 windows of 8), so no slot is filled early without the sink and mtp_sync reports every one.
constexpr int kMtpStagePrompt = 25;
constexpr int kMtpChain = 3;
constexpr int64_t kMtpMaxCtx = 128;

bool quantized(const model::Tensor& t) { return t && mmvq_takes_q8_1(t.type); }

// True when the model's mat-vec weights are quantized (the GPU then feeds them q8_1 activations).
bool has_quantized_matrices(const model::Weights& w) {
  if (quantized(w.output) || quantized(w.output_hc_down)) return true;
  for (const model::Block& b : w.blocks)
    for (const model::Tensor* t : {&b.hc_attn_down, &b.hc_ffn_up, &b.attn_q, &b.attn_qkv, &b.ffn_gate_inp,
                                   &b.ffn_down_exps, &b.ffn_down_shexp, &b.nextn_eh_proj})
      if (quantized(*t)) return true;
  return false;
}

int32_t argmax_row(std::span<const float> row) {
  int32_t best = -1;
  for (size_t i = 0; i < row.size(); ++i)
    if (std::isfinite(row[i]) && (best < 0 || row[i] > row[static_cast<size_t>(best)])) best = static_cast<int32_t>(i);
  return best;
}

// Row-by-row comparison of the two sides' logits, worst row and first row beyond the bound.
struct RowCheck {
  size_t vocab = 0;
  double tol = 0.0;
  int rows = 0;
  double worst = 0.0;
  std::string worst_at, first_bad;

  void compare(const std::string& what, int64_t slot0, const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size() || want.size() % vocab != 0) {
      if (first_bad.empty())
        first_bad = fmt::format("{}: {} values on the GPU, {} in the reference", what, got.size(), want.size());
      return;
    }
    for (size_t r = 0; r < want.size() / vocab; ++r) {
      const Diff d = diff(got.data() + r * vocab, want.data() + r * vocab, vocab);
      const std::string at = fmt::format("{} slot {}", what, slot0 + static_cast<int64_t>(r));
      ++rows;
      if (worst_at.empty() || d.rel > worst) {
        worst = d.rel;
        worst_at = at;
      }
      if (!(d.finite && d.rel <= tol) && first_bad.empty()) first_bad = at + ": " + d.text();
    }
  }
};

// The GPU side of the contract calls, as cuda::create_engine_backend's backend makes them.
struct GpuSide {
  Decoder& dec;
  Status window(std::span<const int32_t> tokens, int keep) {
    auto w = dec.forward(tokens);
    if (!w) return w.status();
    STRATA_TRY(dec.mtp_window());
    return dec.commit(keep);
  }
};

// Stage rows by (stage, block, position), in the order the stages were first emitted: the GPU
// emits an MTP fill in steps of up to 8 rows, the reference in one call, so rows are keyed by
// their slot rather than by call.
struct SlotStageLog {
  std::vector<std::pair<std::string, int>> order;
  std::map<std::tuple<std::string, int, int64_t>, std::vector<float>> rows;
  reference::StageSink sink() {
    return [this](std::string_view stage, int block, int64_t pos0, int64_t n_rows, std::span<const float> v) {
      const std::pair<std::string, int> key{std::string(stage), block};
      if (std::find(order.begin(), order.end(), key) == order.end()) order.push_back(key);
      const size_t cols = n_rows > 0 ? v.size() / static_cast<size_t>(n_rows) : 0;
      for (int64_t r = 0; r < n_rows; ++r)
        rows[{key.first, block, pos0 + r}].assign(v.begin() + r * cols, v.begin() + (r + 1) * cols);
    };
  }
};

// Fills the MTP slots of a prompt on both sides with stage dumps and compares them slot by slot.
std::string stage_line(const std::string& label) {
  return fmt::format("decoder_mtp_stages(model={}, P={})", label, kMtpStagePrompt);
}

Status mtp_stage_case(Reporter& rep, const reference::Model& ref, Decoder& dec, std::span<const int32_t> prompt,
                      const std::string& label) {
  CaseResult r;
  r.op = "decoder_mtp_stages";
  r.line = stage_line(label);
  r.params = {{"model", label}, {"P", static_cast<int64_t>(prompt.size())}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  const model::ModelConfig& c = ref.config();
  const int64_t P = static_cast<int64_t>(prompt.size()), W = c.n_wide();
  SlotStageLog want, got;
  const reference::StageSink want_sink = want.sink(), got_sink = got.sink();

  reference::SequenceState st = reference::SequenceState::create(c);
  reference::ForwardOptions fo;
  fo.gdn = reference::GdnPath::Recurrent;  // the GPU's form of the recurrence
  auto trunk = reference::forward(ref, st, prompt, fo);
  if (!trunk) return trunk.status();
  fo.sink = &want_sink;
  const std::span<const float> wide(trunk->wide.data(), static_cast<size_t>((P - 1) * W));
  auto mtp = reference::forward_mtp(ref, st, wide, prompt.subspan(1), fo);
  if (!mtp) return mtp.status();

  STRATA_TRY(dec.reset());
  GpuSide gpu{dec};
  for (int64_t at = 0, i = 0; at < P; ++i) {
    const int64_t T = std::min<int64_t>(i % kMaxWindowRows + 1, P - at);
    STRATA_TRY(gpu.window(prompt.subspan(static_cast<size_t>(at), static_cast<size_t>(T)), static_cast<int>(T)));
    at += T;
  }
  auto filled = dec.mtp_sync(&got_sink);
  if (!filled) return filled.status();

  // Stage by stage in emission order, slot by slot within a stage: the first row beyond the bound.
  std::string first_bad, worst_at;
  double worst = 0.0;
  int compared = 0;
  for (const auto& [stage, block] : want.order) {
    for (int64_t pos = 0; pos + 1 < P; ++pos) {
      const auto key = std::make_tuple(stage, block, pos);
      auto w = want.rows.find(key);
      if (w == want.rows.end()) continue;
      auto g = got.rows.find(key);
      const std::string at = fmt::format("{} block {} slot {}", stage, block, pos);
      if (g == got.rows.end() || g->second.size() != w->second.size()) {
        if (first_bad.empty()) first_bad = at + ": missing or wrong size on the GPU";
        continue;
      }
      const Diff d = diff(g->second.data(), w->second.data(), w->second.size());
      ++compared;
      if (worst_at.empty() || d.rel > worst) {
        worst = d.rel;
        worst_at = at;
      }
      if (!(d.finite && d.rel <= kMtpF32RelTol) && first_bad.empty()) first_bad = at + ": " + d.text();
    }
  }
  r.status = first_bad.empty() && compared > 0 ? "OK" : "FAIL";
  r.detail = fmt::format("{} stage rows, worst rel={:.1e} at {} (bound {:.0e})", compared, worst, worst_at,
                         kMtpF32RelTol);
  if (!first_bad.empty()) r.detail += "; first beyond bound: " + first_bad;
  if (compared == 0) r.detail += "; no stage compared";
  r.metrics = {{"worst_rel", worst}, {"rows", compared}, {"bound", kMtpF32RelTol}};
  rep.add(std::move(r));
  return Status::ok_status();
}

Status mtp_case(const ParityOptions& opt, Reporter& rep, const std::string& path, const std::string& label) {
  CaseResult r;
  r.op = "decoder_mtp";
  r.line = fmt::format("decoder_mtp(model={}, P={}, chain={})", label, kMtpPrompt, kMtpChain);
  r.params = {{"model", label}, {"P", kMtpPrompt}, {"chain", kMtpChain}};
  // The stage case shares this one's set-up: run when either line is wanted (the logit rows are
  // compared only when this line is).
  const bool stages = rep.wanted(stage_line(label));
  const bool rows = rep.wanted(r.line);
  if (!rows && !stages) return Status::ok_status();
  auto ref = reference::Model::open(path);
  if (!ref) {
    r.status = "FAIL";
    r.detail = ref.error();
    rep.add(std::move(r));
    return Status::ok_status();
  }
  const model::ModelConfig& c = (*ref)->config();
  if (!c.plan.has_mtp()) {
    r.status = "SKIP";
    r.detail = "the model has no MTP block";
    rep.add(std::move(r));
    return Status::ok_status();
  }
  if (has_quantized_matrices((*ref)->weights())) {
    r.status = "SKIP";
    r.detail = "quantized weights (routing near-ties flip whole rows): run it on the f32 file";
    rep.add(std::move(r));
    return Status::ok_status();
  }
  DecoderOptions dopt;
  dopt.device = opt.device;
  dopt.max_ctx = kMtpMaxCtx;
  dopt.max_window = kMaxWindowRows;
  dopt.mtp = true;
  dopt.mtp_all_logits = true;  // every filled slot's row is compared, not only the newest
  auto dec = Decoder::create(c, (*ref)->weights(), dopt);
  if (!dec) {
    r.status = "FAIL";
    r.detail = "decoder: " + dec.error();
    rep.add(std::move(r));
    return Status::ok_status();
  }
  if (!(*dec)->has_mtp()) return Status::error("parity: decoder_mtp: the decoder reports no MTP head");
  engine::BackendOptions bo;
  bo.mtp = true;
  bo.mtp_all_logits = true;
  bo.prefill_gdn = reference::GdnPath::Recurrent;  // the GPU's form of the recurrence
  auto want = engine::create_backend(**ref, bo);
  if (!want) return want.status();
  engine::Backend& cpu = **want;
  GpuSide gpu{**dec};

  std::mt19937_64 rng(case_seed(opt.seed, r.line));
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(c.n_vocab) - 1);
  std::vector<int32_t> prompt(kMtpPrompt);
  for (int32_t& t : prompt) t = id(rng);
  if (rows) {
    RowCheck check;
    check.vocab = c.n_vocab;
    check.tol = kMtpF32RelTol;
    const int64_t P = kMtpPrompt;

    // The prompt: the reference in one pass, the GPU in windows of 1, 2, .., 8 rows.
    auto pre = cpu.prefill(prompt, engine::LogitRows::None);
    if (!pre) return pre.status();
    for (int64_t at = 0, i = 0; at < P; ++i) {
      const int64_t T = std::min<int64_t>(i % kMaxWindowRows + 1, P - at);
      STRATA_TRY(gpu.window(std::span<const int32_t>(prompt).subspan(static_cast<size_t>(at), static_cast<size_t>(T)),
                            static_cast<int>(T)));
      at += T;
    }
    auto want_sync = cpu.mtp_sync();
    if (!want_sync) return want_sync.status();
    auto got_sync = gpu.dec.mtp_sync();
    if (!got_sync) return got_sync.status();
    check.compare("sync", 0, *got_sync, *want_sync);

    // mtp_start (its rows from slot0 on), then `steps` speculative slots on the reference's drafts.
    const auto chain = [&](const std::string& what, int32_t next, int64_t slot0, int steps,
                           std::vector<int32_t>& drafts) -> Status {
      auto w = cpu.mtp_start(next);
      if (!w) return w.status();
      auto g = gpu.dec.mtp_start(next);
      if (!g) return g.status();
      check.compare(what + " start", slot0, *g, *w);
      int64_t slot = slot0 + static_cast<int64_t>(w->size() / check.vocab) - 1;  // the start's last row
      for (int k = 0; k < steps; ++k) {
        const std::span<const float> last(w->data() + w->size() - check.vocab, check.vocab);
        drafts.push_back(argmax_row(last));
        w = cpu.mtp_continue(drafts.back());
        if (!w) return w.status();
        g = gpu.dec.mtp_continue(drafts.back());
        if (!g) return g.status();
        check.compare(fmt::format("{} chain step {}", what, k + 1), ++slot, *g, *w);
      }
      return Status::ok_status();
    };
    const int32_t x = id(rng), y = id(rng);
    std::vector<int32_t> drafts;
    STRATA_TRY(chain("first", x, P - 1, kMtpChain, drafts));

    // Verify window [x, d1, d2, d3] kept at 2 rows: the chain's slots go, rows P and P+1 feed the MTP.
    std::vector<int32_t> window{x};
    window.insert(window.end(), drafts.begin(), drafts.end());
    auto fw = cpu.forward(window, engine::LogitRows::None);
    if (!fw) return fw.status();
    STRATA_TRY(cpu.commit(2));
    STRATA_TRY(gpu.window(window, 2));
    std::vector<int32_t> drafts2;
    STRATA_TRY(chain("after rollback", y, P, 2, drafts2));

    r.status = check.first_bad.empty() ? "OK" : "FAIL";
    r.detail = fmt::format("{} logit rows, worst rel={:.1e} at {} (bound {:.0e})", check.rows, check.worst,
                           check.worst_at, check.tol);
    if (!check.first_bad.empty()) r.detail += "; first beyond bound: " + check.first_bad;
    r.metrics = {{"worst_rel", check.worst}, {"rows", check.rows}, {"bound", check.tol}};
    rep.add(std::move(r));
  }
  return stages ? mtp_stage_case(rep, **ref, **dec, std::span<const int32_t>(prompt).first(kMtpStagePrompt), label) : Status::ok_status();
}

}  // namespace

// Registered in parity_decoder.cpp's run_decoder_cases, once per --model file.
Status run_decoder_mtp_cases(const ParityOptions& opt, Reporter& rep) {
  for (const std::string& path : opt.models)
    STRATA_TRY(mtp_case(opt, rep, path, std::filesystem::path(path).filename().string()));
  return Status::ok_status();
}

}  // namespace strata::cuda
