// The recipes: which block type each tensor gets, per pack, and the calibration that makes the
// planned sizes land on the published ones (test: tests/unit/synth/plan_test.cpp).
//
// What is known about the published packs (spec/reference-engine.md §5.1, gguf-layout.md §3):
//   GSQ-RCO: routed gate/up one i-quant (or Q2_0), down Q2_0 or IQ4_NL per layer; BF16
//   hyper-connections, routers, indexer, ssm_alpha/beta and ple_value; ple_key Q2_0; the
//   output head IQ4_XS (an IQ2_XS run logged 337,715,200 B = 1,360 B per row); token_embd
//   "an IQ encoding"; the other dense projections "quantized"; the table IQ4_NL in shard 2.
//   UD-Q4_K_XL: the column of gguf-layout §3 (Q4_K gate/up, Q5_K on layer 2; Q5_1 down, Q8_0
//   on layers 2, 4, 30, 46, 47; Q8_0 dense; F32 routers and small tensors; BF16 indexer).
// Unknown, and so calibrated: how many layers get IQ4_NL down, and the type of the dense
// projections (GDN, attention, shared experts) and of token_embd in the GSQ-RCO sizes.
//
// Calibration (GB = 1e9 B; one routed tensor = 2560 x 640 x 512 = 838,860,800 weights):
//   bytes per routed tensor: Q2_0 235,929,600 (2.25 bpw); IQ2_XS 242,483,200 (2.3125);
//   IQ3_XXS 321,126,400 (3.0625); IQ3_S 360,448,000 (3.4375); IQ4_NL 471,859,200 (4.5).
//   An IQ4_NL instead of a Q2_0 down adds 235,929,600 B per layer.
//   routed experts = 48 x (2 x gate/up + Q2_0 down) + n_iq4nl x 235,929,600:
//     Q2_0    48 x 707,788,800                    = 33,973,862,400  (published 34.0, -0.08%)
//     IQ2_XS  48 x 720,896,000 +  4 x 235,929,600 = 35,546,726,400  (35.5, +0.13%)
//     IQ3_XXS 48 x 878,182,400 +  3 x 235,929,600 = 42,860,544,000  (42.9, -0.09%)
//     IQ3_S   48 x 956,825,600 + 19 x 235,929,600 = 50,410,291,200  (50.3, +0.22%)
//   (n_iq4nl = round((published - 48 x base) / 235,929,600): 0.1, 3.8, 3.2, 18.5 -> 0, 4, 3, 19;
//   the layers are spread evenly from the first to the last, as imatrix mixes favour both ends.)
//   The rest of shard 1 is published minus experts: 3.6 / 3.7 / 4.1 / 4.5 GB. Its fixed part
//   (BF16 HC 1.28 GB, BF16 routers 0.13, IQ4_XS head 0.34, BF16 indexer/alpha/beta/ple_value
//   0.07, F32 small tensors 0.01, tokenizer 0.007) is 1.83 GB; the remaining 3.57 G weights
//   (GDN 2.08 G, attention 0.60 G, shared experts 0.24 G, token_embd 0.64 G, ple_key 0.03 G)
//   must take 1.77 / 1.87 / 2.27 / 2.67 GB, i.e. about 4.0 / 4.2 / 5.1 / 6.0 bpw. Choosing the
//   dense type from the K/IQ ladder and token_embd = the gate/up type gives:
//     Q2_0    IQ4_XS dense, Q2_0 embd    -> shard 1 37,538,635,872 B  (published 37.6 GB, -0.16%)
//     IQ2_XS  IQ4_XS dense, IQ2_XS embd  -> 39,116,466,272 B  (39.2 GB, -0.21%)
//     IQ3_XXS Q5_K dense,   IQ3_XXS embd -> 46,946,994,272 B  (47.0 GB, -0.11%)
//     IQ3_S   Q6_K dense,   IQ3_S embd   -> 54,927,128,672 B  (54,817,524,224 B, +0.20%)
//   (the 640-wide shared-expert down falls back as llama-quantize does: IQ4_XS -> IQ4_NL,
//   Q5_K -> Q5_1, Q6_K -> Q8_0). Table: 320,001,536 x 160 IQ4_NL = 28,800,138,240 B + a
//   192 B header = 28,800,138,432 B, the published shard 2 to the byte.
//   UD-Q4_K_XL: experts 77,017,907,200 B (published 77.0 GB); all shards 111,330,549,248 B
//   (published 111.33 GB), 1224 tensors, shard boundaries inside layers 11 and 41 as published.
#include <array>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "internal.h"

namespace strata::synth {

using quant::Type;

std::string_view recipe_name(Recipe r) {
  switch (r) {
    case Recipe::Q2_0: return "q2_0";
    case Recipe::IQ2_XS: return "iq2_xs";
    case Recipe::IQ3_XXS: return "iq3_xxs";
    case Recipe::IQ3_S: return "iq3_s";
    case Recipe::UD_Q4_K_XL: return "ud_q4_k_xl";
  }
  return "?";
}

std::optional<Recipe> recipe_from_name(std::string_view name) {
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (Recipe r : kRecipes) {
    if (recipe_name(r) == lower) return r;
  }
  return std::nullopt;
}

std::string recipe_names() {
  std::string out;
  for (Recipe r : kRecipes) out += (out.empty() ? "" : ", ") + std::string(recipe_name(r));
  return out;
}

PublishedSizes published_sizes(Recipe r) {
  constexpr uint64_t kTableShard = 28'800'138'432;  // shared by every GSQ-RCO size
  switch (r) {
    case Recipe::Q2_0: return {37'600'000'000, 34'000'000'000, kTableShard, 66'400'000'000};
    case Recipe::IQ2_XS: return {39'200'000'000, 35'500'000'000, kTableShard, 68'000'000'000};
    case Recipe::IQ3_XXS: return {47'000'000'000, 42'900'000'000, kTableShard, 75'800'000'000};
    case Recipe::IQ3_S: return {54'817'524'224, 50'300'000'000, kTableShard, 83'600'000'000};
    case Recipe::UD_Q4_K_XL: return {0, 77'000'000'000, 0, 111'330'000'000};
  }
  return {};
}

namespace detail {
namespace {

struct GsqMix {
  Type gate_up;     // routed gate and up, and token_embd
  Type dense;       // GDN, attention and shared-expert projections
  int n_iq4nl_down; // layers (of 48) whose routed down is IQ4_NL instead of Q2_0
};

GsqMix gsq_mix(Recipe r) {
  switch (r) {
    case Recipe::Q2_0: return {Type::Q2_0, Type::IQ4_XS, 0};
    case Recipe::IQ2_XS: return {Type::IQ2_XS, Type::IQ4_XS, 4};
    case Recipe::IQ3_XXS: return {Type::IQ3_XXS, Type::Q5_K, 3};
    case Recipe::IQ3_S: return {Type::IQ3_S, Type::Q6_K, 19};
    case Recipe::UD_Q4_K_XL: break;
  }
  return {Type::Q2_0, Type::Q8_0, 0};
}

Type gsq_type(const Options& opt, Slot slot, int32_t layer, bool mtp) {
  const GsqMix mix = gsq_mix(opt.recipe);
  const Type router = opt.router_f32 ? Type::F32 : Type::BF16;
  // The MTP block is not in GSQ-RCO files; Strata's setup converts it from the BF16 checkpoint
  // with Q8_0 projections and Q2_0 experts (reference-engine.md §5.1), so that is used here.
  const Type dense = mtp ? Type::Q8_0 : mix.dense;
  switch (slot) {
    case Slot::TokenEmbd: return mix.gate_up;
    case Slot::Output: return Type::IQ4_XS;
    case Slot::HcDown: case Slot::HcUp: case Slot::HcInject: return Type::BF16;
    case Slot::Router: case Slot::RouterShexp: return router;
    case Slot::GateExps: case Slot::UpExps: return mtp ? Type::Q2_0 : mix.gate_up;
    case Slot::DownExps: return !mtp && gsq_down_is_iq4nl(opt.recipe, layer) ? Type::IQ4_NL : Type::Q2_0;
    case Slot::SharedExpert: case Slot::GdnProj: case Slot::AttnProj: case Slot::NextnEh: return dense;
    case Slot::SsmAlphaBeta: case Slot::IndexerProj: case Slot::PleValue: return Type::BF16;
    case Slot::PleKey: return Type::Q2_0;
    case Slot::NgramTable: return Type::IQ4_NL;
  }
  return Type::F32;
}

Type ud_type(Slot slot, int32_t layer, bool mtp) {
  const bool l2 = layer == 2 && !mtp;
  switch (slot) {
    case Slot::TokenEmbd: case Slot::Output: case Slot::HcDown: case Slot::HcUp: return Type::Q8_0;
    case Slot::HcInject: case Slot::Router: case Slot::RouterShexp: case Slot::SsmAlphaBeta: return Type::F32;
    case Slot::GateExps: case Slot::UpExps: return l2 ? Type::Q5_K : Type::Q4_K;
    case Slot::DownExps: {
      const bool q8 = !mtp && (layer == 2 || layer == 4 || layer == 30 || layer == 46 || layer == 47);
      return q8 ? Type::Q8_0 : Type::Q5_1;
    }
    case Slot::SharedExpert: case Slot::GdnProj: case Slot::AttnProj: case Slot::PleKey: case Slot::PleValue:
    case Slot::NextnEh: return Type::Q8_0;
    case Slot::IndexerProj: return Type::BF16;  // the quantizer never touches indexer.{q,k}_proj
    case Slot::NgramTable: return Type::IQ4_NL;
  }
  return Type::F32;
}

}  // namespace

bool gsq_down_is_iq4nl(Recipe r, int32_t layer) {
  const int n = gsq_mix(r).n_iq4nl_down;
  if (n <= 0 || layer < 0) return false;
  if (n == 1) return layer == 0;
  // Evenly spaced over 0..47, both ends included; a slice keeps the full pack's choice for
  // its layers, so a 4-layer slice of IQ2_XS has IQ4_NL down on layer 0 only.
  for (int i = 0; i < n; ++i) {
    const int l = static_cast<int>(std::lround(static_cast<double>(i) * (kMaxBlocks - 1) / (n - 1)));
    if (l == layer) return true;
  }
  return false;
}

Type recipe_type(const Options& opt, Slot slot, int32_t layer, bool mtp) {
  return opt.recipe == Recipe::UD_Q4_K_XL ? ud_type(slot, layer, mtp) : gsq_type(opt, slot, layer, mtp);
}

Type fit_row(Type type, int64_t ne0) {
  const auto info = quant::type_info(type);
  if (!info || info->block_size == 0 || ne0 % info->block_size == 0) return type;
  switch (type) {
    case Type::Q2_K: case Type::Q3_K: case Type::TQ1_0: case Type::TQ2_0: case Type::Q2_0: return Type::Q4_0;
    case Type::Q4_K: return Type::Q5_0;
    case Type::Q5_K: return Type::Q5_1;
    case Type::Q6_K: return Type::Q8_0;
    default: return Type::IQ4_NL;  // IQ1_*, IQ2_*, IQ3_*, IQ4_XS
  }
}

std::string file_prefix(const Options& opt) {
  std::string tag(recipe_name(opt.recipe));
  for (char& c : tag) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string prefix = "Qwen3.8-Flash-Next-SYNTH-" + tag;
  if (opt.layers != kMaxBlocks || opt.experts != kMaxExperts) prefix += fmt::format("-{}L-{}E", opt.layers, opt.experts);
  if (opt.mtp) prefix += "-MTP";
  return prefix;
}

}  // namespace detail
}  // namespace strata::synth
