// make_plan: every tensor of the pack with its type, shape, size, shard and initialisation,
// in file order (gguf-layout.md §3), plus the metadata and the exact size of every shard.
// The plan is pure data; generating and writing only read it.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "internal.h"

namespace strata::synth {

using quant::Type;
using detail::Slot;

std::string_view role_name(Role role) {
  switch (role) {
    case Role::RoutedGate: return "routed_gate";
    case Role::RoutedUp: return "routed_up";
    case Role::RoutedDown: return "routed_down";
    case Role::SharedExpert: return "shared_expert";
    case Role::Router: return "router";
    case Role::Attention: return "attention";
    case Role::Gdn: return "gdn";
    case Role::HyperConnection: return "hyper_connection";
    case Role::NgramTable: return "ngram_table";
    case Role::PleLayer: return "ple_layer";
    case Role::Embedding: return "embedding";
    case Role::Head: return "head";
    case Role::Mtp: return "mtp";
  }
  return "?";
}

bool is_routed_expert(Role role) {
  return role == Role::RoutedGate || role == Role::RoutedUp || role == Role::RoutedDown;
}

uint64_t TensorPlan::row_bytes() const { return ne.empty() ? 0 : *quant::row_bytes(type, static_cast<uint64_t>(ne[0])); }

Status validate(const Options& o) {
  if (o.layers < 1 || o.layers > detail::kMaxBlocks) {
    return Status::error(fmt::format("synth: --layers must be between 1 and {} (got {})", detail::kMaxBlocks, o.layers));
  }
  if (o.experts < detail::kTopK || o.experts > detail::kMaxExperts) {
    return Status::error(fmt::format("synth: --experts must be between {} (experts used per token) and {} (got {})",
                                     detail::kTopK, detail::kMaxExperts, o.experts));
  }
  if (!(o.routing_skew >= 0.55 && o.routing_skew <= 0.99)) {
    return Status::error(fmt::format("synth: --routing-skew is the routing share of the most-used 55% of experts: "
                                     "expected 0.55 (uniform) to 0.99, got {}", o.routing_skew));
  }
  if (!recipe_from_name(recipe_name(o.recipe))) return Status::error("synth: unknown recipe");
  return Status::ok_status();
}

namespace {

// Gains on 1/sqrt(fan_in): each projection roughly keeps the RMS of its (normalised) input.
// The head gets 2 so logits are not flat; the router 4 so softmax weights are not uniform.
constexpr float kHeadGain = 2.0f;
constexpr float kRouterGain = 4.0f;

class Builder {
 public:
  explicit Builder(const Options& o) : o_(o) {}

  void add(std::string name, Slot slot, std::vector<int64_t> ne, Role role, int32_t layer, float gain = 1.0f) {
    const Type t = detail::fit_row(detail::recipe_type(o_, slot, layer, mtp_block(layer)), ne[0]);
    const Init init = slot == Slot::Router ? Init::Router : Init::Matrix;
    push(std::move(name), t, std::move(ne), role, layer, init, gain / std::sqrt(static_cast<float>(ne[0])));
  }
  // Norm weights, conv taps, ssm_a, dt bias: F32 in every pack (the converter's rule).
  void add_f32(std::string name, std::vector<int64_t> ne, Role role, int32_t layer, Init init) {
    push(std::move(name), Type::F32, std::move(ne), role, layer, init, 0.0f);
  }
  void push(std::string name, Type t, std::vector<int64_t> ne, Role role, int32_t layer, Init init, float std_dev) {
    TensorPlan p;
    p.name = std::move(name);
    p.type = t;
    p.ne = std::move(ne);
    p.n_elements = 1;
    for (int64_t n : p.ne) p.n_elements *= static_cast<uint64_t>(n);
    p.nbytes = *quant::row_bytes(t, static_cast<uint64_t>(p.ne[0])) * (p.n_elements / static_cast<uint64_t>(p.ne[0]));
    p.layer = layer;
    p.role = mtp_block(layer) ? Role::Mtp : role;
    p.init = init;
    p.std_dev = std_dev;
    out.push_back(std::move(p));
  }
  bool mtp_block(int32_t layer) const { return o_.mtp && layer == static_cast<int32_t>(o_.layers); }

  void hc(const std::string& b, const char* which, int32_t l) {
    using detail::kHcRank, detail::kWide, detail::kHcCount;
    add_f32(fmt::format("{}.hc_{}_norm.weight", b, which), {kWide}, Role::HyperConnection, l, Init::Norm);
    add(fmt::format("{}.hc_{}_down.weight", b, which), Slot::HcDown, {kWide, kHcRank}, Role::HyperConnection, l);
    add(fmt::format("{}.hc_{}_up.weight", b, which), Slot::HcUp, {kHcRank, kWide}, Role::HyperConnection, l);
    add(fmt::format("{}.hc_{}_inject.weight", b, which), Slot::HcInject, {kWide, kHcCount}, Role::HyperConnection, l);
  }
  void gdn(const std::string& b, int32_t l) {
    using namespace detail;
    add(b + ".attn_qkv.weight", Slot::GdnProj, {kHidden, kGdnConvDim}, Role::Gdn, l);
    add(b + ".attn_gate.weight", Slot::GdnProj, {kHidden, kGdnInner}, Role::Gdn, l);
    add_f32(b + ".ssm_conv1d.weight", {kConvKernel, kGdnConvDim}, Role::Gdn, l, Init::Conv);
    add_f32(b + ".ssm_dt.bias", {kGdnVHeads}, Role::Gdn, l, Init::SsmDt);
    add_f32(b + ".ssm_a", {kGdnVHeads}, Role::Gdn, l, Init::SsmA);
    add(b + ".ssm_alpha.weight", Slot::SsmAlphaBeta, {kHidden, kGdnVHeads}, Role::Gdn, l);
    add(b + ".ssm_beta.weight", Slot::SsmAlphaBeta, {kHidden, kGdnVHeads}, Role::Gdn, l);
    add_f32(b + ".ssm_norm.weight", {kGdnHeadDim}, Role::Gdn, l, Init::Norm);
    add(b + ".ssm_out.weight", Slot::GdnProj, {kGdnInner, kHidden}, Role::Gdn, l);
  }
  void attention(const std::string& b, int32_t l) {
    using namespace detail;
    add(b + ".attn_q.weight", Slot::AttnProj, {kHidden, 2 * kHeads * kHeadDim}, Role::Attention, l);
    add(b + ".attn_k.weight", Slot::AttnProj, {kHidden, kHeadsKv * kHeadDim}, Role::Attention, l);
    add(b + ".attn_v.weight", Slot::AttnProj, {kHidden, kHeadsKv * kHeadDim}, Role::Attention, l);
    add(b + ".attn_output.weight", Slot::AttnProj, {kHeads * kHeadDim, kHidden}, Role::Attention, l);
    add_f32(b + ".attn_q_norm.weight", {kHeadDim}, Role::Attention, l, Init::Norm);
    add_f32(b + ".attn_k_norm.weight", {kHeadDim}, Role::Attention, l, Init::Norm);
    add(b + ".indexer.q_proj.weight", Slot::IndexerProj, {kHidden, kIdxHeads * kIdxHeadDim}, Role::Attention, l);
    add(b + ".indexer.k_proj.weight", Slot::IndexerProj, {kHidden, kIdxHeadDim}, Role::Attention, l);
    add_f32(b + ".indexer.q_norm.weight", {kIdxHeadDim}, Role::Attention, l, Init::Norm);
    add_f32(b + ".indexer.k_norm.weight", {kIdxHeadDim}, Role::Attention, l, Init::Norm);
  }
  void moe(const std::string& b, int32_t l) {
    using namespace detail;
    const int64_t e = o_.experts;
    add(b + ".ffn_gate_inp.weight", Slot::Router, {kHidden, e}, Role::Router, l, kRouterGain);
    add(b + ".ffn_gate_exps.weight", Slot::GateExps, {kHidden, kFfExp, e}, Role::RoutedGate, l);
    add(b + ".ffn_up_exps.weight", Slot::UpExps, {kHidden, kFfExp, e}, Role::RoutedUp, l);
    add(b + ".ffn_down_exps.weight", Slot::DownExps, {kFfExp, kHidden, e}, Role::RoutedDown, l);
    add(b + ".ffn_gate_shexp.weight", Slot::SharedExpert, {kHidden, kFfShexp}, Role::SharedExpert, l);
    add(b + ".ffn_up_shexp.weight", Slot::SharedExpert, {kHidden, kFfShexp}, Role::SharedExpert, l);
    add(b + ".ffn_down_shexp.weight", Slot::SharedExpert, {kFfShexp, kHidden}, Role::SharedExpert, l);
    add(b + ".ffn_gate_inp_shexp.weight", Slot::RouterShexp, {kHidden}, Role::SharedExpert, l);
  }
  void ple(const std::string& b, int32_t l) {
    using namespace detail;
    add(b + ".ple_key.weight", Slot::PleKey, {kHidden, kWide}, Role::PleLayer, l);
    add(b + ".ple_value.weight", Slot::PleValue, {kHidden, kHidden}, Role::PleLayer, l);
    for (const char* n : {"key", "query", "conv"}) {
      add_f32(fmt::format("{}.ple_norm_{}.weight", b, n), {kWide}, Role::PleLayer, l, Init::Norm);
    }
    add_f32(b + ".ple_conv1d.weight", {kConvKernel, kWide}, Role::PleLayer, l, Init::Conv);
  }
  void nextn(const std::string& b, int32_t l) {
    using namespace detail;
    add(b + ".nextn.eh_proj.weight", Slot::NextnEh, {2 * kHidden, kHidden}, Role::Mtp, l);
    add_f32(b + ".nextn.enorm.weight", {kHidden}, Role::Mtp, l, Init::Norm);
    add_f32(b + ".nextn.hnorm.weight", {kWide}, Role::Mtp, l, Init::Norm);
    add_f32(b + ".nextn.hc_head_norm.weight", {kWide}, Role::Mtp, l, Init::Norm);
    add(b + ".nextn.hc_head_down.weight", Slot::HcDown, {kWide, kHcRank}, Role::Mtp, l);
    add(b + ".nextn.hc_head_up.weight", Slot::HcUp, {kHcRank, kWide}, Role::Mtp, l);
  }
  // One block in converter order: HC attn, [PLE], mixer, HC ffn, MoE, [MTP head].
  void block(int32_t l) {
    const std::string b = fmt::format("blk.{}", l);
    const bool mtp = mtp_block(l);
    hc(b, "attn", l);
    if (l == detail::kPleLayer && !mtp) ple(b, l);
    if (mtp || detail::is_attention_block(static_cast<uint32_t>(l))) {
      attention(b, l);
    } else {
      gdn(b, l);
    }
    hc(b, "ffn", l);
    moe(b, l);
    if (mtp) nextn(b, l);
  }
  void global_head() {
    using namespace detail;
    add_f32("output_hc_norm.weight", {kWide}, Role::HyperConnection, -1, Init::Norm);
    add("output_hc_down.weight", Slot::HcDown, {kWide, kHcRank}, Role::HyperConnection, -1);
    add("output_hc_up.weight", Slot::HcUp, {kHcRank, kWide}, Role::HyperConnection, -1);
    add("output.weight", Slot::Output, {kHidden, kVocab}, Role::Head, -1, kHeadGain);
  }
  void token_embd() {
    // Embedding rows are the residual streams' start: RMS 1, like the normalised block inputs.
    add("token_embd.weight", Slot::TokenEmbd, {detail::kHidden, detail::kVocab}, Role::Embedding, -1);
    out.back().std_dev = 1.0f;
  }
  void table() {
    const int64_t rows = static_cast<int64_t>(detail::ple_constants().table_rows);
    add("per_layer_token_embd.weight", Slot::NgramTable, {detail::kPleRowDim, rows}, Role::NgramTable, -1);
    out.back().init = o_.random_table ? Init::Matrix : Init::Zeros;
    out.back().std_dev = 1.0f;
  }

  std::vector<TensorPlan> out;

 private:
  const Options& o_;
};

// GSQ-RCO: shard 1 holds everything but the table, shard 2 the table alone.
void assign_gsq_shards(std::vector<TensorPlan>& tensors, uint32_t* n_shards) {
  *n_shards = 1;
  for (TensorPlan& t : tensors) {
    t.shard = t.role == Role::NgramTable ? 1 : 0;
    if (t.shard == 1) *n_shards = 2;
  }
}

// UD-Q4_K_XL (llama-gguf-split --split-max-size 50G --no-tensor-first-split): shard 1 holds
// metadata only; tensors follow in order and a new shard starts when the next tensor would
// take the current one past 50 GB. With the globals first this puts the shard boundaries
// inside layers 11 and 41, as in the published files (gguf-layout.md §3.8).
void assign_split_shards(std::vector<TensorPlan>& tensors, uint32_t* n_shards) {
  constexpr uint64_t kMaxShard = 50'000'000'000;
  uint32_t shard = 1;
  uint64_t used = 0;
  for (TensorPlan& t : tensors) {
    const uint64_t padded = (t.nbytes + 31) / 32 * 32;
    if (used > 0 && used + padded > kMaxShard) {
      ++shard;
      used = 0;
    }
    t.shard = shard;
    used += padded;
  }
  *n_shards = shard + 1;
}

std::vector<TensorPlan> build_tensors(const Options& o) {
  Builder b(o);
  const bool ple = o.layers > static_cast<uint32_t>(detail::kPleLayer);
  const uint32_t blocks = o.layers + (o.mtp ? 1 : 0);
  if (o.recipe == Recipe::UD_Q4_K_XL) {  // globals first (they all sit in the first data shard)
    if (ple) b.table();
    b.token_embd();
    b.global_head();
    for (uint32_t l = 0; l < blocks; ++l) b.block(static_cast<int32_t>(l));
  } else {
    b.token_embd();
    for (uint32_t l = 0; l < blocks; ++l) b.block(static_cast<int32_t>(l));
    b.global_head();
    if (ple) b.table();
  }
  return std::move(b.out);
}

}  // namespace

Result<Plan> make_plan(const Options& options) {
  STRATA_TRY(validate(options));
  Plan plan;
  plan.options = options;
  plan.prefix = detail::file_prefix(options);
  plan.metadata = detail::build_metadata(options);
  plan.tensors = build_tensors(options);
  uint32_t n_shards = 0;
  if (options.recipe == Recipe::UD_Q4_K_XL) {
    assign_split_shards(plan.tensors, &n_shards);
  } else {
    assign_gsq_shards(plan.tensors, &n_shards);
  }
  // File order is shard order (the writer streams each shard's tensors in list order).
  std::stable_sort(plan.tensors.begin(), plan.tensors.end(),
                   [](const TensorPlan& a, const TensorPlan& b) { return a.shard < b.shard; });
  plan.shards.resize(n_shards);
  std::vector<std::vector<const TensorPlan*>> per_shard(n_shards);
  for (const TensorPlan& t : plan.tensors) per_shard[t.shard].push_back(&t);
  for (uint32_t s = 0; s < n_shards; ++s) {
    ShardPlan& sp = plan.shards[s];
    sp.path = gguf::split_path(plan.prefix, s, n_shards);
    sp.n_tensors = static_cast<uint32_t>(per_shard[s].size());
    sp.file_bytes = detail::gguf_header_bytes(plan.metadata, per_shard[s], n_shards, s == 0);
    for (const TensorPlan* t : per_shard[s]) {
      sp.tensor_bytes += t->nbytes;
      sp.file_bytes += (t->nbytes + 31) / 32 * 32;
      if (t->init == Init::Zeros) sp.hole_bytes += t->nbytes;
    }
  }
  const detail::SkewCalibration skew = detail::calibrate_skew(options.routing_skew, options.experts, detail::kTopK);
  plan.router_log_spread = skew.log_spread;
  plan.routing_skew_reached = skew.reached;
  return plan;
}

const TensorPlan* Plan::find(std::string_view name) const {
  for (const TensorPlan& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

uint64_t Plan::total_bytes() const {
  uint64_t n = 0;
  for (const TensorPlan& t : tensors) n += t.nbytes;
  return n;
}

uint64_t Plan::bytes_of(Role role) const {
  uint64_t n = 0;
  for (const TensorPlan& t : tensors) n += t.role == role ? t.nbytes : 0;
  return n;
}

uint64_t Plan::routed_expert_bytes() const {
  return bytes_of(Role::RoutedGate) + bytes_of(Role::RoutedUp) + bytes_of(Role::RoutedDown);
}

uint64_t Plan::written_bytes() const {
  uint64_t n = 0;
  for (const TensorPlan& t : tensors) n += t.init == Init::Zeros ? 0 : t.nbytes;
  return n;
}

float Plan::router_scale(int32_t layer, int64_t expert) const {
  // Small (512 floats) and cheap; recomputed so the plan stays plain copyable data.
  const std::vector<float> s = detail::router_scales(options.seed, layer, options.experts, router_log_spread);
  return s.at(static_cast<size_t>(expert));
}

}  // namespace strata::synth
