// The MoE FFN's decode kernels (spec/model.md §8) for a window of T = 1..8 rows:
//   router_topk            softmax over the router logits (fp32), the k most probable (ties: the
//                          lower expert id), weights p_e / sum of the k
//   native_expert_grouped  the window's T x k entries grouped by expert (a group = one distinct
//                          expert, an entry = one (row, expert) pair); gate/up per group, decoding
//                          each weight block once for all of the group's entries; SwiGLU and the
//                          q8_1 quantization of h fused in one kernel over the call's own
//                          entries; down per group; then every row's sum of w_e * out_e in
//                          ascending expert id (the reference's order), written to y
//   swiglu                 h = silu(g) * u (the shared expert), optional q8_1 form of h
//   shared_gate_add        y += sigmoid(gate_logit) * s (the shared expert's scalar gate)
// The decode path runs the same math in fewer launches: route_and_group (router_topk and the
// grouping in one kernel) -> expert_mlp_grouped (gate/up, SwiGLU, down over that grouping) -> ...
// shared expert ... -> expert_combine_shared (the routed sum, then the gated shared output added);
// the decoder runs the last two as expert_gate_up_grouped and expert_down_combine, whose down
// launch also forms the routed sum where it can.
// Grouped kernels take their group from block row g % gridDim.y (group stride), so the grid does
// not depend on how many groups a window has and one captured graph fits every window.
// Host-only header.
#pragma once

#include <cstdint>

#include "dtensor.h"
#include "linear.h"
#include "strata/common/status.h"

namespace strata::cuda {

// The experts a lane holds in registers while it routes a row: slot j is expert lane + 32 j. The
// router kernels (route.cuh) take rows of at most kRouterMaxExperts; their hosts and the decoder's
// config check refuse wider ones.
inline constexpr int kRouterLaneSlots = 16;
inline constexpr int kRouterMaxExperts = 32 * kRouterLaneSlots;

// logits [T, n_expert] -> ids [T, k] (by probability descending), weights [T, k]; n_expert <= 512.
Status router_topk(const float* logits, int T, int n_expert, int k, int32_t* ids, float* weights, Stream stream);

struct ExpertWeights {
  DTensor gate, up;     // [n_expert * n_ff, H] each; or both empty and gate_up set
  DTensor gate_up;      // fused: per expert 2 * n_ff rows, gate first
  DTensor down;         // [n_expert * H, n_ff]
  int n_expert = 0, n_ff = 0, n_embd = 0;
};

// Device scratch of one grouped call, sized for cap_entries = T_max * k (expert_scratch_bytes).
struct ExpertScratch {
  void* base = nullptr;
  int64_t bytes = 0;
  int cap_entries = 0;
};
int64_t expert_scratch_bytes(const ExpertWeights& w, int cap_entries);

// Where a grouped call keeps its intermediates inside the scratch (byte offsets from base, each
// 256-byte aligned), for tests that inspect them. Entries are sorted by (expert, row):
//   n_groups      int                       groups of this call
//   group_expert  int [cap]                 expert of group g, ascending
//   group_start   int [cap + 1]             group g's entries are [start[g], start[g + 1])
//   entry_row     int [cap]                 window row of each entry
//   entry_weight  float [cap]               router weight of each entry
//   row_entries   int [cap]                 row t's k entries in ascending expert id at [t * k, t * k + k)
//   gate_up       float [cap, 2 * n_ff]     gate then up of each entry
//   h             float [cap, n_ff]         silu(gate) * up
//   h_q8          q8_1 [cap] rows of h_q8_stride bytes (for a quantized down)
//   out           float [cap, n_embd]       down of each entry
struct ExpertScratchLayout {
  int64_t n_groups = 0, group_expert = 0, group_start = 0, entry_row = 0, entry_weight = 0, row_entries = 0;
  int64_t gate_up = 0, h = 0, h_q8 = 0, out = 0;
  int64_t h_q8_stride = 0;
  int64_t bytes = 0;  // the whole scratch (expert_scratch_bytes)
};
ExpertScratchLayout expert_scratch_layout(const ExpertWeights& w, int cap_entries);

// The entries one call of native_expert_grouped may have: T * k <= kMaxExpertEntries.
inline constexpr int kMaxExpertEntries = 256;

// u: T rows of H, f32 and (for quantized experts) q8_1 already filled; ids/weights from
// router_topk; y [T, H] is overwritten with the routed sum.
Status native_expert_grouped(const ExpertWeights& w, const Act& u, const int32_t* ids, const float* weights, int k,
                             const ExpertScratch& scratch, float* y, Stream stream);

// The stages of native_expert_grouped, each usable on its own. T = window rows, k = experts per
// row; the grouping arrays live in `scratch` (ExpertScratchLayout).
//
// group_expert_entries: the grouping of the T x k entries (ids/weights as router_topk writes them).
Status group_expert_entries(const ExpertWeights& w, const int32_t* ids, const float* weights, int T, int k,
                            const ExpertScratch& scratch, Stream stream);

// route_and_group: router_topk for T rows of logits (row t at logits + t * logits_stride, n_expert =
// w.n_expert columns; same ids, same tie rule, same weight formula) AND the grouping
// group_expert_entries would make of those ids/weights (identical arrays), in one launch. ids and
// weights [T, k] are written too. Requires T * k <= min(kMaxExpertEntries, scratch.cap_entries).
// n_expert <= 512 (kRouterMaxExperts: the router keeps a row in registers, 16 experts per lane).
Status route_and_group(const float* logits, int64_t logits_stride, int T, int k, const ExpertWeights& w,
                       const ExpertScratch& scratch, int32_t* ids, float* weights, Stream stream);

// expert_mlp_grouped: gate/up per group, SwiGLU (+ q8_1) over the entries, down per group, for the
// grouping already in `scratch` (route_and_group or group_expert_entries with the same T and k);
// each entry's down output is left in the scratch's `out`.
Status expert_mlp_grouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch, Stream stream);

// native_expert_grouped without its grouping launch: expert_mlp_grouped then expert_combine.
Status native_expert_grouped_pregrouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch,
                                        float* y, Stream stream);

// expert_combine: y[t, :] = sum over row t's entries in ascending expert id of w_e * out_e
// (overwrites y). expert_combine_shared: the same sum, then + s[t, :] * sigmoid(gate_logit[t *
// gate_stride]) as one more rounded addition, bit for bit expert_combine then shared_gate_add.
Status expert_combine(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, float* y, Stream stream);
// With wide set, the same launch also updates the wide residual with the y it just formed (spec
// §4's combine): wide.out[t, j2 * H + j] = wide.x[t, j2 * H + j] + y[t, j] * wide.alpha[t * S + j2]
// for each of the S streams j2, rounded as hc_combine, so one launch less per MoE block. out may be
// x (each element is read and written by one thread) but must not otherwise overlap it.
struct WideCombine {
  const float* x = nullptr;      // [T, S*H]
  const float* alpha = nullptr;  // [T, S]
  int S = 0;
  float* out = nullptr;          // [T, S*H]
};
Status expert_combine_shared(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, const float* s,
                             const float* gate_logit, int64_t gate_stride, float* y, Stream stream,
                             const WideCombine* wide = nullptr);

// expert_mlp_grouped in two parts, so that a caller can order other work between them (the
// decoder joins its shared expert's stream before the second): expert_gate_up_grouped is its
// gate/up launch; expert_down_combine its SwiGLU and down, then expert_combine_shared (s and
// gate_logit set) or expert_combine (both null) into y and `wide`, with the same bits. Where
// grouped_direct_kernel serves the down call (moe_direct.h) and tile_counts holds enough words,
// the routed sum runs in the down launch's tail instead of a launch of its own: the last CTA of
// each column tile sums it. tile_counts: device words, 0 before the call and left 0 after it (the
// last CTA of a tile resets its word), so calls using the same words must not run at the same
// time; tile_count_cap >= n_embd / 8 always suffices. Null: the combine is launched on its own.
// expert_down_combine must be the next launch after expert_gate_up_grouped on its stream (other
// streams' kernels joined in between are fine): at T = 1 its kernel reads the grouping before its
// pdl_wait(), which the gate/up launch makes safe by letting it start only after its own wait
// (GroupedArgs::trigger_after_wait, moe_grouped.cuh).
Status expert_gate_up_grouped(const ExpertWeights& w, const Act& u, int k, const ExpertScratch& scratch, Stream stream);
Status expert_down_combine(const ExpertWeights& w, int T, int k, const ExpertScratch& scratch, const float* s,
                           const float* gate_logit, int64_t gate_stride, float* y, const WideCombine* wide,
                           uint32_t* tile_counts, int tile_count_cap, Stream stream);

// The shared expert's SwiGLU and down in one launch, where grouped_direct_kernel serves the down
// type (moe_direct.h: Q5_1, IQ4_NL, ... at T <= 4): s[t, :] = down(h[t, :]) with
// h[t, :] = silu(gate_up[t, 0:n]) * gate_up[t, n:2n] (rows of 2n floats, n = down.cols) and its
// q8_1 codes formed in the launch as swiglu() forms them, and also left in h (rows of n) and h_q8
// (rows of h_q8_stride bytes). grouping: 4 device words as shared_grouping_words(T) fills them
// (the T rows as one group of grouped_direct_kernel's). s: rows of down.rows floats.
bool shared_down_fused_supports(const DTensor& down, int T);
void shared_grouping_words(int T, int32_t (&words)[4]);
Status shared_down_fused(const DTensor& down, const float* gate_up, int T, const int32_t* grouping, float* s, float* h,
                         void* h_q8, int64_t h_q8_stride, Stream stream);

// h[t, i] = silu(g[t, i]) * u[t, i] for T rows of n values (rows g + t * stride, u + t * stride,
// h + t * n); when h_q8 != nullptr also its q8_1 form (rows h_q8 + t * q8_stride bytes).
Status swiglu(const float* g, const float* u, int64_t stride, int T, int n, float* h, void* h_q8, int64_t q8_stride,
              Stream stream);

// The grouped call's SwiGLU over its own entries: for i < group_start[*n_groups] (device values of
// the grouping) among the `cap` launched, h[i, :] = silu(gu[i, 0:n]) * gu[i, n:2n] (rows of 2n and
// n floats), and when h_q8 != nullptr its q8_1 form at h_q8 + i * q8_stride (n a multiple of 32).
Status swiglu_entries(const float* gu, int cap, int n, const int* n_groups, const int* group_start, float* h,
                      void* h_q8, int64_t q8_stride, Stream stream);

// y[t, j] += s[t, j] * sigmoid(gate_logit[t * gate_stride]) for T rows of n (gate_stride 1 when
// not given; n_expert + 1 when the gate logit is the last column of router_gi's output).
Status shared_gate_add(float* y, const float* s, const float* gate_logit, int T, int n, Stream stream);
Status shared_gate_add(float* y, const float* s, const float* gate_logit, int64_t gate_stride, int T, int n,
                       Stream stream);

}  // namespace strata::cuda
