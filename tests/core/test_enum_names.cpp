// The enum-name tables (attnres/enum_names.hpp): every enum's to_string and parse_* read one table,
// so every value round-trips, names are unique, and an unknown name lists the accepted ones.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "attnres/assert.hpp"
#include "attnres/chart_spec.hpp"
#include "attnres/cost.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/format.hpp"
#include "attnres/history_mask.hpp"
#include "attnres/model_config.hpp"
#include "attnres/pipeline.hpp"
#include "attnres/pipeline_sim.hpp"
#include "attnres/quoted_text.hpp"
#include "attnres/safetensors.hpp"
#include "attnres/time_model.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_enum_names {

// Each value and each name once; to_string gives the table's name and parse the value back.
template <typename E, std::size_t N, typename ToString, typename Parse>
void expect_round_trip(const EnumNames<E, N>& table, ToString to_text, Parse parse) {
  std::set<int> values;
  std::set<std::string_view> names;
  for (const auto& [value, name] : table) {
    EXPECT_TRUE(values.insert(static_cast<int>(value)).second) << name;
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(to_text(value), name);
    EXPECT_EQ(enum_name(table, value), name);
    EXPECT_EQ(parse(std::string(name)), value) << name;
  }
  // The values are 0 .. N-1 (the enums are plain enum classes): every value is in the table.
  EXPECT_EQ(values.size(), N);
  EXPECT_EQ(*values.rbegin(), static_cast<int>(N) - 1);
}

// The message of the Error that `parse` throws for `text`.
template <typename Parse>
std::string error_of(Parse parse, const std::string& text) {
  return test::error_message([&] { parse(text); });
}

TEST(EnumNames, EveryValueOfEveryEnumRoundTrips) {
  const std::string where = "--flag";
  expect_round_trip(
      kCachePolicyNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_cache_policy(t, where); });
  expect_round_trip(
      kPipelineScheduleNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_pipeline_schedule(t, where); });
  expect_round_trip(
      kTensorDTypeNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) {
        return parse_enum(kTensorDTypeNames, t, where, "unsupported dtype");
      });
  expect_round_trip(
      kResidualModeNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_residual_mode(t, where); });
  expect_round_trip(
      kDepthGateNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_depth_gate(t, where); });
  expect_round_trip(
      kQuerySourceNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_query_source(t, where); });
  expect_round_trip(
      kDepthMixingNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_depth_mixing(t, where); });
  expect_round_trip(
      kPhaseNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_enum(kPhaseNames, t, where, "unknown phase"); });
  expect_round_trip(
      kResidualSchemeNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_residual_scheme(t, where); });
  expect_round_trip(
      kDTypeNames, [](auto v) { return to_string(v); },
      [&](const std::string& t) { return parse_dtype(t, where); });
  expect_round_trip(
      kGanttCategoryNames, [](auto v) { return enum_name(kGanttCategoryNames, v); },
      [&](const std::string& t) {
        return parse_enum(kGanttCategoryNames, t, where, "unknown category");
      });
  expect_round_trip(
      MaskSelection::kKindNames, [](auto v) { return enum_name(MaskSelection::kKindNames, v); },
      [&](const std::string& t) {
        return parse_mask_selection(t == "embedding" ? t : t + ":1", where).kind;
      });
}

TEST(EnumNames, NamesAreTheOnesFilesAndFlagsUse) {
  EXPECT_EQ(to_string(PipelineSchedule::one_f_one_b), "1f1b");
  EXPECT_EQ(to_string(QuerySource::fixed), "static");
  EXPECT_EQ(to_string(TensorDType::bf16), "BF16");
  EXPECT_EQ(to_string(CachePolicy::cached_own), "cached_own");
}

TEST(EnumNames, UnknownNameListsTheAcceptedOnes) {
  EXPECT_EQ(error_of([](const std::string& t) { return parse_cache_policy(t, "--cache"); }, "lru"),
            "--cache: unknown cache policy 'lru' (expected naive, cached or cached_own)");
  EXPECT_EQ(error_of([](const std::string& t) { return parse_pipeline_schedule(t, "s.toml:3:12"); },
                     "gpipe"),
            "s.toml:3:12: unknown schedule 'gpipe' (expected 1f1b or interleaved)");
  EXPECT_EQ(error_of([](const std::string& t) { return parse_residual_scheme(t, "x"); }, "mhc"),
            "x: unknown residual scheme 'mhc' (expected standard, block_two_phase, block_one_shot, "
            "full_two_phase "
            "or full_naive)");
  EXPECT_EQ(error_of(
                [](const std::string& t) {
                  return parse_enum(kTensorDTypeNames, t, "m.safetensors: w", "unsupported dtype");
                },
                "I8"),
            "m.safetensors: w: unsupported dtype 'I8' (expected F32, F16, BF16 or F64)");
  // A close name is suggested; case matters when parsing but not when suggesting.
  EXPECT_EQ(
      error_of([](const std::string& t) { return parse_dtype(t, "--dtype"); }, "BF16"),
      "--dtype: unknown dtype 'BF16' (did you mean 'bf16'? expected bf16, fp16, fp32 or fp8)");
  EXPECT_EQ(error_of([](const std::string& t) { return parse_depth_gate(t, "--gate"); }, "sigmod"),
            "--gate: unknown gate 'sigmod' (did you mean 'sigmoid'? expected softmax, sigmoid or "
            "sigmoid_normalized)");
  // Control characters are escaped, not echoed raw (printable_text).
  EXPECT_EQ(
      error_of([](const std::string& t) { return parse_depth_mixing(t, "--mixing"); }, "a\x01"),
      "--mixing: unknown mixing 'a\\x01' (expected attention or scalars)");
}

TEST(EnumNames, NameListReadsAsEnglish) {
  EXPECT_EQ(name_list({}), "");
  EXPECT_EQ(name_list({"a"}), "a");
  EXPECT_EQ(name_list({"a", "b"}), "a or b");
  EXPECT_EQ(name_list({"a", "b", "c"}), "a, b or c");
}

TEST(EnumNames, AValueWithoutANameIsAnAssertion) {
  constexpr EnumNames<CachePolicy, 1> partial{{{CachePolicy::naive, "naive"}}};
  EXPECT_EQ(enum_name(partial, CachePolicy::naive), "naive");
  EXPECT_THROW(enum_name(partial, CachePolicy::cached), InternalError);
}

// Issue 42: a 10 MB key or flag is quoted bounded, and no did-you-mean table is built for it.
TEST(QuotedText, LongTextIsCutOnACharacterWithItsSize) {
  EXPECT_EQ(quoted_text("short"), "short");
  EXPECT_EQ(quoted_text("a\x1b[31m"), "a\\x1b[31m");
  const std::string huge(10'000'000, 'k');
  const std::string quoted = quoted_text(huge);
  EXPECT_EQ(quoted, std::string(80, 'k') + "\u2026 (10000000 bytes)");
  // A multi-byte character is never cut in two: 79 ASCII bytes and a 2-byte character.
  const std::string mixed = std::string(79, 'a') + "\xc3\xa9" + std::string(100, 'b');
  EXPECT_EQ(quoted_text(mixed), std::string(79, 'a') + "\u2026 (181 bytes)");
  EXPECT_EQ(did_you_mean(huge, {"sublayers", "blocks"}), "");
  EXPECT_EQ(did_you_mean("sublayer", {"sublayers", "blocks"}), "sublayers");
}

}  // namespace test_enum_names
}  // namespace attnres
