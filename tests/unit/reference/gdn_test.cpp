// Gated DeltaNet: the recurrence against a straightforward transcription of transformers'
// torch_recurrent_gated_delta_rule in its grouped head order, and chunked == recurrent.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "strata/reference/gdn.h"
#include "strata/reference/ops.h"

namespace strata::reference {
namespace {

struct Inputs {
  GdnShape s;
  int64_t n;
  std::vector<float> q, k, v, g, beta, state;
};

Inputs make_inputs(int64_t n, uint64_t seed, GdnShape s = {2, 6, 8}) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  Inputs in{s, n, {}, {}, {}, {}, {}, {}};
  const int64_t d = s.head_dim;
  in.q.resize(n * s.n_k_heads * d);
  in.k.resize(n * s.n_k_heads * d);
  in.v.resize(n * s.n_v_heads * d);
  for (float& x : in.q) x = normal(rng);
  for (float& x : in.k) x = normal(rng);
  for (float& x : in.v) x = normal(rng);
  for (int64_t i = 0; i < n * s.n_k_heads; ++i) {
    l2_norm({in.q.data() + i * d, static_cast<size_t>(d)});
    l2_norm({in.k.data() + i * d, static_cast<size_t>(d)});
  }
  for (int64_t i = 0; i < n * s.n_v_heads; ++i) {
    in.g.push_back(-2.0f * uni(rng));  // log-decay <= 0
    in.beta.push_back(uni(rng));
  }
  in.state.resize(s.n_v_heads * d * d);
  for (float& x : in.state) x = 0.1f * normal(rng);
  return in;
}

// transformers' loop, grouped order: value head j uses key head j / (nv / nk).
void naive_grouped(const Inputs& in, std::vector<float>& state, std::vector<float>& out) {
  const int64_t d = in.s.head_dim, nk = in.s.n_k_heads, nv = in.s.n_v_heads, ratio = nv / nk;
  out.assign(in.n * nv * d, 0.0f);
  for (int64_t t = 0; t < in.n; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      const float* q = &in.q[(t * nk + h / ratio) * d];
      const float* k = &in.k[(t * nk + h / ratio) * d];
      const float* v = &in.v[(t * nv + h) * d];
      float* m = &state[h * d * d];
      for (int64_t i = 0; i < d * d; ++i) m[i] *= std::exp(in.g[t * nv + h]);
      for (int64_t j = 0; j < d; ++j) {
        double mem = 0;
        for (int64_t i = 0; i < d; ++i) mem += m[i * d + j] * k[i];
        const double delta = (v[j] - mem) * in.beta[t * nv + h];
        for (int64_t i = 0; i < d; ++i) m[i * d + j] += k[i] * delta;
      }
      for (int64_t j = 0; j < d; ++j) {
        double o = 0;
        for (int64_t i = 0; i < d; ++i) o += m[i * d + j] * q[i] / std::sqrt(double(d));
        out[(t * nv + h) * d + j] = static_cast<float>(o);
      }
    }
  }
}

// Grouped value head (key head gk, repeat r) sits at tiled index r * nk + gk.
std::vector<float> to_tiled(const std::vector<float>& x, int64_t rows, int64_t nk, int64_t nv, int64_t width) {
  std::vector<float> y(x.size());
  const int64_t ratio = nv / nk;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < nv; ++j) {
      const int64_t tiled = (j % ratio) * nk + j / ratio;
      std::copy_n(&x[(t * nv + j) * width], width, &y[(t * nv + tiled) * width]);
    }
  }
  return y;
}

TEST(Gdn, RecurrentMatchesTransformersLoopInTiledOrder) {
  Inputs in = make_inputs(20, 1);
  const int64_t d = in.s.head_dim, nk = in.s.n_k_heads, nv = in.s.n_v_heads;
  std::vector<float> ref_state = in.state, ref_out;
  naive_grouped(in, ref_state, ref_out);

  std::vector<float> v = to_tiled(in.v, in.n, nk, nv, d), g = to_tiled(in.g, in.n, nk, nv, 1),
                     beta = to_tiled(in.beta, in.n, nk, nv, 1), state = to_tiled(in.state, 1, nk, nv, d * d);
  std::vector<float> out(in.n * nv * d);
  ThreadPool pool(2);
  gdn_recurrent(in.s, in.q.data(), in.k.data(), v.data(), g.data(), beta.data(), in.n, state.data(), out.data(), pool);
  const std::vector<float> want_out = to_tiled(ref_out, in.n, nk, nv, d);
  const std::vector<float> want_state = to_tiled(ref_state, 1, nk, nv, d * d);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want_out[i], 2e-5) << i;
  for (size_t i = 0; i < state.size(); ++i) ASSERT_NEAR(state[i], want_state[i], 2e-5) << i;
}

// Chunked (3 chunks, the last one padded) equals the recurrence from the same initial state.
TEST(Gdn, ChunkedEqualsRecurrence) {
  for (int64_t n : {1, 63, 64, 150}) {
    Inputs in = make_inputs(n, 2 + n);
    std::vector<float> s1 = in.state, s2 = in.state;
    std::vector<float> o1(n * in.s.n_v_heads * in.s.head_dim), o2(o1.size());
    ThreadPool pool(2);
    gdn_recurrent(in.s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), n, s1.data(), o1.data(), pool);
    gdn_chunked(in.s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), n, s2.data(), o2.data(), pool);
    float worst = 0;
    for (size_t i = 0; i < o1.size(); ++i) worst = std::max(worst, std::fabs(o1[i] - o2[i]));
    for (size_t i = 0; i < s1.size(); ++i) worst = std::max(worst, std::fabs(s1[i] - s2[i]));
    EXPECT_LE(worst, 2e-5f) << "gdn_chunked(T=" << n << ") vs gdn_recurrent";
  }
}

// Streaming: two chunked calls carry the state like one call.
TEST(Gdn, ChunkedCarriesStateAcrossCalls) {
  Inputs in = make_inputs(100, 3);
  const int64_t d = in.s.head_dim, nk = in.s.n_k_heads, nv = in.s.n_v_heads;
  std::vector<float> s1 = in.state, s2 = in.state, o1(100 * nv * d), o2(100 * nv * d);
  ThreadPool pool(1);
  gdn_chunked(in.s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), 100, s1.data(), o1.data(), pool);
  gdn_chunked(in.s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), 30, s2.data(), o2.data(), pool);
  gdn_chunked(in.s, in.q.data() + 30 * nk * d, in.k.data() + 30 * nk * d, in.v.data() + 30 * nv * d,
              in.g.data() + 30 * nv, in.beta.data() + 30 * nv, 70, s2.data(), o2.data() + 30 * nv * d, pool);
  for (size_t i = 0; i < o1.size(); ++i) ASSERT_NEAR(o1[i], o2[i], 2e-5);
}

}  // namespace
}  // namespace strata::reference
