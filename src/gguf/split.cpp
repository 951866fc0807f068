// Opening a model: one GGUF file, or a split set written by gguf-split (§1.10). A split set
// is named <prefix>-0000K-of-0000N.gguf (K is 1-based in the name, split.no 0-based in the
// keys); shard 0 carries the model's metadata and may hold no tensors. Any shard's path
// opens the whole set, and the set must be complete and self-consistent.
#include <charconv>
#include <cstdio>

#include <fmt/format.h>

#include "layout.h"
#include "strata/gguf/gguf.h"

namespace strata::gguf {

std::string split_path(std::string_view prefix, uint32_t no, uint32_t count) {
  return fmt::format("{}-{:05d}-of-{:05d}.gguf", prefix, no + 1, count);
}

std::optional<SplitName> parse_split_path(std::string_view path) {
  // "-00001-of-00004.gguf" is 20 characters; gguf-split always writes 5 digits.
  constexpr std::string_view kSuffix = ".gguf";
  constexpr size_t kTail = 1 + 5 + 4 + 5 + 5;
  if (path.size() <= kTail || path.substr(path.size() - kSuffix.size()) != kSuffix) return std::nullopt;
  std::string_view tail = path.substr(path.size() - kTail);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-") return std::nullopt;
  auto number = [](std::string_view digits, uint32_t* out) {
    for (char c : digits) if (c < '0' || c > '9') return false;
    return std::from_chars(digits.data(), digits.data() + digits.size(), *out).ec == std::errc();
  };
  uint32_t k = 0, n = 0;
  if (!number(tail.substr(1, 5), &k) || !number(tail.substr(10, 5), &n)) return std::nullopt;
  if (k == 0 || n == 0 || k > n) return std::nullopt;
  return SplitName{std::string(path.substr(0, path.size() - kTail)), k - 1, n};
}

namespace {

struct SplitKeys {
  uint64_t no = 0;
  uint64_t count = 0;
};

// split.count / split.no of one shard; nullopt count means "not a split file".
Result<std::optional<SplitKeys>> read_split_keys(const File& file) {
  const Metadata& md = file.metadata();
  if (!md.has("split.count")) return std::optional<SplitKeys>();
  SplitKeys keys;
  auto count = md.get_uint("split.count");
  if (!count) return count.status();
  auto no = md.get_uint("split.no");
  if (!no) return no.status();
  keys.count = *count;
  keys.no = *no;
  if (keys.count == 0 || keys.count > 99999) {
    return Status::error(fmt::format("gguf: key split.count: value {} out of range (expected 1..99999) in {}",
                                     keys.count, file.path()));
  }
  if (keys.no >= keys.count) {
    return Status::error(fmt::format("gguf: key split.no: value {} out of range for split.count {} in {}", keys.no,
                                     keys.count, file.path()));
  }
  return std::optional<SplitKeys>(keys);
}

// Opens every shard of the set that `first` belongs to, in split.no order.
Result<std::vector<File>> open_shards(File first, const SplitKeys& keys) {
  auto name = parse_split_path(first.path());
  if (!name) {
    return Status::error(fmt::format("gguf: {}: split.count is {} but the file name is not "
                                     "<prefix>-0000K-of-0000N.gguf, so the other shards cannot be found",
                                     first.path(), keys.count));
  }
  if (name->count != keys.count) {
    return Status::error(fmt::format("gguf: {}: mismatched split.count: key says {}, file name says {}",
                                     first.path(), keys.count, name->count));
  }
  if (name->no != keys.no) {
    return Status::error(fmt::format("gguf: {}: wrong split.no: key says {} (0-based), file name says shard {} "
                                     "(expected split.no {})",
                                     first.path(), keys.no, name->no + 1, name->no));
  }
  std::vector<File> shards;
  for (uint32_t i = 0; i < keys.count; ++i) {
    if (i == keys.no) {
      shards.push_back(std::move(first));
      continue;
    }
    std::string path = split_path(name->prefix, i, static_cast<uint32_t>(keys.count));
    auto shard = File::open(path, i);
    if (!shard) {
      return Status::error(fmt::format("gguf: split set {}: shard {} of {} missing or invalid: {}", name->prefix,
                                       i + 1, keys.count, shard.error()));
    }
    auto shard_keys = read_split_keys(*shard);
    if (!shard_keys) return shard_keys.status();
    if (!shard_keys->has_value()) {
      return Status::error(fmt::format("gguf: {}: key split.count: missing in a shard of a {}-file split set",
                                       path, keys.count));
    }
    if ((*shard_keys)->count != keys.count) {
      return Status::error(fmt::format("gguf: {}: mismatched split.count: this shard says {}, {} says {}", path,
                                       (*shard_keys)->count, shards.empty() ? name->prefix : shards[0].path(),
                                       keys.count));
    }
    if ((*shard_keys)->no != i) {
      return Status::error(fmt::format("gguf: {}: wrong split.no: expected {}, got {}", path, i,
                                       (*shard_keys)->no));
    }
    shards.push_back(std::move(shard.value()));
  }
  return shards;
}

}  // namespace

Result<Model> Model::open(const std::string& path) {
  auto first = File::open(path);
  if (!first) return first.status();
  auto keys = read_split_keys(*first);
  if (!keys) return keys.status();

  Model model;
  if (!keys->has_value() || (*keys)->count == 1) {
    model.shards_.push_back(std::move(first.value()));
  } else {
    auto shards = open_shards(std::move(first.value()), **keys);
    if (!shards) return shards.status();
    model.shards_ = std::move(shards.value());
  }

  for (uint32_t s = 0; s < model.shards_.size(); ++s) {
    File& shard = model.shards_[s];
    for (TensorInfo& t : shard.tensors_) {
      t.shard = s;
      auto [it, inserted] = model.by_name_.emplace(t.name, model.tensors_.size());
      if (!inserted) {
        const TensorInfo& other = model.tensors_[it->second];
        return Status::error(fmt::format("gguf: {}: tensor {}: duplicate tensor name across shards (also in {})",
                                         shard.path(), detail::item_name(t.name),
                                         model.shards_[other.shard].path()));
      }
      model.tensors_.push_back(t);
    }
  }

  // Required in a set (it is how a lost shard would otherwise go unnoticed); checked in a
  // single file too when present.
  const File& head = model.shards_.front();
  if (model.shards_.size() > 1 || head.metadata().has("split.tensors.count")) {
    auto expected = head.metadata().get_uint("split.tensors.count");
    if (!expected) return expected.status();
    if (*expected != model.tensors_.size()) {
      return Status::error(fmt::format("gguf: {}: key split.tensors.count: says {}, but {} tensors were found in {} shard(s)",
                                       head.path(), *expected, model.tensors_.size(), model.shards_.size()));
    }
  }
  return model;
}

const TensorInfo* Model::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Result<const TensorInfo*> Model::tensor(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) return Status::error(fmt::format("gguf: tensor {}: missing in {}", name, path()));
  return t;
}

}  // namespace strata::gguf
