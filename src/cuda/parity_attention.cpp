// Parity of the full-attention kernels (attention.h) against the reference's pieces
// (reference::rms_norm / rope_apply, qsa_block_key, qsa_block_scores, qsa_select, softmax and
// the output gate of attention_layer), one line per (geometry, pos, T):
//   attention(geom=.., pos=.., T=..)  attn_prep: q_out, qi_out, the cache rows the window writes
//                                     and the block keys it completes; qsa_select: n_sel and the
//                                     chosen block ids, exact (ties planted at the cut); attn_decode:
//                                     o. Floats: ||got - want|| / ||want|| < kAttnRelTol.
//   attention(.., packed)             the same with qg | k | v (and iq | ik) as slices of one
//                                     row-strided buffer, as one concatenated projection writes
//                                     them, and attn_decode's fused q8_1 output: its bytes must
//                                     equal quantize_q8_1 of the o the same launch wrote (exact).
// Each kernel gets the reference's inputs (the host cache and queries are uploaded before the
// next stage), so a difference is that kernel's own. Host checks of the shared index helpers
// (radix select, split plan) run first.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>

#include "attention.h"
#include "parity_harness.h"
#include "strata/reference/ops.h"
#include "strata/reference/qsa.h"
#include "strata/cuda/quantize.h"

namespace strata::cuda {
namespace {

namespace ref = reference;

// fp32 sums in another order than the reference's double ones: ~1e-6 relative at head_dim 256
// and 2k-token softmaxes; prep differs only by the last bit of cos/sin.
constexpr double kAttnRelTol = 1e-5;

struct Geometry {
  std::string name;
  AttnDims d;
  std::vector<int64_t> positions;  // pos of the window's first row
};

AttnDims dims(int nh, int nkv, int hd, int n_rot, float theta, int nih, int id, int ratio, int top, int64_t max_ctx) {
  AttnDims d;
  d.n_head = nh;
  d.n_head_kv = nkv;
  d.head_dim = hd;
  d.n_rot = n_rot;
  d.rope_theta = theta;
  d.eps = 1e-6f;
  d.idx_heads = nih;
  d.idx_head_dim = id;
  d.ratio = ratio;
  d.top_blocks = top;
  d.max_ctx = max_ctx;
  return d;
}

// Dense contexts below 2048 tokens, the dense -> sparse switch inside a window (pos 2045:
// rows see 511..513 complete blocks), sparse contexts at every residue mod ratio (blocks
// complete inside the window), long sparse contexts (pos 32765: rows of 8191..8193 blocks, either
// side of the top-k kernel's 8192 keys held in shared memory), and small geometries where sparse
// is cheap.
std::vector<Geometry> geometries() {
  return {
      {"released", dims(24, 2, 256, 64, 1e7f, 4, 128, 4, 512, 8192), {0, 37, 2045, 4096, 4097, 4098, 4099}},
      {"released_ctx262144", dims(24, 2, 256, 64, 1e7f, 4, 128, 4, 512, 262144), {4101, 32765, 131075}},
      {"small", dims(6, 3, 128, 32, 1e4f, 2, 64, 4, 4, 256), {3, 20, 41, 42, 43, 200}},
      {"odd", dims(5, 1, 128, 16, 1e4f, 3, 32, 3, 5, 300), {1, 17, 30, 31, 32, 250}},
      {"dense", dims(8, 2, 256, 64, 1e7f, 0, 0, 0, 0, 1024), {0, 5, 600, 1000}},
      // Splits longer than one list of visible tokens (4 kv heads: 64 splits of ~3.1k positions,
      // all visible).
      {"dense_long", dims(8, 4, 256, 64, 1e7f, 0, 0, 0, 0, 262144), {200003}},
  };
}

ref::Rope rope_of(const AttnDims& d) { return ref::Rope{d.n_rot, d.rope_theta, {0, 0, 0}}; }

// The reference's per-head prep: rmsnorm * w, then RoPE at position p (in place).
void norm_rope(float* x, const std::vector<float>& w, float eps, const ref::Rope& rope, int64_t p) {
  std::span<float> v(x, w.size());
  ref::rms_norm(v, w, eps, v);
  ref::rope_apply(v, ref::rope_angles(rope, ref::text_pos(p)));
}

// Everything the reference holds for one case.
struct HostCase {
  std::vector<float> qg, k, v, iq, ik;                  // the window's projections
  std::vector<float> q_norm, k_norm, iq_norm, ik_norm;
  std::vector<float> cache_k, cache_v, index_k, block_k;  // rows 0 .. pos + T (blocks 0 .. (pos + T) / ratio)
  std::vector<float> q_out, qi_out;
};

// The cache before the window (random keys normed and roped at their positions, random values
// and raw index keys, the block keys of complete blocks), then the window's reference prep.
HostCase build_host_case(const AttnDims& d, int64_t pos, int T, uint64_t seed) {
  const int64_t nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, nih = d.idx_heads, id = d.idx_head_dim;
  const bool qsa = d.ratio > 0;
  const ref::Rope rope = rope_of(d);
  HostCase h;
  h.q_norm = norm_weight(seed + 1, hd);
  h.k_norm = norm_weight(seed + 2, hd);
  h.qg = random_normal(seed + 3, static_cast<size_t>(T * nh * 2 * hd));
  h.k = random_normal(seed + 4, static_cast<size_t>(T * nkv * hd));
  h.v = random_normal(seed + 5, static_cast<size_t>(T * nkv * hd));
  h.cache_k = random_normal(seed + 6, static_cast<size_t>(pos * nkv * hd));
  h.cache_v = random_normal(seed + 7, static_cast<size_t>(pos * nkv * hd));
  for (int64_t p = 0; p < pos; ++p)
    for (int64_t g = 0; g < nkv; ++g) norm_rope(h.cache_k.data() + (p * nkv + g) * hd, h.k_norm, d.eps, rope, p);
  if (qsa) {
    h.iq_norm = norm_weight(seed + 8, id);
    h.ik_norm = norm_weight(seed + 9, id);
    h.iq = random_normal(seed + 10, static_cast<size_t>(T * nih * id));
    h.ik = random_normal(seed + 11, static_cast<size_t>(T * id));
    h.index_k = random_normal(seed + 12, static_cast<size_t>(pos * id));
    h.block_k.resize(static_cast<size_t>(pos / d.ratio * id));
    for (int64_t b = 0; b < pos / d.ratio; ++b)
      ref::qsa_block_key(h.index_k.data() + b * d.ratio * id, d.ratio, id, h.ik_norm, d.eps, rope, b * d.ratio,
                         h.block_k.data() + b * id);
  }

  // The window (reference attention_layer / index_append / select_tokens, per row).
  h.q_out.resize(static_cast<size_t>(T * nh * hd));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t hh = 0; hh < nh; ++hh) {
      float* q = h.q_out.data() + (t * nh + hh) * hd;
      std::copy_n(h.qg.data() + (t * nh + hh) * 2 * hd, hd, q);
      norm_rope(q, h.q_norm, d.eps, rope, pos + t);
    }
    for (int64_t g = 0; g < nkv; ++g) {
      std::vector<float> key(h.k.begin() + (t * nkv + g) * hd, h.k.begin() + (t * nkv + g + 1) * hd);
      norm_rope(key.data(), h.k_norm, d.eps, rope, pos + t);
      h.cache_k.insert(h.cache_k.end(), key.begin(), key.end());
    }
  }
  h.cache_v.insert(h.cache_v.end(), h.v.begin(), h.v.end());
  if (qsa) {
    h.qi_out = h.iq;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t hh = 0; hh < nih; ++hh) norm_rope(h.qi_out.data() + (t * nih + hh) * id, h.iq_norm, d.eps, rope, pos + t);
    h.index_k.insert(h.index_k.end(), h.ik.begin(), h.ik.end());
    const int64_t done = pos / d.ratio, complete = (pos + T) / d.ratio;
    h.block_k.resize(static_cast<size_t>(complete * id));
    for (int64_t b = done; b < complete; ++b)
      ref::qsa_block_key(h.index_k.data() + b * d.ratio * id, d.ratio, id, h.ik_norm, d.eps, rope, b * d.ratio,
                         h.block_k.data() + b * id);
  }
  return h;
}

// Exact ties at the last row's cut: copies of the top_blocks-th best block's key into the first,
// a middle and the last block (lower indices win), and a few all-zero keys (score 0).
void plant_ties(const AttnDims& d, int64_t pos, int T, HostCase& h) {
  if (d.ratio == 0) return;  // a dense block has no blocks to tie
  const int64_t id = d.idx_head_dim;
  const int64_t nb = (pos + T) / d.ratio;
  if (nb <= d.top_blocks) return;
  const float* q = h.qi_out.data() + static_cast<int64_t>(T - 1) * d.idx_heads * id;
  const std::vector<float> scores = ref::qsa_block_scores(q, d.idx_heads, id, h.block_k.data(), nb);
  const int32_t cut = ref::top_k(scores, d.top_blocks).back();
  std::vector<float> key(h.block_k.begin() + cut * id, h.block_k.begin() + (cut + 1) * id);
  for (int64_t b : {int64_t{0}, nb / 2, nb - 1})
    if (b != cut) std::copy(key.begin(), key.end(), h.block_k.begin() + b * id);
  for (int64_t b : {int64_t{1}, nb / 3})
    if (b != cut && b != 0 && b != nb / 2 && b != nb - 1) std::fill_n(h.block_k.begin() + b * id, id, 0.0f);
}

// The tokens each row sees (reference select_tokens) and, for sparse rows, the chosen block ids.
struct HostSelection {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<int32_t> n_sel;                // -1 dense, else top_blocks
  std::vector<std::vector<int32_t>> blocks;  // ascending
};

HostSelection host_select(const AttnDims& d, int64_t pos, int T, const HostCase& h) {
  HostSelection s;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n_visible = pos + t + 1;
    if (d.ratio == 0 || n_visible / d.ratio <= d.top_blocks) {
      s.tokens.push_back(ref::qsa_select(n_visible, 1, n_visible, {}));
      s.n_sel.push_back(-1);
      s.blocks.emplace_back();
      continue;
    }
    const int64_t nb = n_visible / d.ratio;
    const float* q = h.qi_out.data() + t * d.idx_heads * d.idx_head_dim;
    const std::vector<float> scores = ref::qsa_block_scores(q, d.idx_heads, d.idx_head_dim, h.block_k.data(), nb);
    s.tokens.push_back(ref::qsa_select(n_visible, d.ratio, d.top_blocks, scores));
    s.n_sel.push_back(d.top_blocks);
    std::vector<int32_t> b;
    for (int64_t j = 0; j < d.top_blocks; ++j) b.push_back(s.tokens.back()[j * d.ratio] / d.ratio);
    s.blocks.push_back(std::move(b));
  }
  return s;
}

// reference attention_layer after the projections: softmax(q.k * scale) over the row's tokens,
// double accumulation of the values, then * sigmoid(gate).
std::vector<float> host_attention(const AttnDims& d, int T, const HostCase& h, const HostSelection& s) {
  const int64_t nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, group = nh / nkv;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> o(static_cast<size_t>(T * nh * hd));
  parallel_for(T * nh, [&](int64_t i0, int64_t i1) {
    std::vector<float> w;
    std::vector<double> acc(hd);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / nh, hh = i % nh, g = hh / group;
      const float* q = h.q_out.data() + (t * nh + hh) * hd;
      const float* gate = h.qg.data() + (t * nh + hh) * 2 * hd + hd;
      const std::vector<int32_t>& tokens = s.tokens[t];
      w.resize(tokens.size());
      for (size_t j = 0; j < tokens.size(); ++j) w[j] = ref::dot(q, h.cache_k.data() + (tokens[j] * nkv + g) * hd, hd) * scale;
      ref::softmax(w);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t j = 0; j < tokens.size(); ++j) {
        const float* vj = h.cache_v.data() + (tokens[j] * nkv + g) * hd;
        for (int64_t a = 0; a < hd; ++a) acc[a] += static_cast<double>(w[j]) * vj[a];
      }
      float* out = o.data() + (t * nh + hh) * hd;
      for (int64_t a = 0; a < hd; ++a) out[a] = static_cast<float>(acc[a]) * ref::sigmoid(gate[a]);
    }
  });
  return o;
}

struct Comparison {
  bool ok = true;
  double worst_rel = 0.0;
  std::vector<std::string> notes;
  void floats(const char* what, const std::vector<float>& got, const std::vector<float>& want) {
    if (got.empty() && want.empty()) return;
    const Diff df = diff(got.data(), want.data(), want.size());
    worst_rel = std::max(worst_rel, df.rel);
    if (!df.finite || df.rel > kAttnRelTol) {
      ok = false;
      notes.push_back(fmt::format("{} {}", what, df.text()));
    }
  }
  void fail(std::string what) {
    ok = false;
    notes.push_back(std::move(what));
  }
};

struct DeviceCase {
  DeviceBuffer qg, k, v, iq, ik, q_norm, k_norm, iq_norm, ik_norm, q_out, qi_out, pos;
  DeviceBuffer cache_k, cache_v, index_k, block_k, scores, sel, n_sel, scratch, o;
};

// Row t of each part at dst + t * stride + offset: the layout of one concatenated projection.
void pack_rows(const std::vector<float>& part, int64_t cols, int T, int64_t offset, int64_t stride,
               std::vector<float>& dst) {
  for (int t = 0; t < T; ++t) std::copy_n(part.begin() + t * cols, cols, dst.begin() + t * stride + offset);
}

// `packed`: the projections as slices of one strided buffer and the fused q8_1 output checked.
Status run_case(const ParityOptions& opt, Reporter& rep, const Geometry& geo, int64_t pos, int T, bool packed = false) {
  const AttnDims& d = geo.d;
  CaseResult r;
  r.op = "attention";
  r.line = fmt::format("attention(geom={}, heads={}/{}, hd={}, ratio={}, top={}, max_ctx={}, pos={}, T={}{})", geo.name,
                       d.n_head, d.n_head_kv, d.head_dim, d.ratio, d.top_blocks, d.max_ctx, pos, T,
                       packed ? ", packed" : "");
  r.params = {{"geom", geo.name}, {"pos", pos}, {"T", T}, {"max_ctx", d.max_ctx}, {"packed", packed}};
  if (!rep.wanted(r.line)) return Status::ok_status();
  HostCase h = build_host_case(d, pos, T, case_seed(opt.seed, r.line));

  const int64_t nh = d.n_head, nkv = d.n_head_kv, hd = d.head_dim, id = d.idx_head_dim;
  const bool qsa = d.ratio > 0;
  const int64_t kv_row = nkv * hd;
  const int64_t nb_cap = qsa ? d.max_ctx / d.ratio : 0;
  const size_t f = sizeof(float);
  constexpr int kNaN = 0xFF, kBadId = 0x7F;  // poison: NaN floats, ids 0x7F7F7F7F
  DeviceCase g;
  STRATA_TRY(alloc_filled(g.qg, h.qg.size() * f, 0));
  STRATA_TRY(alloc_filled(g.k, h.k.size() * f, 0));
  STRATA_TRY(alloc_filled(g.v, h.v.size() * f, 0));
  STRATA_TRY(alloc_filled(g.q_norm, h.q_norm.size() * f, 0));
  STRATA_TRY(alloc_filled(g.k_norm, h.k_norm.size() * f, 0));
  STRATA_TRY(alloc_filled(g.q_out, h.q_out.size() * f, kNaN));
  STRATA_TRY(alloc_filled(g.pos, sizeof(int64_t), 0));
  STRATA_TRY(alloc_filled(g.cache_k, static_cast<size_t>(d.max_ctx * kv_row) * f, kNaN));
  STRATA_TRY(alloc_filled(g.cache_v, static_cast<size_t>(d.max_ctx * kv_row) * f, kNaN));
  STRATA_TRY(alloc_filled(g.o, static_cast<size_t>(T * nh * hd) * f, kNaN));
  STRATA_TRY(alloc_filled(g.scratch, static_cast<size_t>(attn_decode_scratch_bytes(d, T)), kNaN));
  if (qsa) {
    STRATA_TRY(alloc_filled(g.iq, h.iq.size() * f, 0));
    STRATA_TRY(alloc_filled(g.ik, h.ik.size() * f, 0));
    STRATA_TRY(alloc_filled(g.iq_norm, h.iq_norm.size() * f, 0));
    STRATA_TRY(alloc_filled(g.ik_norm, h.ik_norm.size() * f, 0));
    STRATA_TRY(alloc_filled(g.qi_out, h.qi_out.size() * f, kNaN));
    STRATA_TRY(alloc_filled(g.index_k, static_cast<size_t>(d.max_ctx * id) * f, kNaN));
    STRATA_TRY(alloc_filled(g.block_k, static_cast<size_t>(nb_cap * id) * f, kNaN));
    STRATA_TRY(alloc_filled(g.scores, static_cast<size_t>(T * nb_cap) * f, kNaN));
    STRATA_TRY(alloc_filled(g.sel, static_cast<size_t>(T * d.top_blocks) * sizeof(int32_t), kBadId));
    STRATA_TRY(alloc_filled(g.n_sel, static_cast<size_t>(T) * sizeof(int32_t), kBadId));
  }
  STRATA_TRY(upload_into(g.qg, h.qg));
  STRATA_TRY(upload_into(g.k, h.k));
  STRATA_TRY(upload_into(g.v, h.v));
  STRATA_TRY(upload_into(g.q_norm, h.q_norm));
  STRATA_TRY(upload_into(g.k_norm, h.k_norm));
  STRATA_TRY(upload_into(g.pos, std::vector<int64_t>{pos}));
  // The cache before the window.
  STRATA_TRY(upload_into(g.cache_k, std::vector<float>(h.cache_k.begin(), h.cache_k.begin() + pos * kv_row)));
  STRATA_TRY(upload_into(g.cache_v, std::vector<float>(h.cache_v.begin(), h.cache_v.begin() + pos * kv_row)));
  if (qsa) {
    STRATA_TRY(upload_into(g.iq, h.iq));
    STRATA_TRY(upload_into(g.ik, h.ik));
    STRATA_TRY(upload_into(g.iq_norm, h.iq_norm));
    STRATA_TRY(upload_into(g.ik_norm, h.ik_norm));
    STRATA_TRY(upload_into(g.index_k, std::vector<float>(h.index_k.begin(), h.index_k.begin() + pos * id)));
    STRATA_TRY(upload_into(g.block_k, std::vector<float>(h.block_k.begin(), h.block_k.begin() + pos / d.ratio * id)));
  }

  AttnCacheView cache;
  cache.k = g.cache_k.get<float>();
  cache.v = g.cache_v.get<float>();
  cache.index_k = g.index_k.get<float>();
  cache.block_k = g.block_k.get<float>();
  AttnPrepArgs a;
  a.qg = g.qg.get<float>();
  a.k = g.k.get<float>();
  a.v = g.v.get<float>();
  a.iq = g.iq.get<float>();
  a.ik = g.ik.get<float>();
  a.q_norm = g.q_norm.get<float>();
  a.k_norm = g.k_norm.get<float>();
  a.iq_norm = g.iq_norm.get<float>();
  a.ik_norm = g.ik_norm.get<float>();
  a.q_out = g.q_out.get<float>();
  a.qi_out = g.qi_out.get<float>();
  // Packed: qg | k | v rows (and iq | ik rows) of one buffer each, with a row stride of their sum.
  const int64_t nq = nh * 2 * hd, niq = static_cast<int64_t>(d.idx_heads) * id;
  DeviceBuffer qkv_packed, idx_packed, o_q8, o_q8_want;
  const int64_t q8_stride = (nh * hd / 32 * 36 + 15) / 16 * 16;
  if (packed) {
    const int64_t stride = nq + 2 * kv_row;
    std::vector<float> host(static_cast<size_t>(T * stride), 0.0f);
    pack_rows(h.qg, nq, T, 0, stride, host);
    pack_rows(h.k, kv_row, T, nq, stride, host);
    pack_rows(h.v, kv_row, T, nq + kv_row, stride, host);
    STRATA_TRY(upload(qkv_packed, host));
    a.qg = qkv_packed.get<float>();
    a.k = a.qg + nq;
    a.v = a.qg + nq + kv_row;
    a.qg_stride = a.kv_stride = stride;
    if (qsa) {
      const int64_t istride = niq + id;
      std::vector<float> ih(static_cast<size_t>(T * istride), 0.0f);
      pack_rows(h.iq, niq, T, 0, istride, ih);
      pack_rows(h.ik, id, T, niq, istride, ih);
      STRATA_TRY(upload(idx_packed, ih));
      a.iq = idx_packed.get<float>();
      a.ik = a.iq + niq;
      a.iq_stride = a.ik_stride = istride;
    }
    STRATA_TRY(alloc_filled(o_q8, static_cast<size_t>(T * q8_stride), 0xA5));
    STRATA_TRY(alloc_filled(o_q8_want, static_cast<size_t>(T * q8_stride), 0xA5));
  }
  const int64_t* dpos = g.pos.get<int64_t>();
  Comparison cmp;

  // attn_prep.
  STRATA_TRY(attn_prep(d, a, dpos, T, cache, nullptr));
  PARITY_CUDA(cudaDeviceSynchronize());
  std::vector<float> got;
  STRATA_TRY(download(got, g.q_out.get(), h.q_out.size()));
  cmp.floats("q_out", got, h.q_out);
  STRATA_TRY(download(got, g.cache_k.get<float>() + pos * kv_row, T * kv_row));
  cmp.floats("cache.k", got, std::vector<float>(h.cache_k.begin() + pos * kv_row, h.cache_k.end()));
  STRATA_TRY(download(got, g.cache_v.get<float>() + pos * kv_row, T * kv_row));
  cmp.floats("cache.v", got, std::vector<float>(h.cache_v.begin() + pos * kv_row, h.cache_v.end()));
  int64_t new_blocks = 0;
  if (qsa) {
    STRATA_TRY(download(got, g.qi_out.get(), h.qi_out.size()));
    cmp.floats("qi_out", got, h.qi_out);
    STRATA_TRY(download(got, g.index_k.get<float>() + pos * id, T * id));
    cmp.floats("cache.index_k", got, std::vector<float>(h.index_k.begin() + pos * id, h.index_k.end()));
    const int64_t done = pos / d.ratio, complete = (pos + T) / d.ratio;
    new_blocks = complete - done;
    STRATA_TRY(download(got, g.block_k.get<float>() + done * id, new_blocks * id));
    cmp.floats("block_k", got, std::vector<float>(h.block_k.begin() + done * id, h.block_k.end()));
  }

  // qsa_select on the reference's queries and block keys, with ties planted at the cut.
  plant_ties(d, pos, T, h);
  const HostSelection hs = host_select(d, pos, T, h);
  STRATA_TRY(upload_into(g.cache_k, h.cache_k));
  STRATA_TRY(upload_into(g.cache_v, h.cache_v));
  STRATA_TRY(upload_into(g.q_out, h.q_out));
  int sparse_rows = 0;
  if (qsa) {
    STRATA_TRY(upload_into(g.block_k, h.block_k));
    STRATA_TRY(upload_into(g.qi_out, h.qi_out));
    STRATA_TRY(qsa_select(d, g.qi_out.get<float>(), dpos, T, cache, g.scores.get<float>(), g.sel.get<int32_t>(),
                          g.n_sel.get<int32_t>(), nullptr));
    PARITY_CUDA(cudaDeviceSynchronize());
    std::vector<int32_t> n_sel, sel;
    STRATA_TRY(download(n_sel, g.n_sel.get(), static_cast<size_t>(T)));
    STRATA_TRY(download(sel, g.sel.get(), static_cast<size_t>(T * d.top_blocks)));
    for (int t = 0; t < T; ++t) {
      if (n_sel[t] != hs.n_sel[t]) {
        cmp.fail(fmt::format("row {}: n_sel {} want {}", t, n_sel[t], hs.n_sel[t]));
        continue;
      }
      if (hs.n_sel[t] < 0) continue;
      ++sparse_rows;
      for (int j = 0; j < d.top_blocks; ++j)
        if (sel[t * d.top_blocks + j] != hs.blocks[t][j]) {
          cmp.fail(fmt::format("row {}: sel[{}] = {} want {}", t, j, sel[t * d.top_blocks + j], hs.blocks[t][j]));
          break;
        }
    }
    // attn_decode must see the reference's selection even where the ids differed.
    std::vector<int32_t> want_sel(static_cast<size_t>(T * d.top_blocks), 0);
    for (int t = 0; t < T; ++t) std::copy(hs.blocks[t].begin(), hs.blocks[t].end(), want_sel.begin() + t * d.top_blocks);
    STRATA_TRY(upload_into(g.sel, want_sel));
    STRATA_TRY(upload_into(g.n_sel, hs.n_sel));
  }

  // attn_decode.
  STRATA_TRY(attn_decode(d, g.q_out.get<float>(), a.qg, dpos, T, cache, g.sel.get<int32_t>(), g.n_sel.get<int32_t>(),
                         g.scratch.get(), g.o.get<float>(), nullptr, a.qg_stride, packed ? o_q8.get() : nullptr,
                         q8_stride));
  PARITY_CUDA(cudaDeviceSynchronize());
  STRATA_TRY(download(got, g.o.get(), static_cast<size_t>(T * nh * hd)));
  cmp.floats("o", got, host_attention(d, T, h, hs));
  if (packed) {
    // The fused q8_1 rows against quantize_q8_1 of the o this launch wrote: equal bytes (the
    // padding after each row's blocks is not written by either).
    STRATA_TRY(quantize_q8_1(g.o.get<float>(), nh * hd, nh * hd, T, o_q8_want.get(), q8_stride, nullptr));
    PARITY_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> got_q8, want_q8;
    STRATA_TRY(download(got_q8, o_q8.get(), static_cast<size_t>(T * q8_stride)));
    STRATA_TRY(download(want_q8, o_q8_want.get(), static_cast<size_t>(T * q8_stride)));
    if (got_q8 != want_q8) {
      size_t at = 0;
      while (at < got_q8.size() && got_q8[at] == want_q8[at]) ++at;
      cmp.fail(fmt::format("o q8_1 differs from quantize_q8_1(o) at byte {} (row {})", at, at / q8_stride));
    }
  }

  r.status = cmp.ok ? "OK" : "FAIL";
  r.detail = fmt::format("worst rel={:.1e}, {} new blocks, {} sparse rows (ids exact)", cmp.worst_rel, new_blocks, sparse_rows);
  for (const std::string& n : cmp.notes) r.detail += "; " + n;
  r.metrics = {{"worst_rel", cmp.worst_rel}, {"sparse_rows", sparse_rows}, {"new_blocks", new_blocks}};

  if (cmp.ok && opt.bench) {
    // Repeating each stage is idempotent: the same rows and blocks are rewritten with the same values.
    auto prep_ms = median_event_ms(opt.bench_reps, [] {}, [&] { return attn_prep(d, a, dpos, T, cache, nullptr); });
    if (!prep_ms) return prep_ms.status();
    double select_ms = 0.0;
    if (qsa) {
      STRATA_TRY(upload_into(g.block_k, h.block_k));
      auto ms = median_event_ms(opt.bench_reps, [] {}, [&] {
        return qsa_select(d, g.qi_out.get<float>(), dpos, T, cache, g.scores.get<float>(), g.sel.get<int32_t>(),
                          g.n_sel.get<int32_t>(), nullptr);
      });
      if (!ms) return ms.status();
      select_ms = *ms;
    }
    auto decode_ms = median_event_ms(opt.bench_reps, [] {}, [&] {
      return attn_decode(d, g.q_out.get<float>(), g.qg.get<float>(), dpos, T, cache, g.sel.get<int32_t>(),
                         g.n_sel.get<int32_t>(), g.scratch.get(), g.o.get<float>(), nullptr);
    });
    if (!decode_ms) return decode_ms.status();
    r.metrics["ms"] = *prep_ms + select_ms + *decode_ms;
    r.metrics["ms_prep"] = *prep_ms;
    r.metrics["ms_select"] = select_ms;
    r.metrics["ms_decode"] = *decode_ms;
    r.detail += fmt::format(", ms prep {:.4f} select {:.4f} decode {:.4f}", *prep_ms, select_ms, *decode_ms);
  }
  rep.add(std::move(r));
  return Status::ok_status();
}

// ---- host checks of the index helpers the kernels share -------------------------------------------

// The top-k kernel's algorithm run on the host with the same helpers: up to four radix passes (a
// pass whose bin holds exactly the keys still wanted settles the cut under the digits so far),
// then the index-order compaction; compared with reference::top_k (sorted ascending).
std::vector<int32_t> radix_top_k(const std::vector<float>& x, int k) {
  uint32_t prefix = 0, mask = 0;
  int k_rem = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    int hist[256] = {};
    for (float v : x) {
      const uint32_t key = attn_detail::score_key(v);
      if ((key & mask) == prefix) ++hist[(key >> shift) & 0xFFu];
    }
    const int bin = attn_detail::radix_pick(hist, k_rem);
    prefix |= static_cast<uint32_t>(bin) << shift;
    mask |= 0xFFu << shift;
    if (hist[bin] == k_rem) break;
  }
  std::vector<int32_t> out;
  int equal_seen = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const uint32_t key = attn_detail::score_key(x[i]) & mask;
    if (key > prefix || (key == prefix && equal_seen++ < k_rem)) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

void run_host_checks(const ParityOptions& opt, Reporter& rep) {
  {
    CaseResult r;
    r.op = "qsa_topk_host";
    r.line = "qsa_topk_host(radix select vs reference::top_k, planted ties)";
    if (rep.wanted(r.line)) {
      std::mt19937_64 rng(case_seed(opt.seed, r.line));
      int bad = 0;
      std::string first;
      for (int trial = 0; trial < 200; ++trial) {
        const int n = 1 + static_cast<int>(rng() % 3000);
        const int k = 1 + static_cast<int>(rng() % static_cast<uint64_t>(n));
        std::vector<float> x = random_normal(rng(), static_cast<size_t>(n));
        for (float& v : x) v = std::max(0.0f, v);  // scores are sums of relu: many exact zeros
        const int dups = static_cast<int>(rng() % 20);
        for (int j = 0; j < dups; ++j) x[rng() % n] = x[rng() % n];
        if (trial % 3 == 0) std::fill(x.begin(), x.end(), 0.5f);  // every score tied
        if (trial % 7 == 1) x[rng() % n] = -1.0f;                 // the order on negative keys
        std::vector<int32_t> want = ref::top_k(x, k);
        std::sort(want.begin(), want.end());
        if (radix_top_k(x, k) != want && bad++ == 0) first = fmt::format("trial {} (n={}, k={})", trial, n, k);
      }
      r.status = bad == 0 ? "OK" : "FAIL";
      r.detail = bad == 0 ? "200 trials identical" : fmt::format("{} trials differ, first {}", bad, first);
      rep.add(std::move(r));
    }
  }
  {
    CaseResult r;
    r.op = "attn_split_plan_host";
    r.line = "attn_split_plan_host(splits cover 0..n once, whole tiles)";
    if (rep.wanted(r.line)) {
      std::string bad;
      for (int splits : {1, 2, 64, 128, 512})
        for (int64_t n = 1; n <= 300000 && bad.empty(); n += (n < 5000 ? 1 : 997)) {
          const attn_detail::SplitPlan p = attn_detail::split_plan(n, splits);
          const bool covers = p.active >= 1 && p.active <= splits && (p.active - 1) * p.chunk < n && p.active * p.chunk >= n;
          if (!covers || p.chunk % 32 != 0) bad = fmt::format("n={} splits={}: chunk {} active {}", n, splits, p.chunk, p.active);
        }
      r.status = bad.empty() ? "OK" : "FAIL";
      r.detail = bad.empty() ? "exact" : bad;
      rep.add(std::move(r));
    }
  }
}

}  // namespace

Status run_attention_cases(const ParityOptions& opt, Reporter& rep) {
  run_host_checks(opt, rep);
  for (const Geometry& geo : geometries())
    for (int64_t pos : geo.positions)
      for (int T : {1, 2, 4, 8}) {
        if (pos + T > geo.d.max_ctx) continue;
        STRATA_TRY(run_case(opt, rep, geo, pos, T));
      }
  // The concatenated-projection layout and the fused q8_1 output: every T at the last position
  // of each geometry (the longest context; sparse rows where the geometry has an indexer).
  for (const Geometry& geo : geometries())
    for (int T = 1; T <= kMaxWindowRows; ++T) {
      const int64_t pos = geo.positions.back();
      if (pos + T > geo.d.max_ctx) continue;
      STRATA_TRY(run_case(opt, rep, geo, pos, T, /*packed=*/true));
    }
  return Status::ok_status();
}

}  // namespace strata::cuda
