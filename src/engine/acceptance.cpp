// Greedy and sampled verification of drafts (rules in include/strata/engine/acceptance.h).
#include "strata/engine/acceptance.h"

#include <algorithm>
#include <cassert>

namespace strata::engine {

double prob_of(const Distribution& d, int32_t id) {
  auto it = std::lower_bound(d.begin(), d.end(), id, [](const TokenProb& t, int32_t v) { return t.id < v; });
  return it != d.end() && it->id == id ? it->prob : 0.0;
}

int32_t draw(const Distribution& d, double u) {
  if (d.empty()) return -1;
  double cum = 0.0;
  for (const TokenProb& t : d) {
    cum += t.prob;
    if (u < cum) return t.id;
  }
  return d.back().id;
}

double acceptance_probability(const Distribution& p, const Distribution& q, int32_t draft) {
  const double qd = prob_of(q, draft);
  if (qd <= 0.0) return 0.0;  // a draft q could not produce; never reached by the rule's contract
  return std::min(1.0, prob_of(p, draft) / qd);
}

Distribution residual(const Distribution& p, const Distribution& q) {
  Distribution r;
  double mass = 0.0;
  for (const TokenProb& t : p) {
    const double excess = t.prob - prob_of(q, t.id);
    if (excess > 0.0) {
      r.push_back({t.id, excess});
      mass += excess;
    }
  }
  if (r.empty() || mass <= 0.0) return p;
  for (TokenProb& t : r) t.prob /= mass;
  return r;
}

Verdict accept_greedy(std::span<const int32_t> drafts, std::span<const int32_t> target_argmax) {
  assert(target_argmax.size() == drafts.size() + 1);
  Verdict v;
  while (static_cast<size_t>(v.accepted) < drafts.size() && drafts[v.accepted] == target_argmax[v.accepted]) {
    ++v.accepted;
  }
  v.next = target_argmax[v.accepted];
  return v;
}

Verdict accept_sampled(std::span<const int32_t> drafts, std::span<const Distribution> q,
                       std::span<const Distribution> p, Uniform& u) {
  assert(q.size() == drafts.size() && p.size() == drafts.size() + 1);
  Verdict v;
  for (size_t i = 0; i < drafts.size(); ++i) {
    if (u() < acceptance_probability(p[i], q[i], drafts[i])) {
      ++v.accepted;
      continue;
    }
    v.next = draw(residual(p[i], q[i]), u());
    return v;
  }
  v.next = draw(p[drafts.size()], u());
  return v;
}

}  // namespace strata::engine
