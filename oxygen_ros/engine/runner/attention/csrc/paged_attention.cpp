// Paged attention over the unified KV pool, reading every key/value where it lives.
//
// Query t attends to logical positions [0, q_len[t]) of the sequence whose block table is row
// q_row[t] of block_tables. Logical position p lives in block block_tables[row][p / BS] at
// offset p % BS. Nothing is gathered: decode of a batch of requests with different prefixes,
// lengths and frames reads the shared pool in place (this is what replaces the paper's
// per-frame stack/split of per-request caches).
//
// Layout: q [T, Hq, D]; k_cache, v_cache [NB, BS, Hkv, D] (contiguous); block_tables [R, MB]
// int32; q_row, q_len [T] int32. Grouped-query attention: head h reads kv head h / (Hq / Hkv)
// without repeating K/V in memory. Scores and softmax are computed in float32.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace {

// Work is cut into tiles: up to kMaxTile consecutive queries that read the same block-table row,
// times one KV head. A tile walks the row's blocks once, converting its keys/values to float
// into a small per-thread buffer (L2-sized: at most the row's length x head_dim), and then runs
// all its queries and query heads against them as two matrix products (scores = Q K^T,
// out = softmax(scores) V), so the dot products run at GEMM speed instead of one vector
// reduction per key and query. The action queries of a denoise step share one row: one tile
// reads each key once per step instead of once per query. Tiles are made smaller when there
// would be fewer tiles than threads.
constexpr int64_t kMaxTile = 16;

struct Tile {
  int64_t begin, end;  // queries [begin, end), all on one row
};

std::vector<Tile> make_tiles(const int32_t* rows, int64_t T, int64_t Hkv) {
  const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
  // tile size so that tiles x Hkv keeps every thread busy, capped at kMaxTile
  const int64_t want = std::max<int64_t>(1, std::min<int64_t>(kMaxTile, (T * Hkv + threads - 1) / threads));
  std::vector<Tile> tiles;
  int64_t begin = 0;
  for (int64_t t = 1; t <= T; ++t) {
    if (t == T || rows[t] != rows[begin] || t - begin == want) {
      tiles.push_back({begin, t});
      begin = t;
    }
  }
  return tiles;
}

template <typename scalar_t>
void paged_attention_kernel(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                            const at::Tensor& block_tables, const at::Tensor& q_row,
                            const at::Tensor& q_len, double scale, at::Tensor& out) {
  const int64_t T = q.size(0), Hq = q.size(1), D = q.size(2);
  const int64_t BS = k_cache.size(1), Hkv = k_cache.size(2);
  const int64_t MB = block_tables.size(1);
  const int64_t G = Hq / Hkv;
  const scalar_t* qp = q.data_ptr<scalar_t>();
  const scalar_t* kp = k_cache.data_ptr<scalar_t>();
  const scalar_t* vp = v_cache.data_ptr<scalar_t>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int32_t* rows = q_row.data_ptr<int32_t>();
  const int32_t* lens = q_len.data_ptr<int32_t>();
  scalar_t* op = out.data_ptr<scalar_t>();
  const float fscale = static_cast<float>(scale);
  const std::vector<Tile> tiles = make_tiles(rows, T, Hkv);
  const int64_t jobs = static_cast<int64_t>(tiles.size()) * Hkv;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);

  at::parallel_for(0, jobs, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf, kf, vf, scores, acc;
    for (int64_t job = begin; job < end; ++job) {
      const Tile tile = tiles[job / Hkv];
      const int64_t g = job % Hkv;
      const int64_t n = tile.end - tile.begin;  // queries in the tile
      const int64_t R = n * G;                  // rows of the products: (query, head)
      const int32_t* table = tables + static_cast<int64_t>(rows[tile.begin]) * MB;
      int64_t L = 0;  // the longest query of the tile decides how far the row is read
      for (int64_t i = 0; i < n; ++i) L = std::max<int64_t>(L, lens[tile.begin + i]);
      qf.resize(R * D);
      for (int64_t i = 0; i < n; ++i) {
        const scalar_t* src = qp + ((tile.begin + i) * Hq + g * G) * D;
        for (int64_t j = 0; j < G * D; ++j) qf[i * G * D + j] = static_cast<float>(src[j]) * fscale;
      }
      acc.assign(R * D, 0.f);
      if (L > 0) {
        kf.resize(L * D);
        vf.resize(L * D);
        for (int64_t p = 0; p < L; ++p) {
          const int64_t slot = static_cast<int64_t>(table[p / BS]) * BS + p % BS;
          const scalar_t* ks = kp + (slot * Hkv + g) * D;
          const scalar_t* vs = vp + (slot * Hkv + g) * D;
          for (int64_t d = 0; d < D; ++d) {
            kf[p * D + d] = static_cast<float>(ks[d]);
            vf[p * D + d] = static_cast<float>(vs[d]);
          }
        }
        scores.resize(R * L);
        auto Q = at::from_blob(qf.data(), {R, D}, f32);
        auto K = at::from_blob(kf.data(), {L, D}, f32);
        auto V = at::from_blob(vf.data(), {L, D}, f32);
        auto S = at::from_blob(scores.data(), {R, L}, f32);
        auto O = at::from_blob(acc.data(), {R, D}, f32);
        at::mm_out(S, Q, K.t());
        for (int64_t r = 0; r < R; ++r) {
          const int64_t Li = lens[tile.begin + r / G];
          float* sr = scores.data() + r * L;
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t p = 0; p < Li; ++p) m = std::max(m, sr[p]);
          float sum = 0.f;
          for (int64_t p = 0; p < Li; ++p) {
            sr[p] = std::exp(sr[p] - m);
            sum += sr[p];
          }
          const float inv = Li > 0 ? 1.f / sum : 0.f;
          for (int64_t p = 0; p < Li; ++p) sr[p] *= inv;
          for (int64_t p = Li; p < L; ++p) sr[p] = 0.f;  // keys past this query's length
        }
        at::mm_out(O, S, V);
      }
      for (int64_t i = 0; i < n; ++i) {
        scalar_t* dst = op + ((tile.begin + i) * Hq + g * G) * D;
        for (int64_t j = 0; j < G * D; ++j) dst[j] = static_cast<scalar_t>(acc[i * G * D + j]);
      }
    }
  });
}

at::Tensor paged_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           const at::Tensor& block_tables, const at::Tensor& q_row,
                           const at::Tensor& q_len, double scale) {
  TORCH_CHECK(q.dim() == 3, "q must be [T, Hq, D]");
  TORCH_CHECK(k_cache.dim() == 4 && v_cache.sizes() == k_cache.sizes(),
              "k_cache and v_cache must both be [NB, BS, Hkv, D]");
  TORCH_CHECK(q.size(2) == k_cache.size(3), "head_dim of q and cache differ");
  TORCH_CHECK(q.size(1) % k_cache.size(2) == 0, "Hq must be a multiple of Hkv");
  TORCH_CHECK(q.scalar_type() == k_cache.scalar_type() && q.scalar_type() == v_cache.scalar_type(),
              "q and caches must share a dtype");
  TORCH_CHECK(block_tables.scalar_type() == at::kInt && q_row.scalar_type() == at::kInt &&
                  q_len.scalar_type() == at::kInt,
              "block_tables, q_row and q_len must be int32");
  TORCH_CHECK(q_row.numel() == q.size(0) && q_len.numel() == q.size(0), "one row and length per query");
  TORCH_CHECK(k_cache.is_contiguous() && v_cache.is_contiguous(), "caches must be contiguous");
  auto qc = q.contiguous();
  auto tables = block_tables.contiguous();
  auto rows = q_row.contiguous();
  auto lens = q_len.contiguous();
  auto out = at::empty_like(qc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, qc.scalar_type(), "paged_attention", [&] {
    paged_attention_kernel<scalar_t>(qc, k_cache, v_cache, tables, rows, lens, scale, out);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(oxygen, m) {
  m.def(
      "paged_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, Tensor q_row, "
      "Tensor q_len, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(oxygen, CPU, m) { m.impl("paged_attention", &paged_attention); }
