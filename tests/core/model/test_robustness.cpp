// Numerical robustness and determinism (issue: hardening): extreme scores, zero sources, F16/BF16
// extremes, non-finite values reported where they first appear, bit-identical outputs across runs
// and threads, and models too large to load refused before allocating.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <thread>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"
#include "attnres/safetensors.hpp"
#include "model_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_robustness {

ModelConfig config() {
  ModelConfig c;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.intermediate_size = 24;
  c.vocab_size = 32;
  return c;
}

ForwardOptions block(bool two_phase) {
  ForwardOptions o;
  o.mode = ResidualMode::block;
  o.block_size = 2;
  o.two_phase = two_phase;
  return o;
}

TEST(Robustness, HugeDepthScoresStayFiniteAndBothSchedulesAgree) {
  auto model = random_model(config(), {.seed = 3, .weight_std = 0.3, .query_std = 1.0});
  for (int r = 0; r <= model.config.sublayers(); ++r)
    model.depth_read(r).query *= 2500.0;  // scores ~ ±1e4
  const auto one_shot = forward(model, {1, 2, 3}, block(false));
  const auto two_phase = forward(model, {1, 2, 3}, block(true));
  EXPECT_TRUE(two_phase.logits.allFinite());
  // Another order of the same arithmetic, but the weights move by the scores' absolute error,
  // ~1e4 times their relative one: 1e4 x 96 u (two orders of d = 16-term dot products, 2 x 16 u,
  // the key norm's few u each, and a factor 2), ~1e-10 of the logits' magnitude.
  constexpr double kScoreMagnitude = 1e4;
  test::expect_tensor_near("two-phase vs one-shot at ±1e4 scores", two_phase.logits,
                           one_shot.logits, kScoreMagnitude * test::roundoffs<double>(96));
  // Each row of weights sums to 1: n <= 3 weights exp(s - m) / l, each within ~4 u of its value,
  // summed in n u: 32 u.
  for (const auto& read : two_phase.trace.reads) {
    for (Eigen::Index t = 0; t < read.alpha.rows(); ++t)
      EXPECT_TRUE(test::near_relative(read.alpha.row(t).sum(), 1.0, test::roundoffs<double>(32),
                                      0.0, read.target + " row sum"));
  }
}

TEST(Robustness, AllZeroSourceVectorsAreHandledByTheKeyNormEps) {
  auto model = random_model(config(), {.seed = 4, .weight_std = 0.3, .query_std = 1.0});
  model.embed_tokens.row(5).setZero();  // token 5 embeds to the zero vector
  for (bool two_phase : {false, true}) {
    const auto result = forward(model, {5, 5, 1}, block(two_phase));
    EXPECT_TRUE(result.logits.allFinite());
  }
  test::expect_tensor_near(
      "zero source, two-phase vs one-shot", forward(model, {5, 5, 1}, block(true)).logits,
      forward(model, {5, 5, 1}, block(false)).logits, test::kReorderedBound<double>);
}

TEST(Robustness, NonFiniteValuesAreReportedWhereTheyFirstAppear) {
  auto model = random_model(config(), {.seed = 5, .weight_std = 0.3});
  model.layers[1].gate_proj(0, 0) =
      std::numeric_limits<double>::infinity();  // MLP of layer 1 = sublayer 4
  try {
    forward(model, {1, 2}, block(true));
    ADD_FAILURE() << "a NaN/Inf flowed through";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("first appeared in the output v of sublayer 4 (mlp, layer 1)"),
              std::string::npos)
        << error.what();
  }
  // Values beyond float32's range: reported at the embedding, with the hint to use f64.
  auto beyond = random_model(config(), {.seed = 6, .weight_std = 0.3});
  beyond.embed_tokens *= 1e40;
  try {
    forward(beyond.cast<float>(), {1}, block(true));
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("first appeared in the token embedding v_0"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("try --precision f64"), std::string::npos)
        << error.what();
  }
  EXPECT_TRUE(forward(beyond, {1}, block(true)).logits.allFinite());
}

TEST(Robustness, HugeButRepresentableActivationsAreNormalisedNotZeroed) {
  // Squares of 3e24 overflow float32; RMSNorm and the key norm rescale instead of returning 0.
  auto big = random_model(config(), {.seed = 6, .weight_std = 0.3, .query_std = 1.0});
  big.embed_tokens *= 1e25;
  const auto f32 = forward(big.cast<float>(), {1, 2}, block(true));
  const auto f64 = forward(big, {1, 2}, block(true));
  // f32 rounding through the network (168 u of f32 in Forward.Float32TracksFloat64), ten times
  // for the rows rescaled by their largest element before squaring (a division per element) and
  // the 1e25-scale stream: 1680 u, the old 1e-4, relative to the logits' magnitude.
  test::expect_tensor_near("float32 with 1e25-scale embeddings vs float64", f32.logits, f64.logits,
                           test::roundoffs<float>(1680));
  EXPECT_GT(f32.trace.sublayer_output_rms[0], 0.0);
}

TEST(Robustness, HalfAndBfloat16ExtremesLoadExactlyAndInfinityIsRefused) {
  test::TempDir dir;
  save_model(random_model(config(), {.seed = 7}), dir.path());
  // Rewrite model.norm.weight (16 values) as F16 with the extremes, and lm_head as BF16.
  const auto file = SafetensorsFile::read(dir / "model.safetensors");
  auto rewrite = [&](const std::vector<std::uint16_t>& norm_bits, std::uint16_t head_bits) {
    std::string header = "{";
    std::string data;
    bool first = true;
    for (const auto& info : file.tensors()) {
      std::string dtype = "F32", bytes;
      if (info.name == "model.norm.weight") {
        dtype = "F16";
        for (auto bits : norm_bits) bytes.append(reinterpret_cast<const char*>(&bits), 2);
      } else if (info.name == "lm_head.weight") {
        dtype = "BF16";
        for (std::int64_t i = 0; i < info.element_count(); ++i)
          bytes.append(reinterpret_cast<const char*>(&head_bits), 2);
      } else {
        for (double v : file.values(info)) {
          const float f = static_cast<float>(v);
          bytes.append(reinterpret_cast<const char*>(&f), 4);
        }
      }
      header += std::string(first ? "" : ",") + "\"" + info.name + "\":{\"dtype\":\"" + dtype +
                "\",\"shape\":[" + std::to_string(info.shape[0]) +
                (info.shape.size() > 1 ? "," + std::to_string(info.shape[1]) : "") +
                "],\"data_offsets\":[" + std::to_string(data.size()) + "," +
                std::to_string(data.size() + bytes.size()) + "]}";
      data += bytes;
      first = false;
    }
    header += "}";
    std::string out(8, '\0');
    const std::uint64_t length = header.size();
    std::memcpy(out.data(), &length, 8);
    write_file_atomically(dir / "model.safetensors", out + header + data);
  };
  std::vector<std::uint16_t> extremes(16, 0x3c00);  // 1.0
  extremes[0] = 0x7bff;                             // 65504, largest half
  extremes[1] = 0x0001;                             // 2^-24, smallest subnormal
  extremes[2] = 0x8000;                             // -0
  rewrite(extremes, 0x7f7f);                        // largest finite bfloat16, 3.3895e38
  const auto model = load_model(dir.path());
  EXPECT_EQ(model.norm(0), 65504.0);
  EXPECT_EQ(model.norm(1), std::ldexp(1.0, -24));
  EXPECT_EQ(model.norm(2), 0.0);
  EXPECT_EQ(model.lm_head(3, 3), 0x1.fep127);
  EXPECT_THROW(forward(model.cast<float>(), {1}, block(true)), Error);  // logits overflow float32
  extremes[3] = 0x7c00;                                                 // +Inf
  rewrite(extremes, 0x3f80);
  try {
    load_model(dir.path());
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("'model.norm.weight' holds a non-finite value (inf) at flat index 3"),
              std::string::npos)
        << error.what();
  }
}

TEST(Robustness, OutputsAreBitIdenticalAcrossRunsAndThreads) {
  const auto model =
      random_model(config(), {.seed = 8, .weight_std = 0.3, .query_std = 1.0}).cast<float>();
  const std::vector<int> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  const auto reference = forward(model, tokens, block(true));
  std::vector<Matrix<float>> results(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = forward(model, tokens, block(true)).logits; });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& logits : results) {
    EXPECT_EQ(std::memcmp(logits.data(), reference.logits.data(),
                          sizeof(float) * static_cast<std::size_t>(logits.size())),
              0);
  }
  EXPECT_EQ(std::memcmp(forward(model, tokens, block(true)).logits.data(), reference.logits.data(),
                        sizeof(float) * static_cast<std::size_t>(reference.logits.size())),
            0);
}

TEST(Robustness, ModelsTooLargeForMemoryAreRefusedBeforeAllocating) {
  test::TempDir dir;
  write_file_atomically(
      dir / "config.json",
      R"({"hidden_size": 65536, "num_hidden_layers": 4096, "num_attention_heads": 64,
                            "intermediate_size": 262144, "vocab_size": 1000000})");
  write_file_atomically(dir / "model.safetensors", "tiny");
  try {
    load_model(dir.path());
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("refusing to load"), std::string::npos)
        << error.what();
  }
  ModelConfig huge = config();
  huge.hidden_size = 2'000'000'000;
  huge.num_attention_heads = 2;
  huge.num_key_value_heads = 2;
  huge.intermediate_size = 2'000'000'000;
  huge.vocab_size = 2'000'000'000;
  huge.num_hidden_layers = 2'000'000'000;
  EXPECT_THROW(model_bytes_as_float64(huge, "huge"), Error);  // overflows 64 bits
  // The limit is MemAvailable from /proc/meminfo: positive and at most MemTotal, not the "no limit"
  // answer (the largest uint64) that a failed read gives, which would let any model through.
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  std::uint64_t kilobytes = 0, total_kilobytes = 0;
  while (total_kilobytes == 0 && meminfo >> key >> kilobytes >> unit) {
    if (key == "MemTotal:") total_kilobytes = kilobytes;
  }
  ASSERT_GT(total_kilobytes, 0u) << "no MemTotal in /proc/meminfo";
  const std::uint64_t available = available_memory_bytes();
  EXPECT_GT(available, 0u);
  EXPECT_LE(available, total_kilobytes * 1024);
}

TEST(Robustness, AFailedWriteLeavesThePreviousFileIntact) {
  test::TempDir dir;
  write_file_atomically(dir / "out.json", "old");
  std::filesystem::create_directories(dir / "blocker");
  write_file_atomically(dir / "blocker/inside", "x");
  EXPECT_THROW(write_file_atomically(dir / "blocker", "new"),
               Error);  // rename onto a non-empty directory fails
  // The target of the failed write is as it was (a directory with its file), and so is the rest.
  EXPECT_TRUE(std::filesystem::is_directory(dir / "blocker"));
  EXPECT_EQ(read_file(dir / "blocker/inside"), "x");
  EXPECT_EQ(read_file(dir / "out.json"), "old");
  // A successful write replaces the old content in one step.
  write_file_atomically(dir / "out.json", "new");
  EXPECT_EQ(read_file(dir / "out.json"), "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++entries;
  EXPECT_EQ(entries, 2);  // no temporary file left behind
}

}  // namespace test_robustness
}  // namespace attnres
