// The depth read of every read-based scheme as fused per-token kernels (declared in kernels.hpp;
// docs/schemes.md, docs/engines.md): per token and head, one pass over each source computes its
// score (with the head's inverse RMS when the key norm is on) and, while the token's rows are in
// cache, the gated weighted sums. The statistics merge exactly (depth_read_stats,
// merge_read_stats and finish_read_stats in core/model/src/depth_read.cpp are the readable
// reference), so the same kernel runs one-shot reads, phase 1 and phase 2.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnres/depth_read.hpp"
#include "attnres/kernels.hpp"
#include "attnres/tensor.hpp"
#include "row_maps.hpp"

namespace attnres::cpu {

namespace {

// e of one score (see DepthReadSpec): the unnormalised weight given the running max.
template <typename Scalar>
Scalar unnormalised(const DepthReadSpec<Scalar>& spec, Scalar score, Scalar max) {
  switch (spec.weights) {
    case DepthWeights::mean:
      return Scalar(1);
    case DepthWeights::direct:
      return score;
    default:
      break;
  }
  if (spec.gate == DepthGate::softmax) return std::exp(score - max);
  return sigmoid(score);
}

}  // namespace

template <typename Scalar>
DepthReadSpec<Scalar> depth_read_spec(const AttnResConfig& scheme) {
  DepthReadSpec<Scalar> spec;
  if (scheme.mode == ResidualMode::rescaled) {
    spec.weights = DepthWeights::mean;
  } else if (scheme.mode == ResidualMode::denseformer) {
    spec.weights = DepthWeights::direct;
  } else if (scheme.mixing == DepthMixing::scalars) {
    spec.weights = DepthWeights::logits;
  }
  spec.gate = scheme.gate;
  spec.heads = depth_read_heads(scheme);
  spec.key_norm = scheme.key_norm;
  spec.eps = static_cast<Scalar>(scheme.key_norm_eps);
  spec.uses_max = depth_read_uses_max(scheme);
  spec.normalised = depth_read_normalised(scheme);
  return spec;
}

template <typename Scalar>
void depth_read_accumulate(const DepthReadSpec<Scalar>& spec, const Scalar* const* sources, int k,
                           int first, int n, int d, bool fresh, Scalar* m, Scalar* l, Scalar* o,
                           Scalar* scores, int t_begin, int t_end) {
  if (k <= 0) return;  // nothing to merge (a fresh read always has a source)
  const int heads = spec.heads;
  const int width = d / heads;
  const bool with_max = spec.uses_max;
  constexpr int kStack = 1024;
  Scalar stack_z[kStack];
  std::vector<Scalar> heap_z;
  Scalar* z = stack_z;
  if (k > kStack) {
    heap_z.resize(static_cast<std::size_t>(k));
    z = heap_z.data();
  }
  for (int t = t_begin; t < t_end; ++t) {
    const long row = static_cast<long>(t) * d;
    for (int c = 0; c < heads; ++c) {
      const long channels = row + static_cast<long>(c) * width;
      // Scores of the k sources in head c.
      for (int i = 0; i < k; ++i) {
        switch (spec.weights) {
          case DepthWeights::attention: {
            const Scalar* x = sources[i] + channels;
            const ConstRow<Scalar> q(spec.query + t * spec.query_stride + c * width, width);
            Scalar s = q.dot(ConstRow<Scalar>(x, width));
            if (spec.key_norm) s *= inverse_rms_of_row(x, width, spec.eps);
            z[i] = s;
            break;
          }
          case DepthWeights::logits:
          case DepthWeights::direct:
            z[i] = spec.logits[first + i];
            break;
          case DepthWeights::mean:
            z[i] = Scalar(0);
            break;
        }
      }
      if (scores) {
        std::copy(z, z + k,
                  scores + (static_cast<long>(t) * heads + c) * n + static_cast<long>(first));
      }
      const long stat = static_cast<long>(t) * heads + c;
      Row<Scalar> out(o + channels, width);
      Scalar scale_old = Scalar(1), top = Scalar(0);
      if (fresh) {
        out.setZero();
        l[stat] = Scalar(0);
        top = with_max ? *std::max_element(z, z + k) : Scalar(0);
      } else if (with_max) {
        top = std::max(m[stat], *std::max_element(z, z + k));
        scale_old = std::exp(m[stat] - top);
      }
      if (scale_old != Scalar(1)) out *= scale_old;
      Scalar sum = l[stat] * scale_old;
      for (int i = 0; i < k; ++i) {
        const Scalar e = unnormalised(spec, z[i], top);
        sum += e;
        out += e * ConstRow<Scalar>(sources[i] + channels, width);
      }
      l[stat] = sum;
      m[stat] = top;
    }
  }
}

template <typename Scalar>
void depth_read_finish(const DepthReadSpec<Scalar>& spec, int n, int d, const Scalar* m,
                       const Scalar* l, const Scalar* o, const Scalar* scores, Scalar* h,
                       Scalar* alpha, int t_begin, int t_end) {
  const int heads = spec.heads;
  const int width = d / heads;
  const bool normalised = spec.normalised;
  for (int t = t_begin; t < t_end; ++t) {
    for (int c = 0; c < heads; ++c) {
      const long stat = static_cast<long>(t) * heads + c;
      const long channels = static_cast<long>(t) * d + static_cast<long>(c) * width;
      const Scalar* z = scores + stat * n;
      Scalar* a = alpha + stat * n;
      for (int i = 0; i < n; ++i) {
        const Scalar e = unnormalised(spec, z[i], m[stat]);
        a[i] = normalised ? e / l[stat] : e;
      }
      if (normalised) {
        Row<Scalar>(h + channels, width) = ConstRow<Scalar>(o + channels, width) / l[stat];
      } else if (h != o) {
        Row<Scalar>(h + channels, width) = ConstRow<Scalar>(o + channels, width);
      }
    }
  }
}

template <typename Scalar>
void depth_input_query(const Scalar* u, int d, const Scalar* w, const Scalar* W, const Scalar* gain,
                       Scalar eps, Scalar* inv, Scalar* y, Scalar* q, Scalar* effective,
                       int t_begin, int t_end) {
  const int rows = t_end - t_begin;
  if (rows <= 0) return;
  const long begin = static_cast<long>(t_begin) * d;
  for (int t = t_begin; t < t_end; ++t) {
    const long row = static_cast<long>(t) * d;
    inv[t] = inverse_rms_of_row(u + row, d, eps);
    Row<Scalar>(y + row, d) = ConstRow<Scalar>(u + row, d) * inv[t];
  }
  Eigen::Map<RowMatrix<Scalar>> Q(q + begin, rows, d);
  Q.noalias() = Eigen::Map<const RowMatrix<Scalar>>(y + begin, rows, d) *
                Eigen::Map<const RowMatrix<Scalar>>(W, d, d).transpose();
  Q.rowwise() += ConstRow<Scalar>(w, d).transpose();
  Eigen::Map<RowMatrix<Scalar>> E(effective + begin, rows, d);
  if (gain) {
    E = (Q.array().rowwise() * ConstRow<Scalar>(gain, d).transpose().array()).matrix();
  } else {
    E = Q;
  }
}

#define ATTNRES_INSTANTIATE_DEPTH_READ_ANY(Scalar)                                                 \
  template DepthReadSpec<Scalar> depth_read_spec(const AttnResConfig&);                            \
  template void depth_read_accumulate(const DepthReadSpec<Scalar>&, const Scalar* const*, int,     \
                                      int, int, int, bool, Scalar*, Scalar*, Scalar*, Scalar*,     \
                                      int, int);                                                   \
  template void depth_read_finish(const DepthReadSpec<Scalar>&, int, int, const Scalar*,           \
                                  const Scalar*, const Scalar*, const Scalar*, Scalar*, Scalar*,   \
                                  int, int);                                                       \
  template void depth_input_query(const Scalar*, int, const Scalar*, const Scalar*, const Scalar*, \
                                  Scalar, Scalar*, Scalar*, Scalar*, Scalar*, int, int);
ATTNRES_INSTANTIATE_DEPTH_READ_ANY(float)
ATTNRES_INSTANTIATE_DEPTH_READ_ANY(double)

}  // namespace attnres::cpu
