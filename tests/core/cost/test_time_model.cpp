// Hardware presets and the roofline time model (docs/math.md §3.4).
#include <gtest/gtest.h>

#include <cstdio>

#include "attnres/error.hpp"
#include "attnres/hardware.hpp"
#include "attnres/time_model.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_time_model {

TEST(Hardware, PresetsCarryTheDatasheetFigures) {
  struct Expected {
    const char* name;
    double tflops, tbps, nvlink_gbps, memory_gib;
  };
  // Datasheets; device memory as the GiB PyTorch reports usable ("total capacity" in public
  // out-of-memory messages): 80 GB parts hold 79.15 (A100) and 79.19 GiB (H100, H800), H200
  // 139.80, B200 178.35, GB300 276.50; the RTX 5090's 31.36 is assumed.
  for (const auto& e :
       {Expected{"a100", 312, 2.04, 300, 79.15}, Expected{"a100-40gb", 312, 1.555, 300, 39.39},
        Expected{"h100", 989, 3.35, 450, 79.19}, Expected{"h200", 989, 4.8, 450, 139.80},
        Expected{"b200", 2250, 7.7, 900, 178.35}, Expected{"gb300", 2250, 8.0, 900, 276.50},
        Expected{"h800", 989, 3.35, 200, 79.19}, Expected{"rtx5090", 209.5, 1.792, 64, 31.36}}) {
    const Hardware hw = load_hardware(e.name);
    EXPECT_DOUBLE_EQ(hw.peak_flops, e.tflops * 1e12) << e.name;
    EXPECT_DOUBLE_EQ(hw.hbm_bandwidth, e.tbps * 1e12) << e.name;
    EXPECT_DOUBLE_EQ(hw.intra_node_bandwidth, e.nvlink_gbps * 1e9) << e.name;
    // The preset writes whole bytes: within half a byte of the GiB figure.
    EXPECT_NEAR(hw.memory_bytes, e.memory_gib * 1024 * 1024 * 1024, 0.5) << e.name;
    EXPECT_FALSE(hw.source.empty());
    EXPECT_GT(hw.compute_efficiency, 0);
    EXPECT_LE(hw.compute_efficiency, 1);
    EXPECT_GT(hw.kernel_floor, 1e-6) << e.name;  // a few µs per call (docs/math.md §3.6)
    EXPECT_LT(hw.kernel_floor, 1e-5) << e.name;
  }
  EXPECT_DOUBLE_EQ(load_hardware("gb300").kernel_floor, 4.16e-6);  // fitted to vLLM PR #50185
  EXPECT_EQ(hardware_preset_names(), (std::vector<std::string>{"a100-40gb", "a100", "b200", "gb300",
                                                               "h100", "h200", "h800", "rtx5090"}));
}

TEST(Hardware, BadPresetsAreLocated) {
  auto expect_error = [](const std::string& text, const std::string& needle) {
    try {
      parse_hardware(text, "gpu.toml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  const std::string ok =
      "peak_bf16_flops = 1e15\nhbm_bandwidth = 3e12\nintra_node_bandwidth = "
      "4e11\nscale_out_bandwidth = 5e10\n";
  EXPECT_NO_THROW(parse_hardware(ok, "gpu.toml"));
  expect_error("peak_bf16_flops = 1e15\n", "gpu.toml:1:1: missing 'hbm_bandwidth'");
  expect_error(ok + "hbm_bandwith = 1\n",
               "gpu.toml:5:1: unknown key 'hbm_bandwith' (did you mean 'hbm_bandwidth'?)");
  expect_error(
      "peak_bf16_flops = -1\nhbm_bandwidth = 3e12\nintra_node_bandwidth = "
      "4e11\nscale_out_bandwidth = 5e10\n",
      "gpu.toml:1:19: peak_bf16_flops must be in (0");
  expect_error(ok + "[efficiency]\ncompute = 1.5\n",
               "gpu.toml:6:11: efficiency.compute must be in (0, 1]");
  expect_error(ok + "link_latency = \"fast\"\n", "link_latency must be a number");
  expect_error(ok + "kernel_floor = -1e-6\n", "gpu.toml:5:16: kernel_floor must be in [0, 1]");
  EXPECT_DOUBLE_EQ(parse_hardware(ok + "kernel_floor = 2e-6\n", "gpu.toml").kernel_floor, 2e-6);
  expect_error("peak_bf16_flops = = 1\n", "gpu.toml:1:19: TOML syntax error");
  try {
    load_hardware("h1000");
    ADD_FAILURE();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("did you mean 'h100'"), std::string::npos)
        << error.what();
  }
}

// Every field of a preset, for comparing two.
std::vector<std::string> preset_fields(const Hardware& h) {
  auto exact = [](double v) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  return {h.name,
          h.source,
          exact(h.peak_flops),
          exact(h.hbm_bandwidth),
          exact(h.intra_node_bandwidth),
          exact(h.scale_out_bandwidth),
          exact(h.link_latency),
          exact(h.kernel_floor),
          std::to_string(h.gpus_per_node),
          exact(h.memory_bytes),
          exact(h.compute_efficiency),
          exact(h.memory_efficiency),
          exact(h.link_efficiency)};
}

TEST(Hardware, AWrittenPresetParsesBackToTheSameFigures) {
  Hardware hw;
  hw.name = "this machine \"measured\"";
  hw.source = "attnres calibrate --measure\\ 2026";
  hw.peak_flops = 1.2345678901234567e11;
  hw.hbm_bandwidth = 2.0e10;  // an integer value: written as a float
  hw.intra_node_bandwidth = 1.9999999999e10;
  hw.scale_out_bandwidth = 3e9;
  hw.link_latency = 0;
  hw.kernel_floor = 3.1415926535e-6;
  hw.gpus_per_node = 1;
  hw.memory_bytes = 24e9;
  hw.compute_efficiency = 1;
  hw.memory_efficiency = 0.95;
  const std::string text = hardware_to_toml(hw, {"measured on a machine", "two\nlines"});
  EXPECT_EQ(text.rfind("# measured on a machine\n# two\n# lines\n", 0), 0u) << text;
  EXPECT_EQ(preset_fields(parse_hardware(text, "written.toml")), preset_fields(hw)) << text;
  // Every built-in preset survives the round trip too.
  for (const auto& name : hardware_preset_names()) {
    const Hardware preset = load_hardware(name);
    EXPECT_EQ(preset_fields(parse_hardware(hardware_to_toml(preset), name)), preset_fields(preset))
        << name;
  }
}

TEST(TimeModel, RooflineTakesTheSlowerOfComputeAndMemory) {
  Hardware hw;
  hw.peak_flops = 100;
  hw.hbm_bandwidth = 10;
  hw.compute_efficiency = 0.5;
  hw.memory_efficiency = 1.0;
  const OpCost compute_bound = roofline(1000, 10, hw);  // 20 s vs 1 s
  EXPECT_DOUBLE_EQ(compute_bound.seconds, 20.0);
  EXPECT_FALSE(compute_bound.memory_bound);
  const OpCost memory_bound = roofline(10, 1000, hw);  // 0.2 s vs 100 s
  EXPECT_DOUBLE_EQ(memory_bound.seconds, 100.0);
  EXPECT_TRUE(memory_bound.memory_bound);
  EXPECT_DOUBLE_EQ(transfer_seconds(1000, 100, 0.5, 0.5), 0.5 + 20.0);
  EXPECT_DOUBLE_EQ(transfer_seconds(0, 100, 0.5, 0.5), 0.0);
}

CostInputs kimi() {
  CostInputs in;
  in.layers = 27;
  in.block_size = 6;
  in.d_model = 2304;
  in.tokens = 4096;
  return resolve_cost_inputs(in);
}

TEST(TimeModel, ResidualOpMovesTheTable1Bytes) {
  const Hardware hw = load_hardware("h100");
  const CostInputs in = kimi();
  EXPECT_DOUBLE_EQ(residual_io_elements(in, ResidualScheme::standard), 3.0 * 2304);
  EXPECT_DOUBLE_EQ(residual_io_elements(in, ResidualScheme::block_two_phase), (9.0 / 6 + 5) * 2304);
  const OpCost op = residual_cost(in, ResidualScheme::block_two_phase, Phase::prefill, hw);
  EXPECT_DOUBLE_EQ(op.bytes, (9.0 / 6 + 5) * 2304 * 4096 * 2);
  EXPECT_TRUE(op.memory_bound);
  // The roofline's quotient by bandwidth x efficiency, two roundings on each side: 4 u.
  EXPECT_TRUE(test::near_relative(op.seconds, op.bytes / (3.35e12 * 0.8),
                                  test::roundoffs<double>(4), 0.0, "seconds"));
}

TEST(TimeModel, OverheadsAreOrderedAndDecodeIsDominatedByWeights) {
  const Hardware hw = load_hardware("h100");
  const auto prefill = stack_time(kimi(), Phase::prefill, hw);
  const auto decode = stack_time(kimi(), Phase::decode, hw);
  auto at = [](const StackTime& t, ResidualScheme s) {
    return t.overhead_fraction[static_cast<std::size_t>(s)];
  };
  EXPECT_EQ(at(prefill, ResidualScheme::standard), 0.0);
  EXPECT_GT(at(prefill, ResidualScheme::block_two_phase), 0.0);
  EXPECT_LT(at(prefill, ResidualScheme::block_two_phase),
            at(prefill, ResidualScheme::block_one_shot));
  EXPECT_LT(at(prefill, ResidualScheme::full_two_phase), at(prefill, ResidualScheme::full_naive));
  EXPECT_LT(at(decode, ResidualScheme::block_two_phase),
            at(prefill, ResidualScheme::block_two_phase));
  EXPECT_TRUE(decode.mlp.memory_bound);
}

TEST(TimeModel, MoeCountsActiveParametersOnly) {
  const Hardware hw = load_hardware("h100");
  CostInputs in = kimi();
  in.experts = 256;
  in.active = 8;
  in.shared = 1;
  in.expert_ffn = 1024;
  in = resolve_cost_inputs(in);
  const OpCost sparse = mlp_cost(in, true, Phase::prefill, hw);
  // 9 experts' SwiGLU per token, plus the router (2·d·E).
  EXPECT_DOUBLE_EQ(sparse.flops, 4096.0 * (6 * 2304.0 * 1024 * 9 + 2 * 2304.0 * 256));
  in.batch = 1;
  const OpCost decode = mlp_cost(in, true, Phase::decode, hw);  // one token touches 8 + 1 experts
  EXPECT_DOUBLE_EQ(decode.bytes, 9 * 3.0 * 2304 * 1024 * 2 + 2304.0 * 256 * 2 + 2.0 * 2304 * 2);
}

}  // namespace test_time_model
}  // namespace attnres
