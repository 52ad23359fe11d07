// Training pieces (docs/training.md): the data file rules, batches, the schedule, one AdamW step
// by hand, determinism, resume = uninterrupted, and a short run that lowers the validation loss.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/trainer.hpp"
#include "model_support.hpp"
#include "training/training_support.hpp"

namespace attnres {
// Named, not anonymous: the suites are unity builds (tests/CMakeLists.txt).
namespace test_training {

namespace fs = std::filesystem;

// The message of what `action` throws ("" when it does not throw attnres::Error).
std::string resume_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

ModelWeights<double> tiny_byte_model(std::uint64_t seed) {
  return random_model(test::model_config(1, 16, 2, 2, 24, 256), {.seed = seed, .weight_std = 0.1});
}

TrainOptions tiny_options(ResidualMode mode) {
  TrainOptions options;
  options.steps = 6;
  options.sequence_length = 16;
  options.batch = 3;
  options.lr = 1e-2;
  options.seed = 11;
  options.eval_every = 3;
  options.eval_sequences = 4;
  options.forward.mode = mode;
  if (mode == ResidualMode::block) options.forward.block_size = 1;
  options.engine.threads = 2;
  return options;
}

TEST(TextData, SplitsBytesIntoTrainingAndValidation) {
  const TextData data = text_data_from_bytes("abcdefghijklmnopqrst", "mem", 0.25, 3);
  ASSERT_EQ(data.train.size(), 15u);
  ASSERT_EQ(data.validation.size(), 5u);
  EXPECT_EQ(data.train.front(), 'a');
  EXPECT_EQ(data.validation.front(), 'p');
  EXPECT_NE(data.fingerprint,
            text_data_from_bytes("abcdefghijklmnopqrsu", "mem", 0.25, 3).fingerprint);
}

TEST(TextData, BadFilesAreClearErrors) {
  auto message = [](const std::string& bytes, int seq) {
    try {
      text_data_from_bytes(bytes, "data.txt", 0.05, seq);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("", 4).find("data.txt: the data file is empty"), std::string::npos);
  EXPECT_NE(message(std::string("abc\0def", 7), 2).find("binary"), std::string::npos);
  EXPECT_NE(message(std::string(100, '\x01'), 2).find("binary"), std::string::npos);
  EXPECT_NE(message(test::sample_text(100), 64).find("each part needs at least 65"),
            std::string::npos);
  test::TempDir dir;
  EXPECT_THROW(load_text_data(dir / "missing.txt", 0.05, 4), Error);
}

// Only regular files are read: a directory, a FIFO (which would block) and a device such as
// /dev/zero (which never ends) are refused at once, naming the path.
TEST(TextData, OnlyRegularFilesAreRead) {
  test::TempDir dir;
  const std::string folder = test::error_message([&] { load_text_data(dir.path(), 0.05, 4); });
  EXPECT_NE(folder.find(dir.path().string() + ": the data file is a directory"), std::string::npos)
      << folder;
  const std::filesystem::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string pipe = test::error_message([&] { load_text_data(fifo, 0.05, 4); });
  EXPECT_NE(pipe.find("pipe: the data file is a FIFO"), std::string::npos) << pipe;
  if (std::filesystem::exists("/dev/zero")) {
    const std::string zero = test::error_message([&] { load_text_data("/dev/zero", 0.05, 4); });
    EXPECT_NE(zero.find("/dev/zero: the data file is a device"), std::string::npos) << zero;
  }
}

// The cap is checked before reading (a sparse file of kMaxTextDataBytes + 1 bytes is refused
// without reading it) and stated in the message.
TEST(TextData, FilesAboveTheCapAreRefusedBeforeReading) {
  test::TempDir dir;
  const std::filesystem::path big = dir / "big.txt";
  { std::ofstream(big) << "x"; }
  std::filesystem::resize_file(big, kMaxTextDataBytes + 1);
  const std::string message = test::error_message([&] { load_text_data(big, 0.05, 4); });
  EXPECT_NE(
      message.find("big.txt: the data file has " + std::to_string(kMaxTextDataBytes + 1) +
                   " bytes; at most " + std::to_string(kMaxTextDataBytes) + " bytes (256 MiB"),
      std::string::npos)
      << message;
}

// The file is read in chunks and checked as they arrive: a NUL is reported with its position in
// the file, across chunk boundaries.
TEST(TextData, ANulIsFoundWhereverItIs) {
  test::TempDir dir;
  std::string text = test::sample_text(3 << 20);
  text[(1 << 20) + 5] = '\0';
  { std::ofstream(dir / "late.txt", std::ios::binary) << text; }
  const std::string message =
      test::error_message([&] { load_text_data(dir / "late.txt", 0.05, 4); });
  EXPECT_NE(message.find("byte " + std::to_string((1 << 20) + 5) + " is NUL"), std::string::npos)
      << message;
}

// Data are held as bytes (one byte of memory per byte of file, not four), and a file read from
// disk gives the same data as the same bytes in memory.
TEST(TextData, IsHeldAsBytesAndMatchesTheBytesInMemory) {
  static_assert(sizeof(decltype(TextData::train)::value_type) == 1);
  static_assert(sizeof(decltype(TextData::validation)::value_type) == 1);
  test::TempDir dir;
  const std::string text = test::sample_text(5000) + "\xc3\xa9\xff";
  { std::ofstream(dir / "text.txt", std::ios::binary) << text; }
  const TextData file = load_text_data(dir / "text.txt", 0.1, 16);
  const TextData memory = text_data_from_bytes(text, "mem", 0.1, 16);
  EXPECT_EQ(file.train, memory.train);
  EXPECT_EQ(file.validation, memory.validation);
  EXPECT_EQ(file.fingerprint, memory.fingerprint);
  EXPECT_EQ(file.fingerprint, fnv1a64(text));
  EXPECT_EQ(file.validation.back(), 0xff);
  const auto batch = training_batch(file, 2, 16, 1, 1);
  ASSERT_EQ(batch.size(), 2u);
  for (const int token : batch[0]) EXPECT_TRUE(token >= 0 && token < kByteVocabulary);
}

TEST(Batches, AreAPureFunctionOfSeedAndStep) {
  const TextData data = text_data_from_bytes(test::sample_text(4000), "mem", 0.1, 32);
  const auto a = training_batch(data, 4, 32, 5, 17);
  EXPECT_EQ(a, training_batch(data, 4, 32, 5, 17));
  EXPECT_NE(a, training_batch(data, 4, 32, 5, 18));
  EXPECT_NE(a, training_batch(data, 4, 32, 6, 17));
  for (const auto& sequence : a) EXPECT_EQ(sequence.size(), 32u);
  const auto windows = validation_windows(data, 32, 100);
  EXPECT_EQ(windows.size(), data.validation.size() / 32);
}

TEST(Schedule, WarmsUpLinearlyThenDecaysByCosine) {
  const LearningRateSchedule schedule{1.0, 0.1, 10, 110};
  EXPECT_DOUBLE_EQ(learning_rate(schedule, 1), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(schedule, 10), 1.0);
  // min + (peak - min) (1 + cos(pi progress)) / 2: ~6 roundings (the difference, the quotient,
  // pi x progress, the cosine, two products, two sums) of terms up to the peak 1.0; 8 u of it.
  const double bound = test::roundoffs<double>(8);
  EXPECT_TRUE(test::near_relative(learning_rate(schedule, 60), 0.55, bound, 1.0,
                                  "halfway: (peak + min) / 2"));
  EXPECT_TRUE(test::near_relative(learning_rate(schedule, 110), 0.1, bound, 1.0, "the end"));
  EXPECT_DOUBLE_EQ(clip_scale(0.5, 1.0), 1.0);
  // 1 / (4 + 1e-6): the guard 1e-6 moves it by 2.5e-7 of it, inside a relative 1e-6.
  EXPECT_TRUE(test::near_relative(clip_scale(4.0, 1.0), 0.25, 1e-6, 0.0, "clip scale"));
  EXPECT_DOUBLE_EQ(clip_scale(4.0, 0.0), 1.0);
}

// One AdamW step worked by hand (PyTorch's formula): at step 1 the bias corrections make the
// update lr * g / (|g| + eps') = lr * sign(g) (up to eps), after the decoupled decay p(1 - lr wd)
// on matrices only.
TEST(AdamW, OneStepByHand) {
  const ModelConfig config = test::model_config(1, 2, 1, 1, 2, 3);
  ModelWeights<double> model = allocate_model<double>(config);
  model.lm_head << 1.0, -2.0, 0.5, 0.0, 3.0, 1.0;
  ModelWeights<double> grad = zero_like(model);
  grad.lm_head << 0.2, -0.4, 0.0, 1.0, 0.0, 0.0;
  grad.norm << 0.5, -0.5;
  AdamState<double> state = adam_state_for(model);
  const AdamWOptions options{0.9, 0.95, 1e-8, 0.1};
  const double lr = 0.01;
  adamw_update(model, grad, state, 1, lr, 0.5, options);
  // g = 0.5 * grad; m = 0.1 g; v = 0.05 g^2; m_hat = g, sqrt(v_hat) = |g|.
  auto expected = [&](double p, double g, bool matrix) {
    const double decayed = matrix ? p * (1 - lr * 0.1) : p;
    const double m = 0.1 * g, v = 0.05 * g * g;
    return decayed - lr / 0.1 * m / (std::sqrt(v) / std::sqrt(0.05) + 1e-8);
  };
  // A parameter: the decay's product and the subtraction, 1 u of |p| each, and the update
  // (~0.01 of |p|) to a few tens of u of itself; the closed form likewise: 8 u of |p|.
  const double bound = test::roundoffs<double>(8);
  auto near = [&](double actual, double want, const char* name) {
    return test::near_relative(actual, want, bound, 0.0, name);
  };
  EXPECT_TRUE(near(model.lm_head(0, 0), expected(1.0, 0.1, true), "lm_head(0, 0)"));
  EXPECT_TRUE(near(model.lm_head(0, 1), expected(-2.0, -0.2, true), "lm_head(0, 1)"));
  EXPECT_TRUE(near(model.lm_head(1, 0), expected(0.5, 0.0, true), "decay only"));
  EXPECT_TRUE(near(model.norm(0), expected(1.0, 0.25, false), "no decay on gains"));
  // The step is lr |g| / (|g| + 1e-8): eps moves it by lr x 1e-8 / 0.25 = 4e-10, inside 1e-9.
  EXPECT_TRUE(test::near_relative(model.norm(0), 1.0 - 0.01, 1e-9, 0.0, "lr x sign(g)"));
  // The moments: (1 - beta) g against 0.1 g and 0.05 g^2. 1 - beta is exact from the rounded
  // beta, whose own rounding (u of 0.9, 0.95) is u beta / (1 - beta) = 9 u, 19 u of 1 - beta;
  // with the products' 2 or 3 u: 16 u and 32 u.
  EXPECT_TRUE(test::near_relative(state.first.lm_head(1, 1), 0.1 * 0.5, test::roundoffs<double>(16),
                                  0.0, "first moment"));
  EXPECT_TRUE(test::near_relative(state.second.lm_head(1, 1), 0.05 * 0.25,
                                  test::roundoffs<double>(32), 0.0, "second moment"));
  // Five squares and four additions of positive terms (~9 u of the sum, halved by the root) on
  // one side, three additions and a root on the other: 8 u.
  EXPECT_TRUE(test::near_relative(gradient_norm(grad), std::sqrt(0.04 + 0.16 + 1.0 + 0.5), bound,
                                  0.0, "gradient norm"));
}

void expect_same_bits(const ModelWeights<float>& a, const ModelWeights<float>& b) {
  std::vector<TensorRef<float>> left, right;
  visit_tensors(const_cast<ModelWeights<float>&>(a),
                [&](const TensorRef<float>& t) { left.push_back(t); });
  visit_tensors(const_cast<ModelWeights<float>&>(b),
                [&](const TensorRef<float>& t) { right.push_back(t); });
  ASSERT_EQ(left.size(), right.size());
  for (std::size_t i = 0; i < left.size(); ++i) {
    EXPECT_EQ(std::memcmp(left[i].data, right[i].data,
                          sizeof(float) * static_cast<std::size_t>(left[i].element_count())),
              0)
        << left[i].name;
  }
}

TEST(Trainer, SameSeedGivesSameBitsAndResumeEqualsUninterrupted) {
  const TextData data = text_data_from_bytes(test::sample_text(6000), "sample.txt", 0.1, 16);
  for (ResidualMode mode : {ResidualMode::standard, ResidualMode::block}) {
    const TrainOptions options = tiny_options(mode);
    Trainer straight(tiny_byte_model(1), data, options);
    while (!straight.finished()) straight.step();
    Trainer again(tiny_byte_model(1), data, options);
    while (!again.finished()) again.step();
    expect_same_bits(straight.model_f32(), again.model_f32());

    Trainer first_half(tiny_byte_model(1), data, options);
    for (int i = 0; i < 3; ++i) first_half.step();
    test::TempDir dir;
    first_half.write_checkpoint(dir.path());
    auto resumed = Trainer::resume(dir.path(), data);
    EXPECT_EQ(resumed->current_step(), 3);
    while (!resumed->finished()) resumed->step();
    expect_same_bits(straight.model_f32(), resumed->model_f32());
    ASSERT_EQ(resumed->log().size(), straight.log().size());
    EXPECT_EQ(train_log_csv(resumed->log(), 2), train_log_csv(straight.log(), 2));
  }
}

TEST(Trainer, ThirtyStepsLowerTheValidationLoss) {
  const TextData data = text_data_from_bytes(test::sample_text(20000), "sample.txt", 0.1, 32);
  TrainOptions options = tiny_options(ResidualMode::full);
  options.steps = 30;
  options.sequence_length = 32;
  options.batch = 4;
  options.eval_every = 30;
  Trainer trainer(tiny_byte_model(3), data, options);
  const double initial = trainer.log().front().val_loss;
  EXPECT_NEAR(initial, std::log(256.0), 0.3);  // near-uniform predictions at the start
  while (!trainer.finished()) trainer.step();
  const double final_loss = trainer.log().back().val_loss;
  EXPECT_LT(final_loss, initial - 1.0) << "initial " << initial << ", final " << final_loss;
  for (const auto& row : trainer.log()) {
    if (row.step > 0) {
      EXPECT_EQ(row.output_rms.size(), 2u);
      EXPECT_GT(row.grad_norm, 0.0);
    }
  }
}

// bf16 products (docs/training.md "Precision"): the same 30 steps lower the validation loss as
// f32's do. At this size (d = 16) a bf16 product's inputs carry 8 significant bits, so the runs
// differ from the first step on; the bf16 run must keep at least 90 % of f32's drop (a run whose
// products were wrong, say unrounded accumulators or a transposed weight, does not learn).
TEST(Trainer, Bf16ProductsLowerTheValidationLossLikeF32) {
  const TextData data = text_data_from_bytes(test::sample_text(20000), "sample.txt", 0.1, 32);
  for (ResidualMode mode : {ResidualMode::standard, ResidualMode::block}) {
    TrainOptions options = tiny_options(mode);
    options.steps = 30;
    options.sequence_length = 32;
    options.batch = 4;
    options.eval_every = 30;
    Trainer f32(tiny_byte_model(3), data, options);
    options.engine.bf16 = true;
    Trainer bf16(tiny_byte_model(3), data, options);
    while (!f32.finished()) f32.step();
    while (!bf16.finished()) bf16.step();
    const double start = f32.log().front().val_loss;
    const double drop_f32 = start - f32.log().back().val_loss;
    const double drop_bf16 = bf16.log().front().val_loss - bf16.log().back().val_loss;
    EXPECT_GT(drop_f32, 1.0);
    EXPECT_GT(drop_bf16, 0.9 * drop_f32)
        << to_string(mode) << ": f32 " << drop_f32 << ", bf16 " << drop_bf16;
    EXPECT_NE(f32.log().back().val_loss, bf16.log().back().val_loss)  // bf16 really ran
        << to_string(mode);
    // The checkpoint records the precision, and a resumed run keeps it.
    test::TempDir dir;
    bf16.write_checkpoint(dir.path());
    const auto state = nlohmann::json::parse(read_file(dir.path() / kTrainStateFile));
    EXPECT_EQ(state["options"]["precision"], "bf16");
    EXPECT_TRUE(Trainer::resume(dir.path(), data)->options().engine.bf16);
    const Precision f32_precision = Precision::f32;
    EXPECT_FALSE(
        Trainer::resume(dir.path(), data, 0, nullptr, &f32_precision)->options().engine.bf16);
  }
}

TEST(Trainer, RejectsBadOptionsAndSmallVocabularies) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  TrainOptions options = tiny_options(ResidualMode::standard);
  options.steps = 0;
  EXPECT_THROW(Trainer(tiny_byte_model(1), data, options), Error);
  // Before: --batch had no bound (a step of 2^20 + tokens is refused before any work).
  options = tiny_options(ResidualMode::standard);
  options.batch = 65537;
  EXPECT_NE(resume_error([&] {
              Trainer(tiny_byte_model(1), data, options);
            }).find("tokens per step is more than the 1048576"),
            std::string::npos);
  options = tiny_options(ResidualMode::standard);
  try {
    Trainer(random_model(test::model_config(1, 16, 2, 2, 24, 100), {}), data, options);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("needs at least 256"), std::string::npos)
        << error.what();
  }
}

TEST(Trainer, ResumeRefusesOtherDataAndCorruptCheckpoints) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  trainer.step();
  test::TempDir dir;
  trainer.write_checkpoint(dir.path());
  const TextData other = text_data_from_bytes(test::sample_text(3001), "other.txt", 0.1, 16);
  EXPECT_THROW(Trainer::resume(dir.path(), other), Error);
  { std::ofstream(dir / "train_state.json") << "{ not json"; }
  try {
    Trainer::resume(dir.path(), data);
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("train_state.json"), std::string::npos)
        << error.what();
  }
}

// train_state.json of `dir` edited by `edit`.
void edit_state(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json state = nlohmann::json::parse(read_file(dir / "train_state.json"));
  edit(state);
  write_file_atomically(dir / "train_state.json", state.dump(2));
}

TEST(Trainer, ResumeRefusesACheckpointWhoseFilesDoNotBelongTogether) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  test::TempDir at1, at2, block;
  trainer.step();
  trainer.write_checkpoint(at1.path());
  trainer.step();
  trainer.write_checkpoint(at2.path());
  // Before: the weights of step 2 beside the state of step 1 resumed silently.
  for (const char* name : {"model.safetensors", "optimizer.safetensors", "train_log.csv"}) {
    test::TempDir mixed;
    fs::copy(at1.path(), mixed.path(),
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    fs::copy_file(at2 / name, mixed / name, fs::copy_options::overwrite_existing);
    const std::string message = resume_error([&] { Trainer::resume(mixed.path(), data); });
    EXPECT_NE(message.find(std::string(name) + " is not the file this checkpoint was written with"),
              std::string::npos)
        << name << ": " << message;
  }
  // A Full AttnRes run's state with a Block model's config.json.
  Trainer other(tiny_byte_model(1), data, tiny_options(ResidualMode::block));
  other.write_checkpoint(block.path());
  test::TempDir mixed;
  fs::copy(at1.path(), mixed.path(),
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy_file(block / "config.json", mixed / "config.json", fs::copy_options::overwrite_existing);
  EXPECT_NE(resume_error([&] {
              Trainer::resume(mixed.path(), data);
            }).find("config.json is not the file"),
            std::string::npos);
  EXPECT_EQ(resume_error([&] { Trainer::resume(at2.path(), data); }), "");
}

TEST(Trainer, ResumeRefusesShortLogsBadStepsAndOptionsWithoutCrashing) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  trainer.step();
  trainer.step();
  test::TempDir dir;
  trainer.write_checkpoint(dir.path());
  // A log whose checksum the state records (an edited state) leaves only the log itself to check:
  // before, an empty, header-only or truncated log crashed `train --resume`.
  const std::string log = read_file(dir / "train_log.csv");
  const std::string header = log.substr(0, log.find('\n') + 1);
  const std::string without_last = log.substr(0, log.rfind('\n', log.size() - 2) + 1);
  for (const auto& [what, text] : std::vector<std::pair<std::string, std::string>>{
           {"empty", ""},
           {"header only", header},
           {"last row lost", without_last},
           {"cut inside a row", log.substr(0, log.size() - 7)}}) {
    write_file_atomically(dir / "train_log.csv", text);
    const std::string checksum = std::to_string(fnv1a64(text));
    edit_state(dir.path(),
               [&](nlohmann::json& state) { state["files"]["train_log.csv"] = checksum; });
    const std::string message = resume_error([&] { Trainer::resume(dir.path(), data); });
    EXPECT_NE(message.find("train_log.csv"), std::string::npos) << what << ": " << message;
    EXPECT_EQ(message.find("is not the file this checkpoint was written with"), std::string::npos)
        << what << ": " << message;
  }
  write_file_atomically(dir / "train_log.csv", log);
  edit_state(dir.path(), [&](nlohmann::json& state) {
    state["files"]["train_log.csv"] = std::to_string(fnv1a64(log));
  });
  EXPECT_EQ(resume_error([&] { Trainer::resume(dir.path(), data); }), "");
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit,
                           const std::string& why) {
    edit_state(dir.path(), edit);
    const std::string message = resume_error([&] { Trainer::resume(dir.path(), data); });
    EXPECT_NE(message.find(why), std::string::npos) << message;
    write_file_atomically(dir / "train_state.json", "");
    trainer.write_checkpoint(dir.path());
  };
  refused([](nlohmann::json& s) { s["step"] = -1; }, "is not a whole number >= 0");
  refused([](nlohmann::json& s) { s["step"] = 10.5; }, "is not a whole number >= 0");
  refused([](nlohmann::json& s) { s["options"]["beta1"] = 2.0; }, "beta1 must be in [0, 1)");
  refused([](nlohmann::json& s) { s["options"]["eps"] = 0.0; }, "eps must be a positive number");
  refused([](nlohmann::json& s) { s["version"] = 7; }, "this attnres reads version 2");
}

TEST(Trainer, ResumeRefusesAStateWithoutChecksums) {
  // "version": 1 skipped the check of the companions' checksums: a one-line edit of
  // train_state.json resumed a model.safetensors of another run unchecked.
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  trainer.step();
  test::TempDir dir;
  trainer.write_checkpoint(dir.path());
  const std::string state = read_file(dir / "train_state.json");
  const std::string what_to_do =
      " cannot be checked against it; attnres resumes only a checkpoint it can check. Start a new "
      "run from its weights instead: attnres train --model " +
      dir.path().string() + " (the optimizer state and the step count start over)";
  const std::string companions =
      ", so config.json, model.safetensors, optimizer.safetensors and train_log.csv";
  for (const auto& [edit, why] :
       std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>>{
           {[](nlohmann::json& s) { s["version"] = 1; },
            "version 1 records no checksums of the checkpoint's files"},
           {[](nlohmann::json& s) { s.erase("files"); },
            "it records no checksums of the checkpoint's files"},
           {[](nlohmann::json& s) { s["files"] = "none"; },
            "it records no checksums of the checkpoint's files"},
           {[](nlohmann::json& s) { s["files"].erase("model.safetensors"); },
            "it records no checksum of model.safetensors (\"files\")"}}) {
    edit_state(dir.path(), edit);
    EXPECT_EQ(resume_error([&] { Trainer::resume(dir.path(), data); }),
              (dir / "train_state.json").string() + ": " + why + companions + what_to_do);
    write_file_atomically(dir / "train_state.json", state);
  }
  EXPECT_EQ(resume_error([&] { Trainer::resume(dir.path(), data); }), "");
}

TEST(Trainer, ResumeRefusesADeepOrDuplicatedStateWithoutCrashing) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  trainer.step();
  test::TempDir dir;
  trainer.write_checkpoint(dir.path());
  const std::string state = read_file(dir / "train_state.json");
  // 100,000 nested arrays in the state: a stack overflow (SIGSEGV) before.
  write_file_atomically(dir / "train_state.json", "{\"step\": " + std::string(100'000, '[') +
                                                      std::string(100'000, ']') + "}");
  EXPECT_EQ(resume_error([&] { Trainer::resume(dir.path(), data); }),
            (dir / "train_state.json").string() +
                ":1:73: JSON nested deeper than 64 levels (refused; real files nest a few)");
  // A second "version" after the first: refused, not the last one taken silently.
  write_file_atomically(dir / "train_state.json",
                        state.substr(0, state.rfind('}')) + ",\n  \"version\": 1\n}\n");
  EXPECT_NE(resume_error([&] {
              Trainer::resume(dir.path(), data);
            }).find("duplicate key 'version' (a key may appear once in an object)"),
            std::string::npos);
}

TEST(Trainer, CancelledStepChangesNothing) {
  const TextData data = text_data_from_bytes(test::sample_text(3000), "sample.txt", 0.1, 16);
  Trainer trainer(tiny_byte_model(1), data, tiny_options(ResidualMode::full));
  const ModelWeights<float> before = trainer.model_f32();
  EXPECT_THROW(trainer.step([](std::size_t, std::size_t) { return false; }), Cancelled);
  EXPECT_EQ(trainer.current_step(), 0);
  expect_same_bits(before, trainer.model_f32());
}

}  // namespace test_training
}  // namespace attnres
