// `strata run`: generation with the fp32 CPU reference forward (src/reference). It is the
// executable spec, used by the oracle tests against transformers; slow by design.
//
//   strata run -m tiny.gguf --tokens 1,2,3 -n 4 --logits-out logits.npy   (ids in, ids out)
//   strata run -m model.gguf -p "Hello" --chat --think off --temp 0.7       (text, streamed)
//
// With --tokens the ids are printed on one line and no stop token ends generation (a stable
// interface for checks). With -p the text is tokenized with the GGUF's tokenizer (through the
// chat template with --chat), streamed as it is generated, and an end-of-generation token stops.
// Sampling (engine::Sampler) is greedy unless --temp > 0.
//
// The prompt runs in one forward call (GDN in its chunked form, as transformers' prefill),
// then every generated token but the last is fed back one at a time (GDN recurrent, as
// transformers' decode). Output rows:
//   --logits-out      [P + N - 1, n_vocab] (P = prompt length; [P, n_vocab] when N = 0):
//                     row i is the logits at position i, so row P-1+k scores generated token k.
//   --mtp-logits-out  [P + N - 1, n_vocab] ([P - 1, n_vocab] when N = 0): row i is the MTP
//                     head's draft logits at position i (from the trunk's wide residual at i and
//                     the token at i+1), i.e. its guess for the token at i+2.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "strata/engine/sampler.h"
#include "strata/model/chat.h"
#include "strata/model/tokenizer.h"
#include "strata/reference/forward.h"
#include "strata/reference/npy.h"

namespace strata::cli {
namespace {

struct RunOptions {
  std::string model;
  std::string tokens;
  std::string prompt;
  bool chat = false;
  std::string think;  // "", off, low, medium, high
  engine::SamplerConfig sampling;
  int n_generate = 16;
  std::string logits_out;
  std::string mtp_logits_out;
  bool no_chunked = false;
  int threads = 0;
};

Result<std::vector<int32_t>> parse_tokens(const std::string& text) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0 || v > INT32_MAX) {
      return Status::error(fmt::format("strata run: --tokens: expected comma-separated ids >= 0, got '{}'", item));
    }
    ids.push_back(static_cast<int32_t>(v));
    start = end + 1;
  }
  return ids;
}

// The prompt ids: from --tokens, or -p through the tokenizer (and the chat template).
Result<std::vector<int32_t>> prompt_ids(const RunOptions& opt, const model::Tokenizer* tokenizer) {
  if (!opt.tokens.empty()) return parse_tokens(opt.tokens);
  std::string text = opt.prompt;
  if (opt.chat) {
    model::ChatMessage user;
    user.role = "user";
    user.content = opt.prompt;
    model::ChatOptions chat;
    chat.enable_thinking = opt.think != "off";
    if (opt.think != "off") chat.reasoning_effort = opt.think;
    auto rendered = model::render_chat({&user, 1}, chat);
    if (!rendered) return rendered.status();
    text = *rendered;
  }
  std::vector<int32_t> ids;
  for (model::TokenId id : tokenizer->encode(text)) ids.push_back(static_cast<int32_t>(id));
  if (ids.empty()) return Status::error("strata run: -p: the prompt encodes to no tokens");
  return ids;
}

// Where generated tokens go: ids collected for one line (--tokens), or text streamed.
class TokenSink {
 public:
  explicit TokenSink(const model::Tokenizer* tokenizer) : tokenizer_(tokenizer) {
    if (tokenizer_ != nullptr) stream_.emplace(*tokenizer_);
  }
  // False when generation should stop (an end-of-generation token in text mode).
  bool push(int32_t id) {
    ids_.push_back(id);
    if (!stream_) return true;
    if (tokenizer_->is_eog(id)) return false;
    const std::string piece = stream_->push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  void finish() {
    if (stream_) {
      const std::string rest = stream_->flush();
      fmt::print("{}\n", rest);
    } else {
      fmt::print("{}\n", fmt::join(ids_, ","));
    }
    std::fflush(stdout);
  }
  size_t count() const { return ids_.size(); }

 private:
  const model::Tokenizer* tokenizer_;
  std::optional<model::StreamDecoder> stream_;
  std::vector<int32_t> ids_;
};

// Runs the MTP head for one pending position when --mtp-logits-out is asked for.
Status mtp_step(const reference::Model& model, reference::SequenceState& state, std::span<const float> wide,
                std::span<const int32_t> next, const reference::ForwardOptions& fo, std::vector<float>& rows) {
  auto out = reference::forward_mtp(model, state, wide, next, fo);
  if (!out) return out.status();
  rows.insert(rows.end(), out->logits.begin(), out->logits.end());
  return Status::ok_status();
}

Status run(const RunOptions& opt) {
  if (opt.tokens.empty() == opt.prompt.empty()) return Status::error("strata run: give exactly one of --tokens and -p");
  if ((opt.chat || !opt.think.empty()) && opt.prompt.empty()) return Status::error("strata run: --chat and --think need -p");
  if (!opt.think.empty() && !opt.chat) return Status::error("strata run: --think needs --chat");
  if (opt.n_generate < 0) return Status::error(fmt::format("strata run: -n: expected >= 0, got {}", opt.n_generate));
  auto sampler = engine::Sampler::create(opt.sampling);
  if (!sampler) return sampler.status();
  auto loaded = reference::Model::open(opt.model, opt.threads);
  if (!loaded) return loaded.status();
  const reference::Model& model = **loaded;
  std::optional<model::Tokenizer> tokenizer;
  if (!opt.prompt.empty()) {
    auto tok = model::Tokenizer::from_gguf(model.file().metadata());
    if (!tok) return Status::error(fmt::format("strata run: {}: {}", opt.model, tok.error()));
    tokenizer.emplace(std::move(*tok));
  }
  auto prompt = prompt_ids(opt, tokenizer ? &*tokenizer : nullptr);
  if (!prompt) return prompt.status();
  const model::ModelConfig& c = model.config();
  const bool want_mtp = !opt.mtp_logits_out.empty();
  if (want_mtp && !c.plan.has_mtp()) {
    return Status::error(fmt::format("strata run: --mtp-logits-out: {} has no MTP block (nextn_predict_layers)", opt.model));
  }

  reference::ForwardOptions fo;
  fo.gdn = opt.no_chunked ? reference::GdnPath::Recurrent : reference::GdnPath::Auto;
  reference::SequenceState state = reference::SequenceState::create(c);
  const int64_t vocab = c.n_vocab, wide = c.n_wide();
  std::vector<float> logits_rows, mtp_rows;
  TokenSink sink(tokenizer ? &*tokenizer : nullptr);

  const auto t0 = std::chrono::steady_clock::now();
  auto out = reference::forward(model, state, *prompt, fo);
  if (!out) return out.status();
  const int64_t p = out->n_tok;
  logits_rows = out->logits;
  if (want_mtp && p > 1) {
    STRATA_TRY(mtp_step(model, state, {out->wide.data(), static_cast<size_t>((p - 1) * wide)},
                        std::span<const int32_t>(*prompt).subspan(1), fo, mtp_rows));
  }
  std::vector<float> last_wide(out->wide.end() - wide, out->wide.end());
  std::vector<float> last_logits(out->logits.end() - vocab, out->logits.end());
  const auto t1 = std::chrono::steady_clock::now();

  for (int i = 0; i < opt.n_generate; ++i) {
    const int32_t next = sampler->sample(last_logits);
    if (next < 0) return Status::error("strata run: the model produced no finite logit");
    const bool go_on = sink.push(next);
    if (want_mtp) STRATA_TRY(mtp_step(model, state, last_wide, {&next, 1}, fo, mtp_rows));
    if (!go_on || i + 1 == opt.n_generate) break;  // the last token is printed, not fed
    auto step = reference::forward(model, state, {&next, 1}, fo);
    if (!step) return step.status();
    logits_rows.insert(logits_rows.end(), step->logits.begin(), step->logits.end());
    last_logits = step->logits;
    last_wide = step->wide;
  }
  const auto t2 = std::chrono::steady_clock::now();

  sink.finish();
  const double prefill_s = std::chrono::duration<double>(t1 - t0).count();
  const double decode_s = std::chrono::duration<double>(t2 - t1).count();
  fmt::print(stderr,
             "strata run: prompt {} tokens in {:.3f} s ({:.2f} tok/s), generated {} tokens in {:.3f} s ({:.2f} tok/s) "
             "(fp32 reference, {} threads)\n",
             p, prefill_s, p / std::max(prefill_s, 1e-9), sink.count(), decode_s,
             sink.count() / std::max(decode_s, 1e-9), model.pool().size());

  if (!opt.logits_out.empty()) {
    STRATA_TRY(reference::write_npy_f32(opt.logits_out, logits_rows, static_cast<int64_t>(logits_rows.size()) / vocab, vocab));
  }
  if (want_mtp) {
    STRATA_TRY(reference::write_npy_f32(opt.mtp_logits_out, mtp_rows, static_cast<int64_t>(mtp_rows.size()) / vocab, vocab));
  }
  return Status::ok_status();
}

}  // namespace

CommandMain add_run_command(CLI::App& app) {
  app.description(
      "Generation with the fp32 CPU reference forward (slow; the executable spec).\n"
      "With --tokens: prints the generated ids, comma-separated, on one line; no stop token ends it.\n"
      "With -p: streams the generated text and stops at an end-of-generation token.\n"
      "The prompt runs in one pass (chunked GDN), generated tokens are fed back one at a time\n"
      "(recurrent GDN), as transformers does.");
  auto opt = std::make_shared<RunOptions>();
  app.add_option("-m,--model", opt->model, "qwen4exp GGUF file (any shard of a split set)")->required();
  app.add_option("--tokens", opt->tokens, "prompt token ids, comma-separated (e.g. 1,2,3); prints ids");
  app.add_option("-p,--prompt", opt->prompt, "prompt text, tokenized with the GGUF's tokenizer; streams text");
  app.add_flag("--chat", opt->chat, "wrap -p as a user turn in the model's chat format");
  app.add_option("--think", opt->think, "with --chat: thinking off, or its effort (low, medium, high)")
      ->check(CLI::IsMember({"off", "low", "medium", "high"}));
  app.add_option("-n", opt->n_generate, "tokens to generate (default 16)");
  app.add_option("--temp", opt->sampling.temperature, "temperature; 0 = greedy (default)");
  app.add_option("--top-k", opt->sampling.top_k, "keep the k most likely tokens (0 = off)");
  app.add_option("--top-p", opt->sampling.top_p, "keep the smallest set of mass >= p (1 = off)");
  app.add_option("--min-p", opt->sampling.min_p, "drop tokens below min_p x the most likely (0 = off)");
  app.add_option("--seed", opt->sampling.seed, "sampler seed (default 0)");
  app.add_option("--logits-out", opt->logits_out,
                 "write the logits as float32 .npy [P+N-1, vocab]: row i = position i (prompt rows, then\n"
                 "one row per fed-back generated token; [P, vocab] when -n 0)");
  app.add_option("--mtp-logits-out", opt->mtp_logits_out,
                 "write the MTP head's draft logits as float32 .npy [P+N-1, vocab] ([P-1, vocab] when -n 0):\n"
                 "row i is drafted from the wide residual at position i and the token at i+1 (guess for i+2)");
  app.add_flag("--no-chunked", opt->no_chunked,
               "run GDN token by token (the recurrent form) everywhere, also for the prompt; for checking\n"
               "chunked == recurrent");
  app.add_option("--threads", opt->threads, "worker threads (default: all hardware threads)");
  return [opt]() {
    const Status s = run(*opt);
    if (!s.ok()) {
      fmt::print(stderr, "{}\n", s.message());
      return 1;
    }
    return 0;
  };
}

}  // namespace strata::cli
