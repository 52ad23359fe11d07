// attnres train: train a tiny model on byte-level text (docs/training.md), writing a checkpoint
// (model, optimizer, state, train_log.csv) at every evaluation, at the end and on Ctrl-C.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/measure.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/output_schema.hpp"
#include "attnres/trainer.hpp"
#include "cli.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "text_table.hpp"

namespace attnres::cli {

namespace fs = std::filesystem;

namespace {

// One training run per --out directory at a time. Two runs into one directory would each commit
// checkpoints over the other's and both report success, one result lost; so a run holds an
// exclusive flock for its whole length and a second run is refused while the first runs.
//
// The lock is not inside the directory: there a file of its own would be foreign to the output
// directory's rules (docs/output-safety.md), and the directory's own flock is output_dir's
// DirectoryLock, taken exclusively by every commit (a lock held on it for the run would block the
// run's own checkpoints). It is a hidden file beside the directory,
// PARENT/.NAME.attnres-train.lock, created for the run and removed at its end. Whoever locks a file
// checks that the path still names it (a run ending removes the file; a run that locked the removed
// file tries again), so at most one run holds the lock of a path. A run killed outright leaves the
// file, which is harmless: an unlocked file is taken over by the next run. When the parent cannot
// be written (no permission, a read-only file system) there is no lock, as the write would fail
// anyway.
class TrainRunLock {
 public:
  explicit TrainRunLock(const fs::path& target) {
    std::error_code error;
    fs::path full = fs::weakly_canonical(fs::absolute(target, error), error);
    if (error || full.filename().empty()) full = fs::absolute(target, error).lexically_normal();
    while (!full.empty() && full.filename().empty() && full != full.root_path())
      full = full.parent_path();
    if (full.filename().empty() || full == full.root_path()) return;
    path_ = full.parent_path() / ("." + full.filename().string() + ".attnres-train.lock");
    for (int attempt = 0; attempt < 100; ++attempt) {
      // Never through a link (a hostile parent could name ~/.bashrc here: the pid is written in).
      const int fd =
          ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
      struct stat opened = {};
      if ((fd < 0 && errno == ELOOP) ||
          (fd >= 0 && (::fstat(fd, &opened) != 0 || !S_ISREG(opened.st_mode)))) {
        if (fd >= 0) ::close(fd);
        const std::string where = printable_text(path_.string());
        path_.clear();
        throw Error(where + ", train's lock for --out " + printable_text(target.string()) +
                    ", is a symbolic link or not a plain file; attnres never writes through one: "
                    "remove it");
      }
      if (fd < 0) {
        path_.clear();  // the parent cannot be written: no lock (see above)
        return;
      }
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int why = errno;
        std::string holder;
        char buffer[32] = {};
        if (::pread(fd, buffer, sizeof buffer - 1, 0) > 0) holder = buffer;
        ::close(fd);
        path_.clear();
        if (why != EWOULDBLOCK) return;
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
          holder.pop_back();
        throw Error("another attnres train" +
                    (holder.empty() ? std::string() : " (pid " + printable_text(holder) + ")") +
                    " is writing " + printable_text(target.string()) +
                    " now; two runs into one --out would overwrite each other's checkpoints: "
                    "wait for it to finish, or give another --out");
      }
      struct stat locked = {};
      struct stat named = {};
      if (::fstat(fd, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 &&
          locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
        fd_ = fd;
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
        return;
      }
      ::close(fd);  // removed by the run that held it: lock the new file
    }
    path_.clear();
  }
  ~TrainRunLock() {
    if (fd_ < 0) return;
    ::unlink(path_.c_str());  // while locked: a run waiting on this file sees it gone, retries
    ::close(fd_);
  }
  TrainRunLock(const TrainRunLock&) = delete;
  TrainRunLock& operator=(const TrainRunLock&) = delete;

 private:
  fs::path path_;
  int fd_ = -1;
};

std::string loss_text(double loss) {
  return std::isnan(loss) ? "-" : format_fixed(loss, 4);
}

// A new run's default precision: bf16 on the fast engine where the CPU has native bf16 units,
// else f32; `note` says why, for the run's first line.
Precision default_precision_of(const EngineOptions& engine, std::string& note) {
  const MatrixUnits units = matrix_units();
  if (engine.engine == EngineKind::reference) {
    note = "the reference engine computes in f32";
    return Precision::f32;
  }
  if (!units.native_bf16) {
    note = "the default here: no native bf16 units (" + units.isa + ")";
    return Precision::f32;
  }
  note = "the default here";
  return Precision::bf16;
}

// The run's precision for its first line: "bf16 products with f32 accumulation
// (avx512_core_bf16; the default here)".
std::string training_precision_text(const EngineOptions& engine, const std::string& note) {
  const MatrixUnits units = matrix_units();
  if (!engine.bf16) return note.empty() ? "f32" : "f32 (" + note + ")";
  std::string text = "bf16 products with f32 accumulation (" + units.isa;
  if (!units.native_bf16) text += ", emulated: no native bf16 units";
  if (!note.empty()) text += "; " + note;
  return text + ")";
}

}  // namespace

int train_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  ModelShapeFlags shape;
  TrainOptions options;
  std::string model_dir, data_path, out_dir, resume_dir, mode_text, engine_text, format,
      precision_text;
  int block_size = 0;
  po::options_description description = command_options("train");
  description.add_options()("model", po::value(&model_dir),
                            "start from this model directory (else give the shape flags below)")(
      "data", po::value(&data_path),
      "a text file: its bytes are the tokens (vocabulary 256); required unless --resume, whose "
      "default is the file the checkpoint records (either is checked against the checkpoint's "
      "FNV-1a fingerprint of the run's data)")(
      "steps", po::value(&options.steps),
      "optimisation steps of the run (required unless --resume)")(
      "seq", po::value(&options.sequence_length),
      "tokens T per sequence (required unless --resume)")(
      "batch", po::value(&options.batch), "sequences B per step (required unless --resume)")(
      "mode", po::value(&mode_text),
      "residual mode: standard | full | block | denseformer | rescaled | mhc "
      "(default: the model's, or standard; docs/schemes.md)")(
      "block-size", po::value(&block_size), "Block AttnRes block size S in sublayers (1..L)")(
      "lr", po::value(&options.lr)->default_value(3e-3), "peak learning rate (after warm-up)")(
      "min-lr-ratio", po::value(&options.min_lr_ratio)->default_value(0.1),
      "the cosine decays to lr x this")("warmup", po::value(&options.warmup)->default_value(-1),
                                        "linear warm-up steps (-1: min(100, steps/10))")(
      "weight-decay", po::value(&options.adamw.weight_decay)->default_value(0.1),
      "AdamW weight decay (matrices only)")("clip", po::value(&options.clip)->default_value(1.0),
                                            "clip the global gradient norm to this (0: off)")(
      "seed", po::value(&options.seed)->default_value(0),
      "seed of the batches and of a shape-flag model's weights")(
      "eval-every", po::value(&options.eval_every)->default_value(0),
      "validate and write a checkpoint every K steps (0: steps/10)")(
      "eval-sequences", po::value(&options.eval_sequences)->default_value(16),
      "validation windows of T tokens")(
      "val-fraction", po::value(&options.validation_fraction)->default_value(0.05),
      "the last part of the file kept for validation")(
      "threads", po::value(&options.engine.threads)->default_value(0),
      (threads_help("CPU threads") + "; results are deterministic for a given thread count")
          .c_str())("engine", po::value(&engine_text)->default_value("fast"),
                    "fast | reference (the readable oracle, slow)")(
      "precision", po::value(&precision_text),
      "bf16 | f32 (bf16: f32 master weights and AdamW state, bf16 matrix products with f32 "
      "accumulation; default: bf16 where the CPU has native bf16 units, else f32; "
      "docs/training.md)")("out", po::value(&out_dir)->required(),
                           "checkpoint directory: new, empty, or written by attnres")(
      "resume", po::value(&resume_dir),
      "continue the run saved in this checkpoint directory (may equal --out)")(
      "force", "replace the contents of an --out directory that holds other files")(
      "format", po::value(&format)->default_value("table"),
      "table | json (json: only the final JSON object)");
  add_model_shape_options(description, shape, /*required=*/false, kByteVocabulary);
  ModelSchemeFlags scheme_flags;
  add_scheme_options(description, scheme_flags);
  po::variables_map values;
  if (parse_or_help(
          args, description, values, out,
          "usage: attnres train (--model DIR | --layers N --d-model D --heads H --ffn F [model "
          "shape flags]) "
          "--data FILE --steps N --seq T --batch B [--mode M] [--block-size S] [scheme flags] "
          "[--lr X] "
          "[--min-lr-ratio R] [--warmup K] [--weight-decay W] [--clip C] [--seed S] [--eval-every "
          "K] "
          "[--eval-sequences K] [--val-fraction F] [--threads N] [--engine fast|reference] "
          "[--precision bf16|f32] --out "
          "DIR [--force] "
          "[--resume DIR] [--format table|json]\n"
          "Trains with AdamW, warm-up + cosine decay and gradient clipping (docs/training.md).\n"
          "attnres train --resume DIR --out DIR continues a checkpoint; --data defaults to the "
          "file\n"
          "it records (checked by fingerprint).")) {
    return kExitOk;
  }
  require_either("--format", format, "table", "json");
  options.engine.engine = parse_flag_value([&] { return parse_engine(engine_text, "--engine"); });
  parse_flag_value([&] {
    check_thread_count(options.engine.threads, "--threads");
    return 0;
  });
  if (given(values, "threads") && options.engine.engine == EngineKind::reference) {
    throw UsageError(
        "--threads sets the threads of the fast engine; --engine reference runs on one thread and "
        "it would change nothing: leave it out or give --engine fast");
  }
  // The precision: the flag's; else a new run's default (below, once the scheme is known); a
  // resumed run keeps its checkpoint's unless the flag is given.
  const bool precision_given = given(values, "precision");
  Precision precision =
      precision_given ? parse_precision_flag(precision_text, /*f64=*/false) : Precision::f32;
  check_precision_flag(options.engine, precision, "--precision");
  const bool resuming = values.count("resume") > 0;
  const bool from_shape = model_shape_given(values);
  if (resuming) {
    for (const char* flag :
         {"model", "mode", "block-size", "seq", "batch", "lr", "min-lr-ratio", "warmup",
          "weight-decay", "clip", "seed", "eval-every", "eval-sequences", "val-fraction"}) {
      if (given(values, flag)) {
        throw UsageError(
            std::string("--") + flag +
            " cannot change a resumed run (its checkpoint keeps the run's "
            "settings); only --steps, --threads, --engine and --precision may be given with "
            "--resume");
      }
    }
    if (from_shape)
      throw UsageError(
          "the model shape flags cannot be given with --resume (the checkpoint has the model)");
    if (scheme_flags_given(values))
      throw UsageError(
          "the scheme flags (--gate, --window, ...) cannot be given with --resume (the "
          "checkpoint's model carries its scheme)");
  } else {
    if (values.count("model") && from_shape) {
      throw UsageError("give either --model DIR or the shape flags (--layers ...), not both");
    }
    if (!values.count("model") && !from_shape) {
      throw UsageError(
          "give the model to train: --model DIR, or the shape flags --layers N --d-model D --heads "
          "H --ffn F");
    }
    for (const char* flag : {"data", "steps", "seq", "batch"}) {
      if (!values.count(flag))
        throw UsageError(std::string("--") + flag + " is required (unless --resume)");
    }
  }
  if (values.count("steps") && options.steps < 1) {
    throw UsageError("--steps must be at least 1, got " + std::to_string(options.steps));
  }

  // The model and the run's mode.
  ModelWeights<double> initial;
  std::string precision_note;  // why a new run's default precision is what it is
  if (!resuming) {
    options.forward.mode = parse_mode_flag(values, mode_text);
    if (from_shape) {
      for (const char* flag : {"layers", "d-model", "heads", "ffn"}) {
        if (!values.count(flag))
          throw UsageError(std::string("--") + flag + " is required with the shape flags");
      }
      finish_model_shape(values, shape);
    }
    if (!options.forward.mode)
      options.forward.mode = from_shape ? ResidualMode::standard : std::optional<ResidualMode>{};
    try {
      options.validate();
    } catch (const Error& error) {
      throw UsageError(error.what());
    }
    initial = from_shape ? ModelWeights<double>{} : load_model(model_dir);
    const ModelConfig& config = from_shape ? shape.config : initial.config;
    apply_block_size_flag(values, mode_text, block_size, config, options.forward);
    const ResidualMode mode = options.forward.mode.value_or(config.attn_res.mode);
    if (scheme_flags_given(values) || !same_tensors(mode, config.attn_res.mode)) {
      if (!from_shape) {
        throw UsageError("scheme flags and --mode " + to_string(mode) +
                         " build a new model: use the shape flags "
                         "(--layers, --d-model, ...) instead of --model, or train a model made by "
                         "attnres init-model "
                         "with that scheme (docs/schemes.md)");
      }
      // The model file carries the scheme (docs/schemes.md).
      shape.config.attn_res.mode = mode;
      shape.config.attn_res.block_size =
          mode == ResidualMode::block ? options.forward.block_size.value_or(0) : 0;
      apply_scheme_flags(values, scheme_flags, shape.config.attn_res);
      validate_scheme(shape.config, shape.config.attn_res);
    }
    if (from_shape) {
      shape.random.seed = options.seed;
      initial = random_model(shape.config, shape.random);
    }
    if (!precision_given) {
      precision = default_precision_of(options.engine, precision_note);
    }
  }
  options.engine = with_precision(options.engine, precision);

  // The output directory is checked before any work.
  OutputDirectoryOptions output;
  output.owner = "train";
  output.force = values.count("force") > 0;
  if (!data_path.empty()) output.inputs.push_back(data_path);
  if (!model_dir.empty()) output.inputs.push_back(model_dir);
  const fs::path target = clean_output_path(out_dir, "--out");
  if (resuming && fs::weakly_canonical(clean_output_path(resume_dir, "--resume")) !=
                      fs::weakly_canonical(target)) {
    output.inputs.push_back(resume_dir);
  }
  // Held until the command returns: a second train into this --out is refused meanwhile.
  const TrainRunLock run_lock(target);
  // What the check did to the directory (an interrupted checkpoint completed, a killed run's
  // staging folder removed) is said at the end, in the summary's "notes" as well.
  std::vector<std::string> notes = check_output_directory(target, output);
  // A resumed run's data (--data, else the file its checkpoint records) is read and checked
  // against the checkpoint's fingerprint before any training and any write.
  std::optional<TextData> resumed_data;
  if (resuming) {
    resumed_data = Trainer::resume_data(clean_output_path(resume_dir, "--resume"), data_path);
  }

  std::unique_ptr<Trainer> trainer;
  if (resuming) {
    const EngineOptions* engine =
        (given(values, "threads") || given(values, "engine")) ? &options.engine : nullptr;
    trainer = Trainer::resume(clean_output_path(resume_dir, "--resume"), std::move(*resumed_data),
                              values.count("steps") ? options.steps : 0, engine,
                              precision_given ? &precision : nullptr);
  } else {
    trainer = std::make_unique<Trainer>(
        initial, load_text_data(data_path, options.validation_fraction, options.sequence_length),
        options);
  }
  const TrainOptions& run = trainer->options();
  const bool table = format == "table";
  auto checkpoint = [&] {
    const OutputDirectoryResult written = write_output_directory(
        target, output, [&](const fs::path& staging) { trainer->write_checkpoint(staging); });
    for (const auto& note : output_directory_notes(written)) notes.push_back(note);
  };
  if (table) {
    out << "training " << to_string(*run.forward.mode)
        << (run.forward.mode == ResidualMode::block
                ? " (S = " + std::to_string(*run.forward.block_size) + ")"
                : "")
        << ": " << parameter_count(trainer->model()) << " parameters, " << run.steps << " steps of "
        << run.batch << " x " << run.sequence_length << " tokens, "
        << training_precision_text(run.engine, precision_note) << ", " << trainer->threads()
        << " thread(s), data " << printable_text(trainer->data().source.string()) << " ("
        << trainer->data().train.size() << " + " << trainer->data().validation.size()
        << " bytes)\n";
    if (trainer->current_step() > 0) out << "resumed at step " << trainer->current_step() << "\n";
    out << "step " << trainer->log().back().step << ": validation loss "
        << loss_text(trainer->log().back().val_loss) << " nats/token\n";
  }

  double train_seconds = 0.0;
  std::int64_t trained_tokens = 0;
  bool interrupted = false;
  {
    ProgressBar progress("train");
    while (!trainer->finished()) {
      const auto start = std::chrono::steady_clock::now();
      try {
        const std::int64_t step_tokens = static_cast<std::int64_t>(run.batch) * run.sequence_length;
        if (!progress.update(static_cast<std::size_t>(trainer->current_step()),
                             static_cast<std::size_t>(run.steps))) {
          throw Cancelled("training cancelled");
        }
        const TrainLogRow& row = trainer->step(progress.callback());
        train_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        trained_tokens += step_tokens;
        if (!std::isnan(row.val_loss)) {
          checkpoint();
          hold_for_tests("ATTNRES_TEST_HOLD_TRAIN");  // tests press Ctrl-C here
          if (table) {
            out << "step " << row.step << "/" << run.steps << ": train "
                << loss_text(row.train_loss) << ", validation " << loss_text(row.val_loss)
                << " nats/token, lr " << format_number(row.lr) << ", |grad| "
                << format_fixed(row.grad_norm, 3) << ", "
                << format_number(std::round(static_cast<double>(trained_tokens) /
                                            std::max(train_seconds, 1e-9)))
                << " tokens/s\n";
          }
        }
      } catch (const Cancelled&) {
        interrupted = true;
        break;
      }
    }
  }
  if (interrupted) {
    checkpoint();  // the last completed step; the abandoned one left no trace
    const std::string message = "interrupted at step " + std::to_string(trainer->current_step()) +
                                "; checkpoint written to " + printable_text(target.string()) +
                                " (continue with --resume " + printable_text(target.string()) + ")";
    if (table) {
      out << message << "\n";
    } else {  // stdout stays JSON; the words go to stderr
      err << "attnres train: " << message << "\n";
      print_json_error(out, "attnres train: " + message, kExitInterrupted, "cancelled");
    }
    return kExitInterrupted;
  }

  double initial_val = std::nan("");
  for (const auto& row : trainer->log()) {
    if (!std::isnan(row.val_loss)) {
      initial_val = row.val_loss;
      break;
    }
  }
  nlohmann::json summary;
  summary["schema"] = schema_tag("train");
  summary["initial_val_loss"] = initial_val;
  summary["final_val_loss"] = trainer->log().back().val_loss;
  summary["final_train_loss"] = trainer->log().back().train_loss;
  summary["steps"] = trainer->current_step();
  summary["tokens"] = trainer->tokens_seen();
  summary["tokens_per_second"] =
      train_seconds > 0.0 ? static_cast<double>(trained_tokens) / train_seconds : 0.0;
  summary["threads"] = trainer->threads();
  summary["precision"] = to_string(f32_weights_precision(run.engine));
  summary["mode"] = to_string(*run.forward.mode);
  if (run.forward.mode == ResidualMode::block) summary["block_size"] = *run.forward.block_size;
  summary["parameters"] = parameter_count(trainer->model());
  summary["peak_resident_bytes"] = peak_resident_bytes();
  summary["out"] = printable_text(target.string());  // valid UTF-8 for JSON, safe on a terminal
  summary["notes"] = nlohmann::json::array();
  for (const auto& note : notes) summary["notes"].push_back(printable_text(note));
  if (table) {
    out << "wrote " << printable_text(target.string())
        << " (config.json, model.safetensors, optimizer.safetensors, " << kTrainStateFile << ", "
        << kTrainLogFile << ")\n";
    for (const auto& note : notes) out << "note: " << printable_text(note) << "\n";
  }
  out << summary.dump(2) << "\n";
  return kExitOk;
}

}  // namespace attnres::cli
