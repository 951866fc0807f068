// The dry-run report of a plan as JSON: what `strata synth --dry-run` prints, and what a bench
// can record next to its numbers so a run says exactly which synthetic pack it measured.
#include <nlohmann/json.hpp>

#include "internal.h"

namespace strata::synth {
namespace {

nlohmann::json published_json(const Plan& plan) {
  const PublishedSizes pub = published_sizes(plan.options.recipe);
  const bool full = plan.options.layers == detail::kMaxBlocks && plan.options.experts == detail::kMaxExperts;
  nlohmann::json j = nlohmann::json::object();
  if (!full) return j;  // a slice has nothing published to compare with
  auto entry = [&j](const char* key, uint64_t published, uint64_t planned) {
    if (published == 0) return;
    j[key] = {{"published_bytes", published},
              {"planned_bytes", planned},
              {"deviation", static_cast<double>(planned) / static_cast<double>(published) - 1.0}};
  };
  uint64_t without_table = 0, table_shard = 0, all = 0;
  for (const ShardPlan& s : plan.shards) all += s.file_bytes;
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    bool has_table = false;
    for (const TensorPlan& t : plan.tensors) has_table |= t.shard == i && t.role == Role::NgramTable;
    (has_table && plan.shards[i].n_tensors == 1 ? table_shard : without_table) += plan.shards[i].file_bytes;
  }
  // The MTP block is not in any published file; compare without it.
  const uint64_t mtp = plan.bytes_of(Role::Mtp);
  entry("without_table", pub.without_table, without_table - mtp);
  entry("routed_experts", pub.routed_experts, plan.routed_expert_bytes());
  entry("table_shard", pub.table_shard, table_shard);
  entry("all_shards", pub.all_shards, all - mtp);
  return j;
}

}  // namespace

std::string plan_json(const Plan& plan, bool with_tensors) {
  const Options& o = plan.options;
  nlohmann::json j;
  j["recipe"] = std::string(recipe_name(o.recipe));
  j["layers"] = o.layers;
  j["experts"] = o.experts;
  j["mtp"] = o.mtp;
  j["seed"] = o.seed;
  j["routing_skew"] = {{"target", o.routing_skew},
                       {"reached", plan.routing_skew_reached},
                       {"router_log_spread", plan.router_log_spread}};
  for (const TensorPlan& t : plan.tensors) {
    if (t.role == Role::Router) {
      j["router_type"] = std::string(quant::type_info(t.type)->name);
      break;
    }
  }
  j["random_table"] = o.random_table;
  j["prefix"] = plan.prefix;

  nlohmann::json shards = nlohmann::json::array();
  uint64_t file_total = 0;
  for (const ShardPlan& s : plan.shards) {
    shards.push_back({{"path", s.path},
                      {"tensors", s.n_tensors},
                      {"tensor_bytes", s.tensor_bytes},
                      {"file_bytes", s.file_bytes},
                      {"hole_bytes", s.hole_bytes}});
    file_total += s.file_bytes;
  }
  nlohmann::json roles = nlohmann::json::object();
  for (int r = 0; r < kRoleCount; ++r) {
    const uint64_t n = plan.bytes_of(static_cast<Role>(r));
    if (n > 0) roles[std::string(role_name(static_cast<Role>(r)))] = n;
  }
  roles["routed_experts"] = plan.routed_expert_bytes();
  j["totals"] = {{"tensors", plan.tensors.size()},
                 {"tensor_bytes", plan.total_bytes()},
                 {"file_bytes", file_total},
                 {"written_bytes", plan.written_bytes()},
                 {"by_role", roles},
                 {"by_shard", shards}};
  j["published"] = published_json(plan);
  if (with_tensors) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const TensorPlan& t : plan.tensors) {
      tensors.push_back({{"name", t.name},
                         {"type", std::string(quant::type_info(t.type)->name)},
                         {"shape", t.ne},
                         {"bytes", t.nbytes},
                         {"shard", t.shard},
                         {"role", std::string(role_name(t.role))}});
    }
    j["tensors"] = std::move(tensors);
  }
  return j.dump(2);
}

}  // namespace strata::synth
