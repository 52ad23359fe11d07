#include "cpu/matmul.hpp"

#include <cstring>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "attnres/error.hpp"

// oneDNN on Debian runs its primitives in OpenMP (libgomp, which libdnnl links). A thread that is
// not an OpenMP thread has its own thread-count setting; every Matmul sets its calling thread's to
// one before a product, so the engine's thread pool, not OpenMP, splits the work. Declared here
// rather than through <omp.h>: the header belongs to the compiler (clang has none without
// libomp-dev), and this is the only OpenMP call.
extern "C" void omp_set_num_threads(int threads);

namespace attnres::engine {

Bf16 to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  // Without a branch, so that the loop below vectorises: a NaN keeps its sign and becomes quiet;
  // everything else rounds to nearest, ties to even (overflow rounds to infinity).
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<Bf16>(nan ? (bits >> 16) | 0x0040u : rounded);
}

float from_bf16(Bf16 value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float out = 0;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

void to_bf16(const float* in, Bf16* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = to_bf16(in[i]);
}

std::vector<Bf16> to_bf16(const Matrix<float>& matrix) {
  std::vector<Bf16> out(static_cast<std::size_t>(matrix.size()));
  to_bf16(matrix.data(), out.data(), out.size());
  return out;
}

namespace {

using dnnl::memory;

// What makes one primitive: shape, both operands' strides, types and accumulation.
using Key = std::tuple<Eigen::Index, Eigen::Index, Eigen::Index, Eigen::Index, Eigen::Index,
                       Eigen::Index, bool, bool, bool, bool>;

// The oneDNN strides (row, column) of an operand.
memory::dims strides_of(const Operand<float>& x) {
  return x.transposed ? memory::dims{1, x.stride} : memory::dims{x.stride, 1};
}

}  // namespace

struct Matmul::Impl {
  dnnl::engine cpu{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{cpu};
  std::map<Key, dnnl::matmul> primitives;
  std::vector<Bf16> a16, b16;   // operands rounded here
  std::vector<float> a32, b32;  // and widened back, where oneDNN has no bf16 matmul
  bool widen = false;           // that is so on this CPU

  // The rounded operand `x16` (layout: x's, stride already the rounded copy's) widened to f32.
  static const float* widened(const Bf16* x16, const Operand<float>& x,
                              std::vector<float>& scratch) {
    const Eigen::Index stored_rows = x.transposed ? x.cols : x.rows;
    const Eigen::Index stored_cols = x.transposed ? x.rows : x.cols;
    const auto size = static_cast<std::size_t>((stored_rows - 1) * x.stride + stored_cols);
    if (scratch.size() < size) scratch.resize(size);
    for (Eigen::Index r = 0; r < stored_rows; ++r) {
      for (Eigen::Index c = 0; c < stored_cols; ++c)
        scratch[static_cast<std::size_t>(r * x.stride + c)] = from_bf16(x16[r * x.stride + c]);
    }
    return scratch.data();
  }

  // The operand in bf16: its own copy when it has one, else rounded into `scratch` (stored rows
  // packed: the stride becomes the stored row length).
  static const Bf16* rounded(const Operand<float>& x, std::vector<Bf16>& scratch,
                             Eigen::Index& stride) {
    if (x.bf16) {
      stride = x.stride;
      return x.bf16;
    }
    const Eigen::Index stored_rows = x.transposed ? x.cols : x.rows;
    const Eigen::Index stored_cols = x.transposed ? x.rows : x.cols;
    const auto size = static_cast<std::size_t>(stored_rows * stored_cols);
    if (scratch.size() < size) scratch.resize(size);
    for (Eigen::Index r = 0; r < stored_rows; ++r) {
      to_bf16(x.data + r * x.stride, scratch.data() + r * stored_cols,
              static_cast<std::size_t>(stored_cols));
    }
    stride = stored_cols;
    return scratch.data();
  }

  dnnl::matmul& primitive(const Operand<float>& A, const Operand<float>& B, Eigen::Index ldc,
                          bool bf16, bool accumulate) {
    const Key key{A.rows, A.cols,       B.cols,       A.stride, B.stride,
                  ldc,    A.transposed, B.transposed, bf16,     accumulate};
    auto found = primitives.find(key);
    if (found != primitives.end()) return found->second;
    const auto type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    const memory::desc a({A.rows, A.cols}, type, strides_of(A));
    const memory::desc b({B.rows, B.cols}, type, strides_of(B));
    const memory::desc c({A.rows, B.cols}, memory::data_type::f32, memory::dims{ldc, 1});
    dnnl::primitive_attr attr;
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu);
    return primitives.emplace(key, dnnl::matmul(pd)).first->second;
  }
};

Matmul::Matmul(bool bf16) : bf16_(bf16), impl_(std::make_unique<Impl>()) {}
Matmul::~Matmul() = default;
Matmul::Matmul(Matmul&&) noexcept = default;
Matmul& Matmul::operator=(Matmul&&) noexcept = default;

void Matmul::operator()(float* C, Eigen::Index ldc, const Operand<float>& A,
                        const Operand<float>& B, bool accumulate) {
  if (A.cols != B.rows) throw Error("matmul: inner dimensions differ");
  if (A.rows == 0 || B.cols == 0) return;
  if (A.cols == 0) {
    if (!accumulate) {
      for (Eigen::Index r = 0; r < A.rows; ++r) std::fill(C + r * ldc, C + r * ldc + B.cols, 0.f);
    }
    return;
  }
  omp_set_num_threads(1);
  Operand<float> a = A, b = B;
  const void* a_data = A.data;
  const void* b_data = B.data;
  bool bf16_inputs = false;
  if (bf16_) {
    a_data = Impl::rounded(A, impl_->a16, a.stride);
    b_data = Impl::rounded(B, impl_->b16, b.stride);
    bf16_inputs = !impl_->widen;
    if (bf16_inputs) {
      try {
        impl_->primitive(a, b, ldc, true, accumulate);
      } catch (const dnnl::error&) {
        // This oneDNN has no bf16 matmul for this CPU (before AVX-512): the same arithmetic with
        // the rounded inputs widened back to f32 (exact), the products accumulated in f32.
        impl_->widen = true;
        bf16_inputs = false;
      }
    }
    if (!bf16_inputs) {
      a_data = Impl::widened(static_cast<const Bf16*>(a_data), a, impl_->a32);
      b_data = Impl::widened(static_cast<const Bf16*>(b_data), b, impl_->b32);
    }
  }
  dnnl::matmul& mm = impl_->primitive(a, b, ldc, bf16_inputs, accumulate);
  const auto type = bf16_inputs ? memory::data_type::bf16 : memory::data_type::f32;
  memory ma({{a.rows, a.cols}, type, strides_of(a)}, impl_->cpu, const_cast<void*>(a_data));
  memory mb({{b.rows, b.cols}, type, strides_of(b)}, impl_->cpu, const_cast<void*>(b_data));
  memory mc({{a.rows, b.cols}, memory::data_type::f32, memory::dims{ldc, 1}}, impl_->cpu, C);
  mm.execute(impl_->stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  impl_->stream.wait();
}

void Matmul::operator()(double* C, Eigen::Index ldc, const Operand<double>& A,
                        const Operand<double>& B, bool accumulate) {
  if (A.cols != B.rows) throw Error("matmul: inner dimensions differ");
  using Strided = Eigen::Map<const Matrix<double>, 0, Eigen::OuterStride<>>;
  auto stored = [](const Operand<double>& x) {
    return x.transposed ? Strided(x.data, x.cols, x.rows, Eigen::OuterStride<>(x.stride))
                        : Strided(x.data, x.rows, x.cols, Eigen::OuterStride<>(x.stride));
  };
  Eigen::Map<Matrix<double>, 0, Eigen::OuterStride<>> out(C, A.rows, B.cols,
                                                          Eigen::OuterStride<>(ldc));
  const Strided a = stored(A), b = stored(B);
  auto product = [&](const auto& left, const auto& right) {
    if (accumulate) {
      out.noalias() += left * right;
    } else {
      out.noalias() = left * right;
    }
  };
  if (!A.transposed && !B.transposed) product(a, b);
  if (!A.transposed && B.transposed) product(a, b.transpose());
  if (A.transposed && !B.transposed) product(a.transpose(), b);
  if (A.transposed && B.transposed) product(a.transpose(), b.transpose());
}

std::string matmul_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

bool native_bf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

}  // namespace attnres::engine
