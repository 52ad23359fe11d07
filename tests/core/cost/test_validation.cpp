// The validation suite (docs/validation.md): the built-in published runs parse, every expressible
// run is predicted, the errors by regime are pinned so that a change which worsens them fails, and
// a malformed suite file is an error naming its line.
#include <gtest/gtest.h>

#include <set>

#include "attnres/error.hpp"
#include "attnres/validation.hpp"
#include "test_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_validation {

const ValidationSummary& summary_of(const std::vector<ValidationSummary>& all,
                                    const std::string& quantity, const std::string& regime) {
  for (const ValidationSummary& s : all)
    if (s.quantity == quantity && s.regime == regime) return s;
  throw Error("no summary " + quantity + "/" + regime);
}

TEST(Validation, TheBuiltInSuiteHasEnoughIndependentMeasuredRuns) {
  const ValidationSuite suite = builtin_validation_suite();
  std::set<std::string> frameworks;
  int expressible = 0, with_memory = 0;
  for (const ValidationRun& run : suite.runs) {
    frameworks.insert(run.framework);
    if (run.expressible) ++expressible;
    if (run.memory_bytes) ++with_memory;
    EXPECT_FALSE(run.source.empty()) << run.id;
    EXPECT_FALSE(run.measured_text.empty()) << run.id;
  }
  EXPECT_GE(suite.runs.size(), 40u);
  EXPECT_GE(expressible, 25);
  EXPECT_GE(with_memory, 10);
  EXPECT_GE(frameworks.size(), 6u);
}

// The figures as they stand (docs/validation.md), pinned with a little room: a change that makes
// the typical or worst error worse, or turns a run that ran into "does not fit", fails here. They
// are far from the goals (step typical <= x1.10, memory <= x1.15): the closing note of
// issue 44 says which terms are missing.
TEST(Validation, ErrorsByRegimeDoNotGetWorse) {
  const ValidationSuite suite = builtin_validation_suite();
  const std::vector<ValidationResult> results = validate(suite);
  int does_not_fit = 0;
  for (const ValidationResult& r : results) {
    EXPECT_TRUE(r.evaluated || !r.run->expressible) << r.run->id << ": " << r.refused;
    if (r.evaluated && !r.fits) ++does_not_fit;
  }
  const auto summaries = validation_summaries(results);
  const ValidationSummary& step = summary_of(summaries, "step", "all");
  EXPECT_EQ(step.runs, 39);
  EXPECT_LE(step.typical, 1.41);
  EXPECT_LE(step.worst, 3.02);
  EXPECT_GE(step.within_20_percent, 10);
  EXPECT_LE(summary_of(summaries, "step", "megatron-lm").typical, 1.20);
  EXPECT_LE(summary_of(summaries, "step", "a100").typical, 1.19);
  const ValidationSummary& memory = summary_of(summaries, "memory", "all");
  EXPECT_EQ(memory.runs, 11);
  EXPECT_LE(memory.typical, 1.73);
  EXPECT_LE(memory.worst, 2.74);
  EXPECT_LE(does_not_fit, 8);
}

// The error factor and the typical error, worked by hand: ratios 2 and 0.5 are both x2; their
// geometric mean is x2; 1.1 and 1/1.1 give x1.1.
TEST(Validation, ErrorFactorsAreSymmetricAndTypicalIsTheirGeometricMean) {
  EXPECT_EQ(error_factor(2.0), 2.0);
  EXPECT_EQ(error_factor(0.5), 2.0);
  ValidationSuite suite;
  ValidationRun a, b;
  a.id = "a";
  b.id = "b";
  a.framework = b.framework = "x";
  a.hardware_name = b.hardware_name = "h100";
  suite.runs = {a, b};
  std::vector<ValidationResult> results(2);
  results[0].run = &suite.runs[0];
  results[1].run = &suite.runs[1];
  results[0].evaluated = results[1].evaluated = true;
  results[0].step_ratio = 1.1;
  results[1].step_ratio = 1.0 / 1.1;
  const ValidationSummary& s = summary_of(validation_summaries(results), "step", "all");
  EXPECT_TRUE(test::near_relative(s.typical, 1.1, test::roundoffs<double>(8), 0.0, "typical"));
  EXPECT_EQ(s.within_20_percent, 2);
}

TEST(Validation, AMalformedSuiteNamesTheLine) {
  const std::string good =
      "[[run]]\nid = \"r\"\ntitle = \"t\"\nsource = \"s\"\nframework = \"f\"\n"
      "hardware = \"h100\"\nmeasured_text = \"1 s\"\nstep_seconds = 1.0\ngpus = 8\n"
      "[run.model]\nlayers = 2\nd_model = 1024\n[run.parallel]\ntp = 8\n";
  EXPECT_EQ(parse_validation_suite(good, "suite.toml").runs.size(), 1u);
  try {
    parse_validation_suite(good + "colour = 1\n", "suite.toml");
    FAIL() << "an unknown key was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("suite.toml:"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("colour"), std::string::npos) << error.what();
  }
  // 8 GPUs but t·c·D·P = 4: named, not silently rescaled.
  std::string wrong = good;
  wrong.replace(wrong.find("tp = 8"), 6, "tp = 4");
  EXPECT_THROW(parse_validation_suite(wrong, "suite.toml"), Error);
  std::string no_step = good;
  no_step.replace(no_step.find("step_seconds = 1.0\n"), 19, "");
  EXPECT_THROW(parse_validation_suite(no_step, "suite.toml"), Error);
}

}  // namespace test_validation
}  // namespace attnres
