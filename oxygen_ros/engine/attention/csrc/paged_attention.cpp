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

#include <cmath>
#include <limits>
#include <vector>

namespace {

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

  at::parallel_for(0, T * Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(G * D), acc(G * D), scores;
    for (int64_t job = begin; job < end; ++job) {
      const int64_t t = job / Hkv, g = job % Hkv;
      const int64_t L = lens[t];
      const int32_t* table = tables + static_cast<int64_t>(rows[t]) * MB;
      for (int64_t i = 0; i < G * D; ++i) {
        qf[i] = static_cast<float>(qp[(t * Hq + g * G) * D + i]) * fscale;
      }
      scores.assign(G * L, 0.f);
      for (int64_t p = 0; p < L; ++p) {
        const int64_t slot = static_cast<int64_t>(table[p / BS]) * BS + p % BS;
        const scalar_t* kv = kp + (slot * Hkv + g) * D;
        for (int64_t h = 0; h < G; ++h) {
          const float* qh = qf.data() + h * D;
          float s = 0.f;
#pragma omp simd reduction(+ : s)
          for (int64_t d = 0; d < D; ++d) s += qh[d] * static_cast<float>(kv[d]);
          scores[h * L + p] = s;
        }
      }
      for (int64_t h = 0; h < G; ++h) {
        float* sh = scores.data() + h * L;
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t p = 0; p < L; ++p) m = std::max(m, sh[p]);
        float sum = 0.f;
        for (int64_t p = 0; p < L; ++p) {
          sh[p] = std::exp(sh[p] - m);
          sum += sh[p];
        }
        const float inv = L > 0 ? 1.f / sum : 0.f;
        for (int64_t p = 0; p < L; ++p) sh[p] *= inv;
      }
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t p = 0; p < L; ++p) {
        const int64_t slot = static_cast<int64_t>(table[p / BS]) * BS + p % BS;
        const scalar_t* vv = vp + (slot * Hkv + g) * D;
        for (int64_t h = 0; h < G; ++h) {
          const float w = scores[h * L + p];
          float* ah = acc.data() + h * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) ah[d] += w * static_cast<float>(vv[d]);
        }
      }
      for (int64_t i = 0; i < G * D; ++i) {
        op[(t * Hq + g * G) * D + i] = static_cast<scalar_t>(acc[i]);
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
