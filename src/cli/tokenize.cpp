// `strata tokenize`: the tokenizer and chat formatter from the command line, a stable
// interface for checks and scripts.
//
//   strata tokenize -m FILE -p TEXT [--json]        ids of a text (space-separated, or JSON)
//   strata tokenize -m FILE -f FILE [--json]        ids of a file's bytes
//   strata tokenize -m FILE --decode "1 2 3"        text of ids (raw bytes on stdout)
//   strata tokenize -m FILE --chat REQ.json [--text] a chat request rendered (and tokenized)
//   strata tokenize -m FILE --batch HEXLINES        one JSON line per input line (hex bytes)
//   strata tokenize -m FILE -f BIG.txt --bench      throughput as JSON (MB/s, tokens/s)
//
// Special tokens written in the text (<|im_start|>) are matched unless --no-parse-special;
// bos/eos are added as the GGUF's add_bos_token/add_eos_token say unless --no-add-special.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "strata/gguf/gguf.h"
#include "strata/model/chat.h"
#include "strata/model/tokenizer.h"

namespace strata::cli {
namespace {

using model::TokenId;
using model::Tokenizer;

struct TokenizeOptions {
  std::string model;
  std::string prompt;
  std::string file;
  std::string chat;
  std::string batch;
  std::string decode;
  bool json = false;
  bool text = false;
  bool bench = false;
  double bench_seconds = 2.0;
  bool no_parse_special = false;
  bool no_add_special = false;
  const CLI::Option* prompt_given = nullptr;  // -p "" is a text too: presence, not emptiness
};

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(fmt::format("cannot open {}", path));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string ids_line(const std::vector<TokenId>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  return out;
}

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

Result<std::string> from_hex(std::string_view hex) {
  if (hex.size() % 2) return Status::error("odd number of hex digits");
  std::string out;
  out.reserve(hex.size() / 2);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return Status::error("not a hex digit");
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
}

// Ids separated by spaces and/or commas, with optional [ ] (a JSON list pastes as is).
Result<std::vector<TokenId>> parse_ids(const std::string& s, size_t vocab) {
  std::vector<TokenId> ids;
  std::string cleaned = s;
  for (char& c : cleaned) {
    if (c == ',' || c == '[' || c == ']') c = ' ';
  }
  std::istringstream in(cleaned);
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    long long v = std::strtoll(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || static_cast<size_t>(v) >= vocab) {
      return Status::error(fmt::format("--decode: '{}' is not a token id (expected 0..{})", word, vocab - 1));
    }
    ids.push_back(static_cast<TokenId>(v));
  }
  return ids;
}

// CPU time of this thread: on a shared machine the wall clock measures the neighbours too.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int run_bench(const Tokenizer& tok, const std::string& text, const model::EncodeOptions& eo, double seconds) {
  using clock = std::chrono::steady_clock;
  size_t runs = 0, tokens = 0;
  double best_wall = 1e30, best_cpu = 1e30, total_wall = 0.0;
  // Repeat whole encodes until the time is spent; report the best run (the least disturbed
  // by other processes), in CPU time (one core's throughput) and in wall time.
  while (total_wall < seconds || runs < 2) {
    auto t0 = clock::now();
    double c0 = thread_cpu_seconds();
    tokens = tok.encode(text, eo).size();
    double cpu = thread_cpu_seconds() - c0;
    double wall = std::chrono::duration<double>(clock::now() - t0).count();
    best_wall = std::min(best_wall, wall);
    best_cpu = std::min(best_cpu, cpu);
    total_wall += wall;
    ++runs;
  }
  nlohmann::json j = {{"bytes", text.size()},
                      {"tokens", tokens},
                      {"runs", runs},
                      {"best_cpu_seconds", best_cpu},
                      {"best_wall_seconds", best_wall},
                      {"mb_per_s", text.size() / best_cpu / 1e6},
                      {"tokens_per_s", tokens / best_cpu},
                      {"wall_mb_per_s", text.size() / best_wall / 1e6}};
  fmt::print("{}\n", j.dump());
  return 0;
}

int run_batch(const Tokenizer& tok, const std::string& path, const model::EncodeOptions& eo) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "strata tokenize: cannot open {}\n", path);
    return 1;
  }
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    Result<std::string> text = from_hex(line);
    if (!text) {
      fmt::print(stderr, "strata tokenize: {}:{}: {}\n", path, n, text.error());
      return 1;
    }
    std::vector<TokenId> ids = tok.encode(*text, eo);
    nlohmann::json j = {{"ids", ids}, {"decoded_hex", to_hex(tok.decode(ids))}};
    fmt::print("{}\n", j.dump());
  }
  return 0;
}

int run_tokenize(const TokenizeOptions& o) {
  int sources = (o.prompt_given->count() > 0) + !o.file.empty() + !o.chat.empty() + !o.batch.empty() + !o.decode.empty();
  if (sources != 1) {
    fmt::print(stderr, "strata tokenize: give exactly one of -p, -f, --chat, --batch, --decode\n");
    return 2;
  }
  std::string text = o.prompt;
  if (!o.file.empty()) {
    Result<std::string> r = read_file(o.file);
    if (!r) return fmt::print(stderr, "strata tokenize: {}\n", r.error()), 1;
    text = std::move(*r);
  }
  if (!o.chat.empty()) {
    Result<std::string> r = read_file(o.chat);
    if (!r) return fmt::print(stderr, "strata tokenize: {}\n", r.error()), 1;
    model::Json request = model::Json::parse(*r, nullptr, false);
    if (request.is_discarded()) return fmt::print(stderr, "strata tokenize: {}: not JSON\n", o.chat), 1;
    Result<model::ChatRequest> req = model::chat_request_from_json(request);
    if (!req) return fmt::print(stderr, "strata tokenize: {}: {}\n", o.chat, req.error()), 1;
    Result<std::string> prompt = model::render_chat(req->messages, req->options);
    if (!prompt) return fmt::print(stderr, "strata tokenize: {}: {}\n", o.chat, prompt.error()), 1;
    text = std::move(*prompt);
    if (o.text) {
      fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
  }
  if (o.model.empty()) {
    fmt::print(stderr, "strata tokenize: -m FILE is required\n");
    return 2;
  }
  Result<gguf::Model> file = gguf::Model::open(o.model);
  if (!file) return fmt::print(stderr, "strata tokenize: {}\n", file.error()), 1;
  Result<Tokenizer> tok = Tokenizer::from_gguf(file->metadata());
  if (!tok) return fmt::print(stderr, "strata tokenize: {}: {}\n", o.model, tok.error()), 1;

  model::EncodeOptions eo;
  eo.parse_special = !o.no_parse_special;
  eo.add_special = !o.no_add_special;
  if (!o.decode.empty()) {
    Result<std::vector<TokenId>> ids = parse_ids(o.decode, tok->vocab_size());
    if (!ids) return fmt::print(stderr, "strata tokenize: {}\n", ids.error()), 1;
    std::string out = tok->decode(*ids);
    if (o.json) {
      nlohmann::json j = {{"text", out}, {"hex", to_hex(out)}};
      fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    } else {
      fwrite(out.data(), 1, out.size(), stdout);
    }
    return 0;
  }
  if (!o.batch.empty()) return run_batch(*tok, o.batch, eo);
  if (o.bench) return run_bench(*tok, text, eo, o.bench_seconds);
  std::vector<TokenId> ids = tok->encode(text, eo);
  if (o.json) {
    nlohmann::json j = {{"ids", ids}, {"count", ids.size()}};
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{}\n", ids_line(ids));
  }
  return 0;
}

}  // namespace

CommandMain add_tokenize_command(CLI::App& app) {
  app.description("Text to token ids and back with the GGUF's tokenizer; chat rendering; throughput");
  auto opt = std::make_shared<TokenizeOptions>();
  app.add_option("-m,--model", opt->model, "GGUF file (any shard of a split set)");
  opt->prompt_given = app.add_option("-p,--prompt", opt->prompt, "Text to tokenize");
  app.add_option("-f,--file", opt->file, "File whose bytes to tokenize");
  app.add_option("--chat", opt->chat, "Chat request JSON (messages, tools, options) to render and tokenize");
  app.add_option("--batch", opt->batch, "File of hex-encoded texts, one per line; prints a JSON line each");
  app.add_option("--decode", opt->decode, "Token ids to turn back into text");
  app.add_flag("--json", opt->json, "Print JSON");
  app.add_flag("--text", opt->text, "With --chat: print the rendered prompt instead of ids (no -m needed)");
  app.add_flag("--bench", opt->bench, "Measure encode throughput on the text; prints JSON");
  app.add_option("--bench-seconds", opt->bench_seconds, "Time to spend in --bench")->check(CLI::Range(0.0, 600.0));
  app.add_flag("--no-parse-special", opt->no_parse_special, "Treat control tokens in the text as plain text");
  app.add_flag("--no-add-special", opt->no_add_special, "Do not add bos/eos even if the GGUF asks");
  return [opt] { return run_tokenize(*opt); };
}

}  // namespace strata::cli
