// The Backend over Decoder: windows of up to the decoder's max_window rows, commit(n) is
// the decoder's own rollback. The prompt runs in windows of max_window tokens, each committed.
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

  bool has_mtp() const override { return false; }
  Result<std::vector<float>> mtp_sync() override { return no_mtp(); }
  Result<std::vector<float>> mtp_start(int32_t) override { return no_mtp(); }
  Result<std::vector<float>> mtp_continue(int32_t) override { return no_mtp(); }

 private:
  static Status no_mtp() { return Status::error("engine: the CUDA backend has no MTP head yet (prompt lookup only)"); }

  std::unique_ptr<Decoder> decoder_;
  int64_t n_vocab_;
  int max_window_;
};

}  // namespace

Result<std::unique_ptr<Backend>> create_engine_backend(const reference::Model& model, const BackendOptions& options) {
  if (options.mtp) {
    return Status::error("engine: the CUDA backend has no MTP head yet: use prompt-lookup drafts (--spec-source lookup)");
  }
  DecoderOptions dopt;
  dopt.max_ctx = options.max_ctx;
  dopt.max_window = 8;
  auto dec = Decoder::create(model.config(), model.weights(), dopt);
  if (!dec) return dec.status();
  return std::unique_ptr<Backend>(
      std::make_unique<CudaBackend>(std::move(*dec), static_cast<int64_t>(model.config().n_vocab), dopt.max_window));
}

}  // namespace strata::cuda
