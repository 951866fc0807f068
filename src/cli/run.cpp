// `strata run`: generation with the fp32 CPU reference forward (src/reference), or with the
// CUDA decoder (--device cuda). The reference is the executable spec, used by the oracle tests
// against transformers; slow by design.
//
//   strata run -m tiny.gguf --tokens 1,2,3 -n 4 --logits-out logits.npy   (ids in, ids out)
//   strata run -m model.gguf -p "Hello" --chat --think off --temp 0.7       (text, streamed)
//   strata run -m tiny.gguf --tokens 1,2,3 -n 32 --spec 4 --ids-out ids.json  (speculative)
//
// With --tokens the ids are printed on one line and no stop token ends generation (a stable
// interface for checks). With -p the text is tokenized with the GGUF's tokenizer (through the
// chat template with --chat), streamed as it is generated, and an end-of-generation token stops.
// Sampling (engine::Sampler) is greedy unless --temp > 0.
//
// The prompt runs in one forward call (GDN in its chunked form, as transformers' prefill),
// then every generated token but the last is fed back one at a time (GDN recurrent, as
// transformers' decode). With --spec N the generated tokens are fed back in verify windows of
// up to N + 1 (engine/generate.h, docs/SPEC.md); on the reference a window computes exactly
// what token-by-token feeding computes, so greedy output is identical and sampled output has
// the same distribution. Output rows (the same with and without --spec):
//   --logits-out      [P + N - 1, n_vocab] (P = prompt length; [P, n_vocab] when N = 0):
//                     row i is the logits at position i, so row P-1+k scores generated token k.
//   --mtp-logits-out  [P + N - 1, n_vocab] ([P - 1, n_vocab] when N = 0): row i is the MTP
//                     head's draft logits at position i (from the trunk's wide residual at i and
//                     the token at i+1), i.e. its guess for the token at i+2.
#include <algorithm>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "strata/bench/spec_json.h"
#include "strata/engine/backend.h"
#include "strata/engine/generate.h"
#include "strata/engine/sampler.h"
#if STRATA_HAVE_CUDA
#include "strata/cuda/engine_backend.h"
#endif
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
  engine::SpecConfig spec;
  std::string spec_source = "auto";
  std::string ids_out;
  std::string device = "cpu";
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

nlohmann::json stats_json(const engine::SpecStats& s, const RunOptions& opt, const engine::Backend& backend) {
  nlohmann::json j = {{"spec", opt.spec.max_drafts},
                      {"source", opt.spec_source},
                      {"min_p", opt.spec.min_p},
                      {"backend", backend.name()},
                      {"mtp_available", backend.has_mtp()}};
  j.update(bench::spec_counts_json(s));
  return j;
}

Status write_ids_json(const std::string& path, const engine::GenerateResult& r, const RunOptions& opt,
                      const engine::Backend& backend) {
  const nlohmann::json doc = {
      {"ids", r.ids}, {"prompt_tokens", r.prompt_tokens}, {"stats", stats_json(r.stats, opt, backend)}};
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::error(fmt::format("strata run: --ids-out: cannot write {}", path));
  const std::string text = doc.dump() + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return Status::error(fmt::format("strata run: --ids-out: error writing {}", path));
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

  const bool cuda = opt.device == "cuda";
  const bool spec_mtp = opt.spec.max_drafts > 0 && opt.spec.source != engine::DraftSource::Lookup;
  if (opt.spec.source == engine::DraftSource::Mtp && opt.spec.max_drafts > 0) {
    if (!c.plan.has_mtp()) {
      return Status::error(fmt::format("strata run: --spec-source mtp: {} has no MTP block (nextn_predict_layers)", opt.model));
    }
  }

  engine::BackendOptions bo;
  bo.device = cuda ? engine::Device::Cuda : engine::Device::Cpu;
  bo.mtp = want_mtp || (spec_mtp && c.plan.has_mtp());
  bo.mtp_all_logits = want_mtp;
  bo.prefill_gdn = opt.no_chunked ? reference::GdnPath::Recurrent : reference::GdnPath::Auto;
#if STRATA_HAVE_CUDA
  auto backend = cuda ? cuda::create_engine_backend(model, bo) : engine::create_backend(model, bo);
#else
  auto backend = engine::create_backend(model, bo);
#endif
  if (!backend) return backend.status();

  engine::GenerateOptions go;
  go.n_generate = opt.n_generate;
  go.spec = opt.spec;
  go.record_logits = !opt.logits_out.empty();
  go.record_mtp_logits = want_mtp;
  TokenSink sink(tokenizer ? &*tokenizer : nullptr);
  auto result = engine::generate(**backend, *sampler, *prompt, go, [&](int32_t id) { return sink.push(id); });
  if (!result) return result.status();
  const engine::GenerateResult& r = *result;

  sink.finish();
  const int64_t p = r.prompt_tokens, vocab = c.n_vocab;
  const std::string engine_name =
      cuda ? std::string("cuda") : fmt::format("fp32 reference, {} threads", model.pool().size());
  fmt::print(stderr,
             "strata run: prompt {} tokens in {:.3f} s ({:.2f} tok/s), generated {} tokens in {:.3f} s ({:.2f} tok/s) "
             "({})\n",
             p, r.prefill_s, p / std::max(r.prefill_s, 1e-9), sink.count(), r.decode_s,
             sink.count() / std::max(r.decode_s, 1e-9), engine_name);
  if (opt.spec.max_drafts > 0) {
    fmt::print(stderr, "strata run: {} (--spec {}, source {}{})\n", r.stats.summary(), opt.spec.max_drafts,
               opt.spec_source,
               (*backend)->has_mtp() || opt.spec.source == engine::DraftSource::Lookup
                   ? ""
                   : "; the model has no MTP head: prompt lookup only");
  }
  if (!opt.ids_out.empty()) STRATA_TRY(write_ids_json(opt.ids_out, r, opt, **backend));
  const std::vector<float>& logits_rows = r.logits;
  const std::vector<float>& mtp_rows = r.mtp_logits;

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
      "(recurrent GDN), as transformers does; with --spec N in verify windows of up to N+1 tokens\n"
      "(drafts from the MTP head or prompt lookup), which changes no greedy token and no sampled\n"
      "distribution (docs/SPEC.md).");
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
  app.add_option("--spec", opt->spec.max_drafts,
                 "speculative decoding: up to N draft tokens per verify window (0 = off, the default; N <= 7)")
      ->check(CLI::Range(0, engine::kMaxDrafts));
  app.add_option("--spec-min-p", opt->spec.min_p,
                 "stop the MTP draft chain before a draft whose head probability (softmax at temperature 1)\n"
                 "is below P (default 0: draft N tokens)")
      ->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--spec-source", opt->spec_source,
                 "draft source: mtp (the MTP head), lookup (prompt lookup: what followed the newest 3-, 2- or\n"
                 "1-gram earlier in the context), auto (lookup when the newest 3-gram recurs, else MTP; the\n"
                 "default)")
      ->check(CLI::IsMember({"mtp", "lookup", "auto"}));
  app.add_option("--ids-out", opt->ids_out,
                 "write the generated token ids as JSON: {\"ids\": [...], \"prompt_tokens\": P, \"stats\": {...}}\n"
                 "(stats: windows, drafted, accepted, acceptance_rate, accepted/tokens per window, by source)");
  app.add_option("--device", opt->device, "cpu (the fp32 reference, the default) or cuda (the CUDA decoder)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  return [opt]() {
    opt->spec.source = opt->spec_source == "mtp"      ? engine::DraftSource::Mtp
                       : opt->spec_source == "lookup" ? engine::DraftSource::Lookup
                                                      : engine::DraftSource::Auto;
    const Status s = run(*opt);
    if (!s.ok()) {
      fmt::print(stderr, "{}\n", s.message());
      return 1;
    }
    return 0;
  };
}

}  // namespace strata::cli
