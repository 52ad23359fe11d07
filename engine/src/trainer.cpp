#include "attnres/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward_steps.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/safetensors.hpp"

namespace attnres {

namespace fs = std::filesystem;
using nlohmann::json;

LearningRateSchedule TrainOptions::schedule() const {
  LearningRateSchedule schedule;
  schedule.peak = lr;
  schedule.minimum = lr * min_lr_ratio;
  schedule.warmup = warmup >= 0 ? warmup : std::min<std::int64_t>(100, steps / 10);
  schedule.total = steps;
  return schedule;
}

std::int64_t TrainOptions::evaluation_interval() const {
  return eval_every > 0 ? eval_every : std::max<std::int64_t>(1, steps / 10);
}

void TrainOptions::validate() const {
  auto fail = [](const std::string& what) { throw Error("train: " + what); };
  if (steps < 1) fail("--steps must be at least 1, got " + std::to_string(steps));
  if (sequence_length < 2)
    fail("--seq must be at least 2 tokens (position p predicts token p + 1), got " +
         std::to_string(sequence_length));
  if (batch < 1) fail("--batch must be at least 1, got " + std::to_string(batch));
  if (!(lr > 0.0) || !std::isfinite(lr))
    fail("--lr must be a positive number, got " + format_number(lr));
  if (!(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0))
    fail("--min-lr-ratio must be in [0, 1], got " + format_number(min_lr_ratio));
  if (warmup > steps)
    fail("--warmup " + std::to_string(warmup) + " is longer than --steps " + std::to_string(steps));
  if (static_cast<std::int64_t>(batch) * sequence_length > kMaxTokensPerStep)
    fail("--batch " + std::to_string(batch) + " x --seq " + std::to_string(sequence_length) +
         " = " + std::to_string(static_cast<std::int64_t>(batch) * sequence_length) +
         " tokens per step is more than the " + std::to_string(kMaxTokensPerStep) +
         " this trainer of tiny models takes (docs/training.md)");
  if (warmup < -1) fail("--warmup must be >= 0, got " + std::to_string(warmup));
  check_thread_count(engine.threads, "--threads");  // also a checkpoint's "threads"
  if (!(adamw.beta1 >= 0.0 && adamw.beta1 < 1.0))
    fail("beta1 must be in [0, 1), got " + format_number(adamw.beta1));
  if (!(adamw.beta2 >= 0.0 && adamw.beta2 < 1.0))
    fail("beta2 must be in [0, 1), got " + format_number(adamw.beta2));
  if (!(adamw.eps > 0.0) || !std::isfinite(adamw.eps))
    fail("eps must be a positive number, got " + format_number(adamw.eps));
  if (!(adamw.weight_decay >= 0.0) || !std::isfinite(adamw.weight_decay))
    fail("--weight-decay must be a finite number >= 0, got " + format_number(adamw.weight_decay));
  // 0 turns clipping off; a negative threshold (which clip_scale also read as off) is refused.
  if (!(clip >= 0.0) || !std::isfinite(clip))
    fail("--clip must be a finite number >= 0 (0 = off), got " + format_number(clip));
  if (eval_every < 0) fail("--eval-every must be >= 0 (0 = steps / 10)");
  if (eval_sequences < 1) fail("--eval-sequences must be at least 1");
  if (!(validation_fraction > 0.0 && validation_fraction < 1.0))
    fail("--val-fraction must be between 0 and 1");
}

Trainer::~Trainer() = default;

Trainer::Trainer(const ModelWeights<double>& initial, TextData data, const TrainOptions& options)
    : options_(options), data_(std::move(data)) {
  options_.validate();
  initial.config.require_gradients("train");  // before any work
  ModelWeights<double> start = initial;
  const AttnResConfig scheme =
      resolve_scheme(start.config, options_.forward);  // checks mode / block size
  start.config.attn_res = scheme;
  if (scheme.mode != ResidualMode::block) start.config.attn_res.block_size = 0;
  start.has_attn_res_tensors = scheme.mode != ResidualMode::standard;
  options_.forward.mode = scheme.mode;
  if (scheme.mode == ResidualMode::block) options_.forward.block_size = scheme.block_size;
  model_ = start.cast<float>();
  adam_ = adam_state_for(model_);
  prepare();
  TrainLogRow first;
  first.val_loss = evaluate();
  first.lr = 0.0;
  log_.push_back(first);
}

void Trainer::prepare() {
  if (model_.config.vocab_size < kByteVocabulary) {
    throw Error("train: the model's vocabulary has " + std::to_string(model_.config.vocab_size) +
                " ids; byte-level text needs at least 256 (--vocab 256)");
  }
  if (static_cast<std::size_t>(options_.sequence_length) + 1 > data_.train.size() ||
      static_cast<std::size_t>(options_.sequence_length) + 1 > data_.validation.size()) {
    throw Error("train: " + data_.source.string() + " is too short for --seq " +
                std::to_string(options_.sequence_length));
  }
  engine_ = std::make_unique<GradientEngine<float>>(model_.config, options_.engine);
}

int Trainer::threads() const {
  return engine_->threads();
}

const TrainLogRow& Trainer::step(const Progress& progress) {
  if (finished())
    throw Error("train: the run already finished its " + std::to_string(options_.steps) + " steps");
  const std::int64_t next = step_ + 1;
  const auto batch =
      training_batch(data_, options_.batch, options_.sequence_length, options_.seed, next);
  ForwardOptions forward = options_.forward;
  forward.record_mixing = false;
  forward.progress = progress;
  engine_->compute(model_, batch, forward, gradients_);  // may throw Cancelled: nothing changed yet
  TrainLogRow row;
  row.step = next;
  row.tokens = next * options_.batch * options_.sequence_length;
  row.train_loss = gradients_.loss;
  row.grad_norm = gradient_norm(gradients_.grad);
  row.lr = learning_rate(options_.schedule(), next);
  row.output_rms = gradients_.sublayer_output_rms;
  row.output_grad_rms = gradients_.sublayer_output_grad_rms;
  if (!std::isfinite(row.train_loss) || !std::isfinite(row.grad_norm)) {
    throw Error("train: the loss or the gradient became non-finite at step " +
                std::to_string(next) + " (loss " + format_number(row.train_loss) +
                "); try a smaller --lr");
  }
  adamw_update(model_, gradients_.grad, adam_, next, row.lr,
               clip_scale(row.grad_norm, options_.clip), options_.adamw);
  step_ = next;
  if (next % options_.evaluation_interval() == 0 || next == options_.steps)
    row.val_loss = evaluate();
  log_.push_back(std::move(row));
  return log_.back();
}

double Trainer::evaluate(const Progress& progress) const {
  const auto windows = validation_windows(data_, options_.sequence_length, options_.eval_sequences);
  ForwardEngine<float> engine(model_, options_.engine);
  ForwardOptions forward = options_.forward;
  forward.record_mixing = false;
  forward.progress = progress;
  double sum = 0.0;
  std::int64_t predicted = 0;
  for (const auto& tokens : windows) {
    sum += next_token_cross_entropy_sum(engine.forward(tokens, forward).logits, tokens);
    predicted += static_cast<std::int64_t>(tokens.size()) - 1;
  }
  return sum / static_cast<double>(predicted);
}

ModelWeights<double> Trainer::model() const {
  return model_.cast<double>();
}

ForwardResult<float> Trainer::forward(const std::vector<int>& tokens) const {
  ForwardOptions forward = options_.forward;
  return engine_forward(model_, tokens, forward, options_.engine);
}

// ---- Checkpoints.

namespace {

json options_json(const TrainOptions& o) {
  json j;
  j["steps"] = o.steps;
  j["sequence_length"] = o.sequence_length;
  j["batch"] = o.batch;
  j["lr"] = o.lr;
  j["min_lr_ratio"] = o.min_lr_ratio;
  j["warmup"] = o.warmup;
  j["beta1"] = o.adamw.beta1;
  j["beta2"] = o.adamw.beta2;
  j["eps"] = o.adamw.eps;
  j["weight_decay"] = o.adamw.weight_decay;
  j["clip"] = o.clip;
  j["seed"] = o.seed;
  j["eval_every"] = o.eval_every;
  j["eval_sequences"] = o.eval_sequences;
  j["validation_fraction"] = o.validation_fraction;
  j["engine"] = to_string(o.engine.engine);
  j["threads"] = o.engine.threads;
  j["precision"] = to_string(f32_weights_precision(o.engine));
  j["zero_placeholder"] = o.forward.zero_placeholder;
  return j;
}

TrainOptions options_from_json(const json& j) {
  TrainOptions o;
  o.steps = j.at("steps").get<std::int64_t>();
  o.sequence_length = j.at("sequence_length").get<int>();
  o.batch = j.at("batch").get<int>();
  o.lr = j.at("lr").get<double>();
  o.min_lr_ratio = j.at("min_lr_ratio").get<double>();
  o.warmup = j.at("warmup").get<std::int64_t>();
  o.adamw.beta1 = j.at("beta1").get<double>();
  o.adamw.beta2 = j.at("beta2").get<double>();
  o.adamw.eps = j.at("eps").get<double>();
  o.adamw.weight_decay = j.at("weight_decay").get<double>();
  o.clip = j.at("clip").get<double>();
  o.seed = j.at("seed").get<std::uint64_t>();
  o.eval_every = j.at("eval_every").get<std::int64_t>();
  o.eval_sequences = j.at("eval_sequences").get<int>();
  o.validation_fraction = j.at("validation_fraction").get<double>();
  o.engine.engine = parse_engine(j.at("engine").get<std::string>(), "train_state.json engine");
  o.engine.threads = j.at("threads").get<int>();
  // Checkpoints written before bf16 existed trained in f32.
  const Precision precision =
      parse_precision(j.value("precision", std::string("f32")), "train_state.json precision");
  if (precision == Precision::f64) throw Error("precision f64: training keeps f32 weights");
  o.engine.bf16 = precision == Precision::bf16;
  o.forward.zero_placeholder = j.at("zero_placeholder").get<bool>();
  return o;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(path.string() +
                ": cannot read (is this a checkpoint directory written by attnres train?)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string number_text(double value) {
  if (std::isnan(value)) return "";
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%.9g", value);
  return buffer;
}

}  // namespace

void Trainer::write_checkpoint(const fs::path& directory) const {
  const ModelWeights<double> weights = model();
  save_model(weights, directory);
  std::vector<TensorToWrite> moments;
  auto add = [&](const std::string& prefix, const ModelWeights<float>& tensors) {
    visit_tensors(const_cast<ModelWeights<float>&>(tensors), [&](const TensorRef<float>& t) {
      if (t.attn_res && !model_.has_attn_res_tensors) return;
      moments.push_back({prefix + t.name,
                         t.shape,
                         std::vector<float>(t.data, t.data + t.element_count()),
                         {},
                         false});
    });
  };
  add("exp_avg.", adam_.first);
  add("exp_avg_sq.", adam_.second);
  write_safetensors(directory / kOptimizerFile, moments, {{"format", "attnres-adamw"}});
  json state;
  state["format"] = "attnres-train-state";
  state["version"] = 2;
  state["step"] = step_;
  state["tokens"] = tokens_seen();
  state["options"] = options_json(options_);
  // The data file's absolute path: `train --resume DIR` without --data reads it from here, from
  // whatever directory it is run in.
  state["data"] = {
      {"path", data_.source.empty() ? std::string()
                                    : fs::absolute(data_.source).lexically_normal().string()},
      {"train_bytes", data_.train.size()},
      {"validation_bytes", data_.validation.size()},
      {"fnv1a64", std::to_string(data_.fingerprint)}};
  write_file_atomically(directory / kTrainLogFile, train_log_csv(log_, sublayers()));
  // The state is written last and names its companions: resume refuses a directory whose files
  // are not the ones this state was written with.
  json files = json::object();
  for (const char* name : kCheckpointCompanions)
    files[name] = std::to_string(fnv1a64(read_file(directory / name)));
  state["files"] = files;
  write_file_atomically(directory / kTrainStateFile, state.dump(2) + "\n");
}

namespace {

// What train_state.json holds, read and checked: the state, its version, the run's options and
// step. Errors name the file.
struct TrainState {
  json state;
  int version = 0;
  TrainOptions options;
  std::int64_t step = 0;
};

// The checkpoint's other files, in words ("config.json, model.safetensors, ... and ...").
std::string companion_list() {
  std::string out;
  const std::size_t count = std::size(kCheckpointCompanions);
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0) out += i + 1 == count ? " and " : ", ";
    out += kCheckpointCompanions[i];
  }
  return out;
}

// A state that records no checksums of its companions cannot be checked: refused, never resumed
// unchecked (version 1 skipped the check, so a one-line edit turned it off).
[[noreturn]] void refuse_unchecked_state(const fs::path& state_path, const std::string& why) {
  throw Error(state_path.string() + ": " + why + ", so " + companion_list() +
              " cannot be checked against it; attnres resumes only a checkpoint it can check. "
              "Start a new run from its weights instead: attnres train --model " +
              state_path.parent_path().string() +
              " (the optimizer state and the step count start over)");
}

TrainState read_train_state(const fs::path& state_path) {
  TrainState out;
  if (!fs::exists(state_path)) {
    throw Error(state_path.string() +
                ": cannot read (is this a checkpoint directory written by attnres train?)");
  }
  const std::string state_text = read_document(state_path, "a train_state.json file");
  // Depth-capped, duplicate keys refused (a second "version" or "files" is an error); its errors
  // name the file, line and column.
  out.state = parse_json_document(state_text, state_path.string());
  try {
    if (!out.state.is_object() || out.state.value("format", json()) != "attnres-train-state")
      throw Error("not a training state");
    out.version = out.state.at("version").get<int>();
  } catch (const json::exception& error) {
    throw Error(state_path.string() + ": not a valid training state (" +
                printable_text(error.what()) + ")");
  } catch (const Error& error) {
    throw Error(state_path.string() + ": not a valid training state (" + error.what() + ")");
  }
  if (out.version == 1)
    refuse_unchecked_state(state_path, "version 1 records no checksums of the checkpoint's files");
  try {
    if (out.version != 2)
      throw Error("version " + std::to_string(out.version) + " (this attnres reads version 2)");
    out.options = options_from_json(out.state.at("options"));
    const json& step_json = out.state.at("step");
    if (!step_json.is_number_integer() || step_json.get<std::int64_t>() < 0)
      throw Error("its step " + describe_json(step_json) + " is not a whole number >= 0");
    out.step = step_json.get<std::int64_t>();
  } catch (const json::exception& error) {
    throw Error(state_path.string() + ": not a valid training state (" +
                printable_text(error.what()) + ")");
  } catch (const Error& error) {
    throw Error(state_path.string() + ": not a valid training state (" + error.what() + ")");
  }
  return out;
}

// The data file the state records ("" when none) and its FNV-1a 64 fingerprint (decimal).
std::string recorded_data_path(const json& state) {
  const json data = state.value("data", json::object());
  return data.is_object() ? data.value("path", std::string()) : std::string();
}
std::string recorded_fingerprint(const json& state) {
  const json data = state.value("data", json::object());
  return data.is_object() ? data.value("fnv1a64", std::string()) : std::string();
}

// `data` must be the bytes the run started with: the same FNV-1a 64 fingerprint.
void check_data_fingerprint(const json& state, const fs::path& state_path, const TextData& data) {
  const std::string recorded = recorded_fingerprint(state);
  if (recorded == std::to_string(data.fingerprint)) return;
  const std::string recorded_path = recorded_data_path(state);
  throw Error("train --resume: " + data.source.string() +
              " is not the data this run started with: its FNV-1a 64 fingerprint is " +
              std::to_string(data.fingerprint) + ", " + state_path.string() + " records " +
              (recorded.empty() ? std::string("none") : recorded) +
              (recorded_path.empty() ? std::string() : " (of " + recorded_path + ")") +
              "; resume with the run's own data file");
}

}  // namespace

TextData Trainer::resume_data(const fs::path& directory, const fs::path& data_path) {
  const OutputDirectoryReadLock lock(directory);
  const fs::path state_path = directory / kTrainStateFile;
  const TrainState read = read_train_state(state_path);
  // The run's own split: its validation fraction, and its T for the length check.
  const double fraction = read.options.validation_fraction;
  const int seq = std::max(read.options.sequence_length, 1);
  if (!data_path.empty()) {
    TextData data = load_text_data(data_path, fraction, seq);
    check_data_fingerprint(read.state, state_path, data);
    return data;
  }
  const std::string recorded = recorded_data_path(read.state);
  if (recorded.empty()) {
    throw Error("train --resume: " + state_path.string() +
                " records no data file path: give the run's data with --data FILE");
  }
  TextData data;
  try {
    data = load_text_data(recorded, fraction, seq);
  } catch (const Error& error) {
    throw Error("train --resume: " + state_path.string() + " records the data file " + recorded +
                " (FNV-1a 64 " + recorded_fingerprint(read.state) + "), which cannot be used: " +
                error.what() + "; restore it or give the run's data with --data FILE");
  }
  check_data_fingerprint(read.state, state_path, data);
  return data;
}

std::unique_ptr<Trainer> Trainer::resume(const fs::path& directory, TextData data,
                                         std::int64_t steps, const EngineOptions* engine,
                                         const Precision* precision) {
  // A write of this checkpoint cut short is completed first; none switches files while we read.
  const OutputDirectoryReadLock lock(directory);
  const fs::path state_path = directory / kTrainStateFile;
  TrainState read = read_train_state(state_path);
  const json& state = read.state;
  TrainOptions options = read.options;
  const std::int64_t step = read.step;
  // The companions must be the files this state was written with: a model, an optimizer state
  // or a log of another step or run is refused by name. A state without the checksums is
  // refused: it cannot be checked.
  const auto files = state.find("files");
  if (files == state.end() || !files->is_object())
    refuse_unchecked_state(state_path, "it records no checksums of the checkpoint's files");
  for (const char* name : kCheckpointCompanions) {
    const auto recorded = files->find(name);
    if (recorded == files->end() || !recorded->is_string()) {
      refuse_unchecked_state(state_path,
                             "it records no checksum of " + std::string(name) + " (\"files\")");
    }
    const fs::path path = directory / name;
    if (recorded->get<std::string>() != std::to_string(fnv1a64(read_text(path)))) {
      throw Error("train --resume: " + path.string() +
                  " is not the file this checkpoint was written with (" + kTrainStateFile +
                  " records another checksum for it): the directory mixes files of different "
                  "steps or runs; resume from a complete checkpoint");
    }
  }
  check_data_fingerprint(state, state_path, data);
  if (steps > 0) options.steps = steps;
  if (engine) options.engine = with_precision(*engine, f32_weights_precision(options.engine));
  if (precision) {
    if (*precision == Precision::f64) throw Error("--precision f64: training keeps f32 weights");
    options.engine = with_precision(options.engine, *precision);
  }
  if (step > options.steps) {
    throw Error("train --resume: the checkpoint is at step " + std::to_string(step) +
                ", past --steps " + std::to_string(options.steps));
  }
  std::unique_ptr<Trainer> trainer(new Trainer());
  trainer->options_ = options;
  trainer->options_.validate();
  trainer->data_ = std::move(data);
  const ModelWeights<double> weights = load_model(directory);
  const AttnResConfig scheme = resolve_scheme(weights.config, {});
  trainer->options_.forward.mode = scheme.mode;
  if (scheme.mode == ResidualMode::block) trainer->options_.forward.block_size = scheme.block_size;
  trainer->model_ = weights.cast<float>();
  trainer->adam_ = adam_state_for(trainer->model_);
  const SafetensorsFile moments = SafetensorsFile::read(directory / kOptimizerFile);
  auto load = [&](const std::string& prefix, ModelWeights<float>& tensors) {
    visit_tensors(tensors, [&](const TensorRef<float>& t) {
      if (t.attn_res && !trainer->model_.has_attn_res_tensors) return;
      const TensorInfo* info = moments.find(prefix + t.name);
      if (!info || info->shape != t.shape) {
        throw Error((directory / kOptimizerFile).string() + ": tensor " + prefix + t.name +
                    (info ? " has the wrong shape" : " is missing") +
                    " (the optimizer state does not match the model)");
      }
      const std::vector<double> values = moments.values(*info);
      for (std::size_t i = 0; i < values.size(); ++i) t.data[i] = static_cast<float>(values[i]);
    });
  };
  load("exp_avg.", trainer->adam_.first);
  load("exp_avg_sq.", trainer->adam_.second);
  trainer->step_ = step;
  const fs::path log_path = directory / kTrainLogFile;
  const std::string log_text = read_text(log_path);
  if (!log_text.empty() && log_text.back() != '\n') {
    throw Error("train --resume: " + log_path.string() +
                " is cut short (its last line has no end): the log of an interrupted write");
  }
  trainer->log_ = parse_train_log_csv(log_text, trainer->sublayers(), log_path.string());
  while (!trainer->log_.empty() && trainer->log_.back().step > step) trainer->log_.pop_back();
  if (trainer->log_.empty() || trainer->log_.back().step != step) {
    throw Error("train --resume: " + log_path.string() +
                (trainer->log_.empty()
                     ? " has no rows"
                     : " ends at step " + std::to_string(trainer->log_.back().step)) +
                ", but the checkpoint is at step " + std::to_string(step) +
                " (the log is truncated or belongs to another run)");
  }
  trainer->prepare();
  return trainer;
}

std::string train_log_csv(const std::vector<TrainLogRow>& rows, int sublayers) {
  std::string text = "step,tokens,train_loss,val_loss,lr,grad_norm";
  for (int l = 1; l <= sublayers; ++l) text += ",output_rms_" + std::to_string(l);
  for (int l = 1; l <= sublayers; ++l) text += ",output_grad_rms_" + std::to_string(l);
  text += "\n";
  for (const auto& row : rows) {
    text += std::to_string(row.step) + "," + std::to_string(row.tokens) + "," +
            number_text(row.train_loss) + "," + number_text(row.val_loss) + "," +
            number_text(row.lr) + "," + number_text(row.grad_norm);
    auto cell = [&](const std::vector<double>& values, int l) {
      text += ',';
      if (static_cast<std::size_t>(l) < values.size())
        text += number_text(values[static_cast<std::size_t>(l)]);
    };
    for (int l = 0; l < sublayers; ++l) cell(row.output_rms, l);
    for (int l = 0; l < sublayers; ++l) cell(row.output_grad_rms, l);
    text += "\n";
  }
  return text;
}

std::vector<TrainLogRow> parse_train_log_csv(const std::string& text, int sublayers,
                                             const std::string& source) {
  std::vector<TrainLogRow> rows;
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  const std::size_t columns = 6 + 2 * static_cast<std::size_t>(sublayers);
  while (std::getline(in, line)) {
    ++line_number;
    if (line_number == 1) continue;  // header
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream fields(line);
    while (std::getline(fields, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    if (cells.size() != columns) {
      throw Error(source + ":" + std::to_string(line_number) + ": expected " +
                  std::to_string(columns) + " comma-separated columns, found " +
                  std::to_string(cells.size()));
    }
    auto number = [&](std::size_t i) {
      if (cells[i].empty()) return std::numeric_limits<double>::quiet_NaN();
      try {
        std::size_t used = 0;
        const double value = std::stod(cells[i], &used);
        if (used != cells[i].size()) throw std::invalid_argument("trailing text");
        return value;
      } catch (const std::exception&) {
        throw Error(source + ":" + std::to_string(line_number) + ": column " +
                    std::to_string(i + 1) + " ('" + printable_text(cells[i]) +
                    "') is not a number");
      }
    };
    TrainLogRow row;
    row.step = static_cast<std::int64_t>(number(0));
    row.tokens = static_cast<std::int64_t>(number(1));
    row.train_loss = number(2);
    row.val_loss = number(3);
    row.lr = number(4);
    row.grad_norm = number(5);
    if (row.step > 0) {
      for (int l = 0; l < sublayers; ++l)
        row.output_rms.push_back(number(6 + static_cast<std::size_t>(l)));
      for (int l = 0; l < sublayers; ++l) {
        row.output_grad_rms.push_back(number(6 + static_cast<std::size_t>(sublayers + l)));
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<TrainLogRow> read_train_log(const fs::path& file, int sublayers) {
  const std::string text = read_text(file);
  if (sublayers < 0) {
    const std::string header = text.substr(0, text.find('\n'));
    const auto columns = 1 + std::count(header.begin(), header.end(), ',');
    if (columns < 6 || (columns - 6) % 2 != 0) {
      throw Error(file.string() + ":1: expected the header step,tokens,train_loss,val_loss,lr," +
                  "grad_norm,output_rms_1..L,output_grad_rms_1..L, found " +
                  std::to_string(columns) + " columns");
    }
    sublayers = static_cast<int>((columns - 6) / 2);
  }
  return parse_train_log_csv(text, sublayers, file.string());
}

}  // namespace attnres
