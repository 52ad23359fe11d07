// The fast engine's matrix products (engine/cpu/matmul.hpp) against exact sums in long double:
// the rounding to bf16 (round to nearest, ties to even) by worked examples, and every product's
// error within the classical bound of its arithmetic (Higham, "Accuracy and Stability of
// Numerical Algorithms", §3.1): a sum of K products accumulated in precision u32 is within
// gamma_K = K u32 / (1 - K u32) of sum |a_k b_k|, and rounding both inputs to bf16 (unit
// roundoff u16 = 2^-8) adds at most (2 u16 + u16^2) sum |a_k b_k|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnres/engine.hpp"
#include "cpu/matmul.hpp"
#include "test_support.hpp"

namespace attnres::engine {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_matmul {

constexpr double kU16 = test::kBf16UnitRoundoff;      // bf16: 8 significant bits, 2^-8
constexpr double kU32 = test::kUnitRoundoff<float>;   // f32: 24 significant bits, 2^-24
constexpr double kU64 = test::kUnitRoundoff<double>;  // f64: 53 significant bits, 2^-53
double gamma(int K, double u) {
  return K * u / (1.0 - K * u);
}

TEST(Bf16, RoundsToNearestTiesToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even significand (1).
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 1.0f / 256)), 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: ties go to 1 + 2^-6.
  EXPECT_EQ(from_bf16(to_bf16(1.0f + 3.0f / 256)), 1.0f + 1.0f / 64);
  // Just above the halfway point rounds up.
  EXPECT_EQ(from_bf16(to_bf16(std::nextafter(1.0f + 1.0f / 256, 2.0f))), 1.0f + 1.0f / 128);
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(from_bf16(to_bf16(0.15625f)), 0.15625f);  // exactly representable: unchanged
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest floats round to infinity, as IEEE rounding does past the largest bf16.
  EXPECT_TRUE(std::isinf(from_bf16(to_bf16(std::numeric_limits<float>::max()))));
  // Every rounding is within half an ulp: at most u16 = 2^-8 of the value.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int i = 0; i < 10000; ++i) {
    const float x = normal(rng);
    EXPECT_LE(std::abs(from_bf16(to_bf16(x)) - x), std::abs(x) * kU16);
  }
}

struct Case {
  int M, N, K;
  bool transposed_a, transposed_b, accumulate;
  int pad;  // extra elements at the end of every stored row (a stride wider than the row)
};

class MatmulCase : public ::testing::TestWithParam<Case> {};

// Random stored operand: `rows` x `cols` of the product, stored (transposed or not) with `pad`.
struct Stored {
  std::vector<float> data;
  Eigen::Index rows, cols, stride;
  bool transposed;
  float at(Eigen::Index r, Eigen::Index c) const {
    return transposed ? data[static_cast<std::size_t>(c * stride + r)]
                      : data[static_cast<std::size_t>(r * stride + c)];
  }
  Operand<float> operand() const {
    return transposed ? transpose(data.data(), cols, rows, stride)
                      : plain(data.data(), rows, cols, stride);
  }
};

Stored random_operand(std::mt19937& rng, Eigen::Index rows, Eigen::Index cols, bool transposed,
                      int pad) {
  const Eigen::Index stored_rows = transposed ? cols : rows, stored_cols = transposed ? rows : cols;
  Stored s{std::vector<float>(static_cast<std::size_t>(stored_rows * (stored_cols + pad))), rows,
           cols, stored_cols + pad, transposed};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : s.data) x = normal(rng);
  return s;
}

void check(const Case& c, bool bf16) {
  std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.N * 7 + c.K));
  const Stored A = random_operand(rng, c.M, c.K, c.transposed_a, c.pad);
  const Stored B = random_operand(rng, c.K, c.N, c.transposed_b, c.pad);
  const Eigen::Index ldc = c.N + c.pad;
  std::vector<float> C(static_cast<std::size_t>(c.M * ldc), 0.5f);  // the accumulated start
  Matmul matmul(bf16);
  matmul(C.data(), ldc, A.operand(), B.operand(), c.accumulate);
  for (Eigen::Index i = 0; i < c.M; ++i) {
    for (Eigen::Index j = 0; j < c.N; ++j) {
      long double exact = c.accumulate ? 0.5L : 0.0L, rounded = exact, magnitude = 0;
      for (Eigen::Index k = 0; k < c.K; ++k) {
        const float a = A.at(i, k), b = B.at(k, j);
        exact += static_cast<long double>(a) * b;
        rounded += static_cast<long double>(from_bf16(to_bf16(a))) * from_bf16(to_bf16(b));
        magnitude += std::abs(static_cast<long double>(a) * b);
      }
      const double got = C[static_cast<std::size_t>(i * ldc + j)];
      // The f32 accumulation (and the accumulated start) against the sum of the inputs' products.
      const double accumulation = gamma(c.K + 1, kU32) * static_cast<double>(magnitude + 0.5L);
      if (bf16) {
        // Against the exact products of the rounded inputs: the accumulation error only, which
        // also shows the inputs were rounded to nearest (truncation would miss by ~u16).
        EXPECT_LE(std::abs(got - static_cast<double>(rounded)), accumulation * (1 + 2 * kU16))
            << i << "," << j;
        EXPECT_LE(std::abs(got - static_cast<double>(exact)),
                  (2 * kU16 + kU16 * kU16) * static_cast<double>(magnitude) + accumulation)
            << i << "," << j;
      } else {
        EXPECT_LE(std::abs(got - static_cast<double>(exact)), accumulation) << i << "," << j;
      }
    }
    for (Eigen::Index j = c.N; j < ldc; ++j)  // the padding of C is not written
      EXPECT_EQ(C[static_cast<std::size_t>(i * ldc + j)], 0.5f);
  }
}

TEST_P(MatmulCase, F32WithinTheAccumulationBound) {
  check(GetParam(), false);
}
TEST_P(MatmulCase, Bf16WithinTheRoundingBound) {
  check(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MatmulCase,
    ::testing::Values(Case{17, 13, 29, false, true, false, 0},   // activations x weight^T
                      Case{17, 13, 29, false, false, false, 3},  // activations x weight
                      Case{13, 11, 40, true, false, true, 0},    // dY^T x X, accumulated
                      Case{9, 7, 5, true, true, true, 2},
                      Case{64, 96, 256, false, true, false, 0},  // an engine-sized block
                      Case{1, 1, 1, false, false, false, 0}),
    [](const auto& info) {
      const Case& c = info.param;
      return std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
             (c.transposed_a ? "_At" : "") + (c.transposed_b ? "_Bt" : "") +
             (c.accumulate ? "_acc" : "") + (c.pad ? "_pad" : "");
    });

TEST(Matmul, UsesAGivenBf16CopyInsteadOfRoundingAgain) {
  // A weight rounded once: the product with its copy equals the product rounding it itself.
  std::mt19937 rng(3);
  const Stored A = random_operand(rng, 8, 16, false, 0);
  const Stored W = random_operand(rng, 16, 12, true, 0);  // W^T of a (12, 16) weight
  std::vector<Bf16> W16(W.data.size());
  to_bf16(W.data.data(), W16.data(), W16.size());
  std::vector<float> own(8 * 12), given(8 * 12);
  Matmul matmul(true);
  matmul(own.data(), 12, A.operand(), W.operand());
  matmul(given.data(), 12, A.operand(), transpose(W.data.data(), 12, 16, 16, W16.data()));
  EXPECT_EQ(own, given);
  // And a copy is what is used: a copy of other values changes the result.
  std::vector<Bf16> zeros(W16.size(), 0);
  matmul(given.data(), 12, A.operand(), transpose(W.data.data(), 12, 16, 16, zeros.data()));
  for (float x : given) EXPECT_EQ(x, 0.0f);
}

TEST(Matmul, Float64IsTheExactEigenProduct) {
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix<double> a(5, 7), b(9, 7);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = normal(rng);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = normal(rng);
  Matrix<double> c(5, 9);
  c.setConstant(1.0);
  Matmul matmul(true);  // bf16 does not apply to f64 products
  matmul(c.data(), 9, plain(a), transpose(b), true);
  const Matrix<double> expected = (a * b.transpose()).array() + 1.0;
  // Both are sums of K = 7 products and the 1 in f64, each within gamma_{K+1} u64 of the sum of
  // |terms| (Higham §3.1): apart by at most twice that (the same bits when both run Eigen's
  // kernel).
  const Matrix<double> magnitude = (a.cwiseAbs() * b.cwiseAbs().transpose()).array() + 1.0;
  const double bound = 2 * gamma(7 + 1, kU64);
  EXPECT_TRUE(((c - expected).cwiseAbs().array() <= bound * magnitude.array()).all())
      << "largest difference " << (c - expected).cwiseAbs().maxCoeff() << ", bound "
      << bound * magnitude.maxCoeff();
}

TEST(Matmul, ZeroInnerDimensionGivesZerosOrLeavesTheSum) {
  std::vector<float> a, b, c(6, 2.0f);
  Matmul matmul;
  matmul(c.data(), 3, plain(a.data(), 2, 0), plain(b.data(), 0, 3), true);
  for (float x : c) EXPECT_EQ(x, 2.0f);
  matmul(c.data(), 3, plain(a.data(), 2, 0), plain(b.data(), 0, 3), false);
  for (float x : c) EXPECT_EQ(x, 0.0f);
}

// Whether the CPU has native bf16 units, against what the kernel says of the CPU: oneDNN's
// avx512_core_bf16 needs the avx512_bf16 flag, its AMX level amx_bf16.
TEST(MatrixUnits, NativeBf16IsWhatTheCpuFlagsSay) {
  if (std::getenv("ONEDNN_MAX_CPU_ISA") || std::getenv("DNNL_MAX_CPU_ISA"))
    GTEST_SKIP() << "oneDNN's instruction set is capped by the environment";
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line, flags;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  }
  ASSERT_FALSE(flags.empty());
  const bool avx512 =
      flags.find(" avx512f ") != std::string::npos && flags.find(" avx512bw ") != std::string::npos;
  const bool bf16 = avx512 && (flags.find(" avx512_bf16 ") != std::string::npos ||
                               flags.find(" amx_bf16 ") != std::string::npos);
  const MatrixUnits units = matrix_units();
  EXPECT_EQ(units.native_bf16, bf16) << units.isa << "; flags:" << flags;
  EXPECT_EQ(default_training_precision(), bf16 ? Precision::bf16 : Precision::f32);
}

}  // namespace test_matmul
}  // namespace attnres::engine
