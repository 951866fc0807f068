// `strata inspect FILE... [--json] [--tensors]`: what a GGUF file (or split set) holds.
// Metadata with long arrays summarised, tensor counts and bytes by type, the full tensor
// table with --tensors, and for qwen4exp a summary by role (routed experts, n-gram table,
// MTP, ...) with bytes and bits per weight. --json prints one document with exact byte
// counts for machines; the text form rounds sizes for people. A bad file is an error on
// stderr and a non-zero exit, after the good files are printed.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "strata/gguf/gguf.h"
#include "strata/model/tensor_role.h"
#include "strata/quant/types.h"

namespace strata::cli {
namespace {

// ordered_json keeps metadata in file order, as the text form does.
using json = nlohmann::ordered_json;

struct InspectOptions {
  std::vector<std::string> files;
  bool json = false;
  bool tensors = false;
};

constexpr size_t kArrayPreview = 8;    // array values shown before "..."
constexpr size_t kStringPreview = 80;  // bytes of a string shown in the text form

// ---------------------------------------------------------------------------------------
// Formatting helpers
// ---------------------------------------------------------------------------------------

// Decimal units, as model cards and the spec quote sizes ("111.33 GB").
std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 4) {
    v /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::string quote_text(std::string_view s) {
  std::string out = "\"";
  size_t n = std::min(s.size(), kStringPreview);
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    // UTF-8 lead and continuation bytes pass through so names in any script stay readable.
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out.push_back(static_cast<char>(c));
  }
  out += s.size() > n ? fmt::format("\"...({} bytes)", s.size()) : "\"";
  return out;
}

std::string type_label(const gguf::Value& v) {
  if (v.type() != gguf::ValueType::Array) return std::string(gguf::value_type_name(v.type()));
  const gguf::Array& a = v.as<gguf::Array>();
  return fmt::format("array[{}]", gguf::value_type_name(a.elem_type));
}

std::string scalar_text(const gguf::Value& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return quote_text(x);
        else if constexpr (std::is_same_v<T, gguf::Array>) return fmt::format("[{} items]", x.items.size());
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_floating_point_v<T>) return fmt::format("{}", x);
        else if constexpr (std::is_signed_v<T>) return fmt::format("{}", static_cast<int64_t>(x));
        else return fmt::format("{}", static_cast<uint64_t>(x));
      },
      v.storage());
}

std::string value_text(const gguf::Value& v) {
  if (v.type() != gguf::ValueType::Array) return scalar_text(v);
  const gguf::Array& a = v.as<gguf::Array>();
  std::string out = fmt::format("count {}:", a.items.size());
  for (size_t i = 0; i < a.items.size() && i < kArrayPreview; ++i) out += " " + scalar_text(a.items[i]);
  if (a.items.size() > kArrayPreview) out += " ...";
  return out;
}

json scalar_json(const gguf::Value& v) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, gguf::Array>) return json{{"count", x.items.size()}};
        else return json(x);
      },
      v.storage());
}

json value_json(const gguf::Value& v) {
  json j = {{"type", type_label(v)}};
  if (v.type() != gguf::ValueType::Array) {
    j["value"] = scalar_json(v);
    return j;
  }
  const gguf::Array& a = v.as<gguf::Array>();
  json first = json::array();
  for (size_t i = 0; i < a.items.size() && i < kArrayPreview; ++i) first.push_back(scalar_json(a.items[i]));
  j["count"] = a.items.size();
  j[a.items.size() > kArrayPreview ? "first" : "value"] = std::move(first);
  return j;
}

std::string shape_text(const gguf::TensorInfo& t) {
  std::string out = "[";
  for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) out += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
  return out + "]";
}

std::string type_name(quant::Type type) {
  auto info = quant::type_info(type);
  return info ? std::string(info->name) : fmt::format("type{}", static_cast<uint32_t>(type));
}

// ---------------------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------------------

struct Tally {
  uint64_t tensors = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
  void add(const gguf::TensorInfo& t) {
    ++tensors;
    elements += t.n_elements;
    bytes += t.nbytes;
  }
  double bits_per_weight() const { return elements ? static_cast<double>(bytes) * 8.0 / static_cast<double>(elements) : 0.0; }
};

std::map<std::string, Tally> tally_by_type(const gguf::Model& model) {
  std::map<std::string, Tally> out;
  for (const gguf::TensorInfo& t : model.tensors()) out[type_name(t.type)].add(t);
  return out;
}

bool is_qwen4exp(const gguf::Model& model) {
  auto arch = model.metadata().get_string("general.architecture");
  return arch.ok() && *arch == "qwen4exp";
}

// Per role, in enum order. block_count / nextn_predict_layers decide which blocks are MTP.
std::vector<Tally> tally_by_role(const gguf::Model& model) {
  const gguf::Metadata& md = model.metadata();
  auto blocks = md.get_uint("qwen4exp.block_count");
  auto nextn = md.get_uint("qwen4exp.nextn_predict_layers");
  uint32_t block_count = blocks.ok() ? static_cast<uint32_t>(*blocks) : 0;
  uint32_t nextn_layers = nextn.ok() ? static_cast<uint32_t>(*nextn) : 0;
  std::vector<Tally> out(model::kTensorRoleCount);
  for (const gguf::TensorInfo& t : model.tensors()) {
    out[static_cast<size_t>(model::classify_tensor(t.name, block_count, nextn_layers))].add(t);
  }
  return out;
}

Tally total_of(const gguf::Model& model) {
  Tally total;
  for (const gguf::TensorInfo& t : model.tensors()) total.add(t);
  return total;
}

// ---------------------------------------------------------------------------------------
// Text output
// ---------------------------------------------------------------------------------------

void print_text(const std::string& arg, const gguf::Model& model, bool with_tensors) {
  const auto& shards = model.shards();
  fmt::print("{}: GGUF v{}, alignment {}, {} shard{}\n", arg, shards[0].version(), shards[0].alignment(),
             shards.size(), shards.size() == 1 ? "" : "s");
  for (size_t s = 0; s < shards.size() && shards.size() > 1; ++s) {
    fmt::print("  shard {}: {} ({}, {} tensors)\n", s, shards[s].path(), human_bytes(shards[s].size()),
               shards[s].tensors().size());
  }
  const gguf::Metadata& md = model.metadata();
  size_t width = 0;
  for (const gguf::KeyValue& kv : md.entries()) width = std::max(width, kv.key.size());
  fmt::print("\nmetadata ({} keys)\n", md.size());
  for (const gguf::KeyValue& kv : md.entries()) {
    fmt::print("  {:<{}}  {:<14} {}\n", kv.key, width, type_label(kv.value), value_text(kv.value));
  }

  Tally total = total_of(model);
  fmt::print("\ntensors: {}, {} ({} bytes), {:.3f} bits per weight\n", total.tensors, human_bytes(total.bytes),
             total.bytes, total.bits_per_weight());
  for (const auto& [type, tally] : tally_by_type(model)) {
    fmt::print("  {:<8} {:>6} tensors {:>12}\n", type, tally.tensors, human_bytes(tally.bytes));
  }

  if (with_tensors) {
    size_t name_width = 4;
    for (const gguf::TensorInfo& t : model.tensors()) name_width = std::max(name_width, t.name.size());
    fmt::print("\n  {:<{}}  {:<8} {:<28} {:>12}  {}\n", "name", name_width, "type", "shape", "bytes", "shard");
    for (const gguf::TensorInfo& t : model.tensors()) {
      fmt::print("  {:<{}}  {:<8} {:<28} {:>12}  {}\n", t.name, name_width, type_name(t.type), shape_text(t),
                 human_bytes(t.nbytes), t.shard);
    }
  }

  if (is_qwen4exp(model)) {
    fmt::print("\nqwen4exp roles\n  {:<18} {:>7} {:>12} {:>9}\n", "role", "tensors", "bytes", "bits/w");
    std::vector<Tally> roles = tally_by_role(model);
    for (int r = 0; r < model::kTensorRoleCount; ++r) {
      const Tally& t = roles[static_cast<size_t>(r)];
      if (t.tensors == 0) continue;
      fmt::print("  {:<18} {:>7} {:>12} {:>9.4f}\n", model::role_name(static_cast<model::TensorRole>(r)), t.tensors,
                 human_bytes(t.bytes), t.bits_per_weight());
    }
    fmt::print("  {:<18} {:>7} {:>12} {:>9.4f}\n", "total", total.tensors, human_bytes(total.bytes),
               total.bits_per_weight());
  }
}

// ---------------------------------------------------------------------------------------
// JSON output
// ---------------------------------------------------------------------------------------

json tally_json(const Tally& t) {
  return {{"tensors", t.tensors}, {"elements", t.elements}, {"bytes", t.bytes}, {"bits_per_weight", t.bits_per_weight()}};
}

json model_json(const std::string& arg, const gguf::Model& model, bool with_tensors) {
  json j = {{"path", arg}, {"version", model.shards()[0].version()}, {"alignment", model.shards()[0].alignment()}};
  json shards = json::array();
  for (const gguf::File& f : model.shards()) {
    shards.push_back({{"path", f.path()}, {"bytes", f.size()}, {"data_offset", f.data_offset()},
                      {"tensors", f.tensors().size()}});
  }
  j["shards"] = std::move(shards);
  json metadata = json::object();
  for (const gguf::KeyValue& kv : model.metadata().entries()) metadata[kv.key] = value_json(kv.value);
  j["metadata"] = std::move(metadata);
  j["total"] = tally_json(total_of(model));
  json types = json::object();
  for (const auto& [type, tally] : tally_by_type(model)) types[type] = tally_json(tally);
  j["types"] = std::move(types);
  if (with_tensors) {
    json tensors = json::array();
    for (const gguf::TensorInfo& t : model.tensors()) {
      json ne = json::array();
      for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) ne.push_back(t.ne[d]);
      tensors.push_back({{"name", t.name}, {"type", type_name(t.type)}, {"ne", std::move(ne)}, {"bytes", t.nbytes},
                         {"shard", t.shard}, {"offset", t.offset}});
    }
    j["tensors"] = std::move(tensors);
  }
  if (is_qwen4exp(model)) {
    json roles = json::object();
    std::vector<Tally> tallies = tally_by_role(model);
    for (int r = 0; r < model::kTensorRoleCount; ++r) {
      if (tallies[static_cast<size_t>(r)].tensors == 0) continue;
      roles[std::string(model::role_name(static_cast<model::TensorRole>(r)))] = tally_json(tallies[static_cast<size_t>(r)]);
    }
    j["roles"] = std::move(roles);
  }
  return j;
}

int run_inspect(const InspectOptions& opt) {
  int status = 0;
  json files = json::array();
  bool first = true;
  for (const std::string& path : opt.files) {
    auto model = gguf::Model::open(path);
    if (!model) {
      fmt::print(stderr, "strata inspect: {}\n", model.error());
      status = 1;
      continue;
    }
    if (opt.json) {
      files.push_back(model_json(path, *model, opt.tensors));
    } else {
      if (!first) fmt::print("\n");
      print_text(path, *model, opt.tensors);
    }
    first = false;
  }
  if (opt.json) {
    // Strings in a file need not be UTF-8: replace bad bytes rather than throw.
    fmt::print("{}\n", json{{"files", std::move(files)}}.dump(2, ' ', false, json::error_handler_t::replace));
  }
  std::fflush(stdout);
  return status;
}

}  // namespace

CommandMain add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  app.description("Show a GGUF file's metadata, tensors and (for qwen4exp) size by role");
  app.add_option("files", opt->files, "GGUF files (any shard of a split set opens the whole set)")->required();
  app.add_flag("--json", opt->json, "Print one JSON document (exact byte counts)");
  app.add_flag("--tensors", opt->tensors, "List every tensor: name, type, shape, bytes, shard");
  return [opt] { return run_inspect(*opt); };
}

}  // namespace strata::cli
