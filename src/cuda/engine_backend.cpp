// The Backend over Decoder: windows of up to the decoder's max_window rows, commit(n) is
// the decoder's own rollback. The prompt runs in windows of max_window tokens, each committed.
// With BackendOptions::mtp on a model with an MTP block, the decoder's MTP head serves
// mtp_sync / mtp_start / mtp_continue (the same contract; Decoder::mtp_window() after each
// window hands it the trunk's pre-mixer rows).
#include "strata/cuda/engine_backend.h"

#include <algorithm>

#include <fmt/format.h>

#include "strata/cuda/decoder.h"

namespace strata::cuda {
namespace {

using namespace strata::engine;

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::unique_ptr<Decoder> decoder, int64_t n_vocab, int max_window)
      : decoder_(std::move(decoder)), n_vocab_(n_vocab), max_window_(max_window) {}

  std::string name() const override { return "cuda"; }
  int64_t n_vocab() const override { return n_vocab_; }
  int max_window() const override { return max_window_; }
  int64_t n_past() const override { return decoder_->n_past(); }

  Result<BackendWindow> prefill(std::span<const int32_t> tokens, LogitRows rows) override {
    if (tokens.empty()) return Status::error("engine: prefill of no tokens");
    BackendWindow all;
    for (size_t at = 0; at < tokens.size(); at += max_window_) {
      const size_t n = std::min(tokens.size() - at, static_cast<size_t>(max_window_));
      const bool last = at + n == tokens.size();
      const LogitRows want = rows == LogitRows::All ? LogitRows::All
                             : rows == LogitRows::Last && last ? LogitRows::Last
                                                               : LogitRows::None;
      auto w = forward(tokens.subspan(at, n), want);
      if (!w) return w.status();
      STRATA_TRY(commit(static_cast<int>(n)));
      all.n_rows += w->n_rows;
      all.argmax.insert(all.argmax.end(), w->argmax.begin(), w->argmax.end());
      all.logits.insert(all.logits.end(), w->logits.begin(), w->logits.end());
    }
    return all;
  }

  Result<BackendWindow> forward(std::span<const int32_t> tokens, LogitRows rows) override {
    if (tokens.empty() || tokens.size() > static_cast<size_t>(max_window_)) {
      return Status::error(fmt::format("engine: a window holds 1 .. {} tokens, got {}", max_window_, tokens.size()));
    }
    cuda::WindowRequest request;
    request.logits = rows != LogitRows::None;
    auto out = decoder_->forward(tokens, request);
    if (!out) return out.status();
    if (decoder_->has_mtp()) STRATA_TRY(decoder_->mtp_window());
    const size_t want = request.logits ? tokens.size() * static_cast<size_t>(n_vocab_) : 0;
    if (out->argmax.size() != tokens.size() || out->logits.size() != want) {
      return Status::error(fmt::format("engine: the CUDA decoder returned {} argmax and {} logits for {} rows",
                                       out->argmax.size(), out->logits.size(), tokens.size()));
    }
    BackendWindow w;
    w.n_rows = out->n_rows;
    w.argmax = std::move(out->argmax);
    if (rows == LogitRows::All) {
      w.logits = std::move(out->logits);
    } else if (rows == LogitRows::Last) {
      w.logits.assign(out->logits.end() - n_vocab_, out->logits.end());
    }
    return w;
  }

  Status commit(int n) override { return decoder_->commit(n); }

  bool has_mtp() const override { return decoder_->has_mtp(); }
  Result<std::vector<float>> mtp_sync() override {
    if (!has_mtp()) return no_mtp();
    return decoder_->mtp_sync();
  }
  Result<std::vector<float>> mtp_start(int32_t next) override {
    if (!has_mtp()) return no_mtp();
    return decoder_->mtp_start(next);
  }
  Result<std::vector<float>> mtp_continue(int32_t draft) override {
    if (!has_mtp()) return no_mtp();
    return decoder_->mtp_continue(draft);
  }

 private:
  static Status no_mtp() {
    return Status::error("engine: this CUDA backend keeps no MTP head (the model has no MTP block, or "
                         "BackendOptions::mtp is off)");
  }

  std::unique_ptr<Decoder> decoder_;
  int64_t n_vocab_;
  int max_window_;
};

}  // namespace

Result<std::unique_ptr<Backend>> create_engine_backend(const reference::Model& model, const BackendOptions& options) {
  DecoderOptions dopt;
  dopt.max_ctx = options.max_ctx;
  dopt.max_window = 8;
  // As the reference backend: asked for on a model without an MTP block, has_mtp() is false.
  dopt.mtp = options.mtp;
  dopt.mtp_all_logits = options.mtp_all_logits;
  auto dec = Decoder::create(model.config(), model.weights(), dopt);
  if (!dec) return dec.status();
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(std::move(*dec), static_cast<int64_t>(model.config().n_vocab), dopt.max_window));
}

}  // namespace strata::cuda
