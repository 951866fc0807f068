// Synthetic qwen4exp packs: GGUF files with the exact tensor names, shapes and block types of
// the published packs (or a slice of them), filled with random but valid blocks, so a user
// can measure speed before downloading 70 GB (docs/SYNTH.md).
//
// Three steps, each usable on its own:
//   1. make_plan(options): every tensor (name, type, shape, bytes, shard, role), the metadata
//      and the per-shard sizes. Nothing is generated; the dry run prints this.
//   2. generate(plan, tensor, offset, dst): the bytes of any byte range of any tensor,
//      deterministic in (seed, tensor name), so the range equals the same range of a written
//      file. A bench can fill its own expert arena from here without any file.
//   3. write_pack(plan, dir) writes the split set; write_ram_pack / open_in_memory write one
//      unsplit file into RAM-backed storage, for `strata bench --synth` without disk space;
//      write_shape_pack writes one file of holes (names, types, shapes, no data) whose bytes a
//      GPU loader takes from generate(), for `strata bench --device cuda` at full size.
//
//   synth::Options opt;  opt.recipe = synth::Recipe::IQ3_XXS;  opt.layers = 4;  opt.experts = 16;
//   auto plan = synth::make_plan(opt);              if (!plan) return plan.status();
//   auto files = synth::write_pack(*plan, "out/");  // out/Qwen3.8-Flash-Next-SYNTH-...-0000K-of-0000N.gguf
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/common/status.h"
#include "strata/gguf/gguf.h"
#include "strata/quant/types.h"

namespace strata::synth {

// The type mixes of the packs people run (spec/reference-engine.md §5, gguf-layout.md §3).
// The four GSQ-RCO sizes (two shards: everything, then the n-gram table) and Unsloth's
// UD-Q4_K_XL (four shards: metadata only, then tensors in 50 GB pieces).
enum class Recipe : uint8_t { Q2_0, IQ2_XS, IQ3_XXS, IQ3_S, UD_Q4_K_XL };
inline constexpr Recipe kRecipes[] = {Recipe::Q2_0, Recipe::IQ2_XS, Recipe::IQ3_XXS, Recipe::IQ3_S,
                                      Recipe::UD_Q4_K_XL};

std::string_view recipe_name(Recipe r);  // "q2_0", "iq2_xs", "iq3_xxs", "iq3_s", "ud_q4_k_xl"
std::optional<Recipe> recipe_from_name(std::string_view name);  // case-insensitive
std::string recipe_names();  // "q2_0, iq2_xs, ..." for messages

// What the published files of a recipe weigh (bytes; 0 = not published). GSQ-RCO:
// reference-engine.md §5.2; UD-Q4_K_XL: gguf-layout.md §3.8 and reference-engine.md §5.2.
struct PublishedSizes {
  uint64_t without_table = 0;   // every shard except the n-gram table's (GSQ-RCO: shard 1)
  uint64_t routed_experts = 0;  // ffn_{gate,up,down}_exps of the 48 trunk layers
  uint64_t table_shard = 0;     // the GSQ-RCO shard 2 file (the table alone)
  uint64_t all_shards = 0;      // the whole download
};
PublishedSizes published_sizes(Recipe r);

struct Options {
  Recipe recipe = Recipe::IQ3_XXS;
  uint32_t layers = 48;          // trunk blocks 0..layers-1 of the released model (1..48)
  uint32_t experts = 512;        // routed experts per block (10..512: at least top-k)
  bool mtp = false;              // append the MTP block (blk.<layers>, nextn_predict_layers = 1)
  uint64_t seed = 1;
  // Share of all routing taken by the most-used 55% of experts under random hidden states
  // (0.88 measured on the real model; 0.55 = uniform). Range [0.55, 0.99].
  double routing_skew = 0.88;
  bool router_f32 = false;       // GSQ-RCO ships BF16 routers; the converter's rule is F32
  bool random_table = false;     // fill the 29 GB n-gram table (default: zero blocks, a file hole)
};

// Checks the options; messages read "synth: <what> (expected X, got Y)".
Status validate(const Options& options);

// What part of the model a tensor is; names match strata::model::role_name.
enum class Role : uint8_t {
  RoutedGate, RoutedUp, RoutedDown, SharedExpert, Router, Attention, Gdn, HyperConnection,
  NgramTable, PleLayer, Embedding, Head, Mtp,
};
inline constexpr int kRoleCount = static_cast<int>(Role::Mtp) + 1;
std::string_view role_name(Role role);
bool is_routed_expert(Role role);

// How a tensor's values are drawn (the magnitudes keep activations finite through 48 blocks).
enum class Init : uint8_t {
  Matrix,  // random blocks, std = TensorPlan::std_dev (gain / sqrt(fan_in) for projections)
  Router,  // as Matrix, each row (expert) scaled by its routing weight (Plan::router_scale)
  Norm,    // 1 + small noise (norm weights with the converter's +1 folded in, ssm_norm)
  SsmA,    // A = -exp(A_log), A in [-16, -1]
  SsmDt,   // dt bias = softplus^-1(dt), dt log-uniform in [1e-3, 1e-1]
  Conv,    // depthwise conv taps, std 0.5 (4 taps keep the RMS)
  Zeros,   // the n-gram table by default: all-zero blocks written as a hole
};

struct TensorPlan {
  std::string name;
  quant::Type type = quant::Type::F32;
  std::vector<int64_t> ne;       // ggml order, ne[0] = row length (fan-in)
  uint64_t n_elements = 0;
  uint64_t nbytes = 0;
  uint32_t shard = 0;
  int32_t layer = -1;            // block index, -1 for global tensors
  Role role = Role::Embedding;
  Init init = Init::Matrix;
  float std_dev = 0.0f;          // Matrix / Router: std of the dequantized values

  uint64_t row_bytes() const;    // bytes of one ne[0]-long row
  uint64_t n_rows() const { return ne.empty() || ne[0] == 0 ? 0 : n_elements / static_cast<uint64_t>(ne[0]); }
};

struct ShardPlan {
  std::string path;              // file name inside the output directory
  uint32_t n_tensors = 0;
  uint64_t tensor_bytes = 0;     // sum of tensor sizes
  uint64_t file_bytes = 0;       // exact file size: header + padded tensors
  uint64_t hole_bytes = 0;       // bytes left as holes (sparse zero tensors)
};

struct Plan {
  Options options;
  std::string prefix;            // shard k is <prefix>-0000k-of-0000N.gguf
  gguf::Metadata metadata;       // shard 1's keys, without split.* (the writer adds those)
  std::vector<TensorPlan> tensors;  // in file order, shard by shard
  std::vector<ShardPlan> shards;
  // Log-normal spread of the per-expert router row scales, calibrated for routing_skew, and
  // the skew it reaches (lower than asked when few experts make the target impossible).
  double router_log_spread = 0.0;
  double routing_skew_reached = 0.0;

  const TensorPlan* find(std::string_view name) const;
  uint64_t total_bytes() const;                  // all tensors
  uint64_t bytes_of(Role role) const;
  uint64_t routed_expert_bytes() const;          // gate + up + down of the trunk blocks
  uint64_t written_bytes() const;                // total_bytes minus holes: what write_pack writes
  // Scale of expert `expert`'s router row in block `layer` relative to the median expert
  // (log-normal with spread router_log_spread; a seeded permutation per block).
  float router_scale(int32_t layer, int64_t expert) const;
};

// The whole plan; fails with validate()'s message on bad options.
Result<Plan> make_plan(const Options& options);

// The dry-run report: options, every tensor (name, type, shape, bytes, shard, role) when
// with_tensors, totals by role and by shard, and the published sizes next to the planned ones.
std::string plan_json(const Plan& plan, bool with_tensors = true);

// ---------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------

// Writes bytes [offset, offset + dst.size()) of `tensor` into dst. Values are generated in
// fixed chunks (one expert matrix of a 3-D tensor, about 1 MiB of rows otherwise) seeded by
// (seed, name, chunk), so any range, in any order, on any thread, gives the file's bytes.
Status generate(const Plan& plan, const TensorPlan& tensor, uint64_t offset, std::span<uint8_t> dst);

// Byte range of expert e's matrix in a 3-D expert tensor (ffn_{gate,up,down}_exps).
struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};
ByteRange expert_range(const TensorPlan& tensor, int64_t expert);

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

struct Progress {
  uint64_t done_bytes = 0;       // bytes generated and handed to the file so far
  uint64_t total_bytes = 0;      // Plan::written_bytes()
  std::string_view tensor;       // the tensor being written
};

struct WriteOptions {
  unsigned threads = 0;          // generator threads; 0 = hardware concurrency
  std::function<void(const Progress&)> progress;  // called from the writing thread, often
};

// Writes the split set into dir (created if missing); returns the paths, shard order.
Result<std::vector<std::string>> write_pack(const Plan& plan, const std::string& dir,
                                            const WriteOptions& options = {});

// The pack as one unsplit GGUF in RAM-backed storage, for `strata bench --synth` on machines
// without the disk space: written to `ram_dir` (a tmpfs; the n-gram table stays a hole and
// costs no memory). Needs RAM for the rest (Plan::written_bytes()).
struct MemoryOptions {
  std::string ram_dir = "/dev/shm";
  WriteOptions write;
};

// The file's name is removed when the RamPack goes; a loader that mapped it keeps the pages
// until it unmaps, so the usual sequence is: write, open with any loader, drop the RamPack.
class RamPack {
 public:
  explicit RamPack(std::string path) : path_(std::move(path)) {}
  RamPack(RamPack&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  RamPack& operator=(RamPack&& other) noexcept;
  RamPack(const RamPack&) = delete;
  RamPack& operator=(const RamPack&) = delete;
  ~RamPack();
  const std::string& path() const { return path_; }  // e.g. for reference::Model::open

 private:
  std::string path_;
};
Result<RamPack> write_ram_pack(const Plan& plan, const MemoryOptions& options = {});

// write_ram_pack + gguf::Model::open, the name removed at once: nothing outlives the Model.
Result<gguf::Model> open_in_memory(const Plan& plan, const MemoryOptions& options = {});

// A shape-only pack: one unsplit GGUF at `path` with the plan's exact metadata, tensor names,
// types, shapes and offsets, where every tensor is a hole (a sparse file: the header's few MB
// on disk, whatever the geometry). Its data reads as zeros; a loader that uploads the weights
// elsewhere (the CUDA bench) takes each tensor's bytes from generate() instead, so the full
// 48-layer packs (37-111 GB) never touch a disk. The metadata does not mark it: use it only
// with a reader that fills from the plan.
Status write_shape_pack(const Plan& plan, const std::string& path);

}  // namespace strata::synth
