#include "attnres/train_report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "attnres/cost.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/paper_reference.hpp"
#include "report_parts.hpp"
#include "train_statistics.hpp"

namespace attnres {

using nlohmann::json;

namespace {

struct SchemeSpec {
  std::string name;  // as listed: "standard", "full", "full_sigmoid", "block N=2", ...
  std::string
      directory;  // "standard", "full", "block_N2", "full_sigmoid", "block_block_size_4", ...
  AttnResConfig config;  // the scheme (docs/schemes.md)
  int blocks;            // N (Block), L (Full), 0 otherwise
  int block_size;        // S (Block), 1 (Full), 0 otherwise
};

std::vector<SchemeSpec> schemes_of(const ScenarioTraining& t) {
  const int L = t.sublayers();
  std::vector<SchemeSpec> out;
  auto add = [&](const std::string& name, AttnResConfig config) {
    const std::string directory = scheme_file_name(name);
    const int S = config.mode == ResidualMode::block  ? config.block_size
                  : config.mode == ResidualMode::full ? 1
                                                      : 0;
    out.push_back({name, directory, config, S > 0 ? (L + S - 1) / S : 0, S});
  };
  for (const auto& spec : t.schemes) add(spec, t.scheme_of(spec));
  for (int blocks : t.blocks) {
    AttnResConfig block;
    block.mode = ResidualMode::block;
    block.block_size = L / blocks;
    add("block N=" + std::to_string(blocks), block);
    out.back().directory = "block_N" + std::to_string(blocks);
  }
  return out;
}

ModelConfig model_config_of(const ScenarioTraining& t) {
  return t.model_config();
}

// Spearman rank correlation of two equally long lists (average ranks for ties).
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& values) {
    std::vector<double> rank(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      double below = 0, equal = 0;
      for (double other : values) {
        below += other < values[i] ? 1 : 0;
        equal += other == values[i] ? 1 : 0;
      }
      rank[i] = below + (equal + 1) / 2;
    }
    return rank;
  };
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ma += ra[i] / n;
    mb += rb[i] / n;
  }
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : std::nan("");
}

using detail::fixed;
using detail::number_or_null;

using detail::signed_fixed;

double final_val(const TrainingRun& run) {
  for (auto it = run.log.rbegin(); it != run.log.rend(); ++it) {
    if (!std::isnan(it->val_loss)) return it->val_loss;
  }
  return std::nan("");
}

}  // namespace

std::vector<SchemeLosses> scheme_losses(const std::vector<TrainingRun>& runs) {
  std::vector<SchemeLosses> out;
  for (const auto& run : runs) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const SchemeLosses& s) { return s.scheme == run.scheme; });
    if (it == out.end()) {
      out.push_back({run.scheme, run.mode, run.blocks, run.config.paper_defaults(), {}});
      it = std::prev(out.end());
    }
    it->loss_by_seed[run.seed] = final_val(run);
  }
  return out;
}

std::pair<double, double> mean_read_entropy(const ForwardTrace& trace) {
  double entropy = 0.0, uniform = 0.0;
  int reads = 0;
  for (const auto& read : trace.reads) {
    const Eigen::Index n = read.alpha_mean.size();
    if (n < 2) continue;
    double h = 0.0;
    for (Eigen::Index i = 0; i < n; ++i) {
      const double p = read.alpha_mean(i);
      if (p > 0.0) h -= p * std::log(p);
    }
    entropy += h;
    uniform += std::log(static_cast<double>(n));
    ++reads;
  }
  if (reads == 0) return {std::nan(""), std::nan("")};
  return {entropy / reads, uniform / reads};
}

// A progress callback that only asks whether to go on (nested work has its own counts).
Progress check_progress(const Progress& progress) {
  if (!progress) return {};
  return [progress](std::size_t, std::size_t) { return progress(0, 0); };
}

// The precision of every run of the table: train.precision, else bf16 where the CPU has native
// bf16 units (one precision for all the schemes, so they compare).
Precision training_precision(const ScenarioTraining& training) {
  if (!training.precision.empty()) return parse_precision(training.precision, "train.precision");
  return default_training_precision();
}

std::vector<TrainingRun> run_scenario_training(const ScenarioTraining& training,
                                               const Progress& progress, int steps_override) {
  const std::vector<SchemeSpec> schemes = schemes_of(training);
  const ModelConfig config = model_config_of(training);
  config.validate("[train]");
  TrainOptions options;
  options.steps = steps_override > 0 ? steps_override : training.steps;
  options.sequence_length = training.seq;
  options.batch = training.batch;
  options.lr = training.lr;
  options.eval_every = training.eval_every;
  options.engine.threads = training.threads;
  options.engine = with_precision(options.engine, training_precision(training));
  const TextData data =
      load_text_data(training.data_path, options.validation_fraction, training.seq);
  const std::size_t total =
      schemes.size() * training.seeds.size() * static_cast<std::size_t>(options.steps);
  std::size_t done = 0;
  std::vector<TrainingRun> runs;
  for (const auto& scheme : schemes) {
    for (std::uint64_t seed : training.seeds) {
      TrainingRun run;
      run.scheme = scheme.name;
      run.directory =
          scheme.directory + (training.seeds.size() > 1 ? "_seed" + std::to_string(seed) : "");
      run.mode = scheme.config.mode;
      run.config = scheme.config;
      run.blocks = scheme.blocks;
      run.block_size = scheme.block_size;
      run.seed = seed;
      run.precision = f32_weights_precision(options.engine);
      TrainOptions o = options;
      o.seed = seed;
      // The same initial weights for every scheme of a seed: the shared tensors are drawn in the
      // same order, and every depth-mixing tensor starts at its documented value (zero queries,
      // unit gains, ...; docs/schemes.md), so the schemes differ only in how sublayers are mixed.
      ModelConfig scheme_config = config;
      scheme_config.attn_res = scheme.config;
      Trainer trainer(random_model(scheme_config, {.seed = seed}), data, o);
      const Progress step_progress = [&](std::size_t, std::size_t) {
        return !progress || progress(done, total);
      };
      const auto start = std::chrono::steady_clock::now();
      double train_seconds = 0.0;
      while (!trainer.finished()) {
        report_progress(progress, done, total, "training");
        const auto step_start = std::chrono::steady_clock::now();
        trainer.step(step_progress);
        train_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
        ++done;
      }
      run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      run.tokens_per_second =
          train_seconds > 0 ? static_cast<double>(trainer.tokens_seen()) / train_seconds : 0.0;
      run.log = trainer.log();
      const auto windows = validation_windows(data, training.seq, 1);
      run.trace = trainer.forward(windows.front()).trace;
      const bool maskable =
          scheme.config.attention_mode() && scheme.config.heads == 1 &&
          scheme.config.gate != DepthGate::sigmoid;  // weights that sum to 1 (docs/training.md)
      if (!training.masks.empty() && maskable && seed == training.seeds.front()) {
        const ModelWeights<double> model = trainer.model();
        // A quick look (steps_override) also shrinks the masking experiment: 2 windows, 2 random
        // masks.
        const bool quick = steps_override > 0;
        const auto mask_windows = validation_windows(data, training.seq, quick ? 2 : 8);
        const DepthLayout layout = make_depth_layout(scheme.config, config.sublayers());
        for (const auto& mask : training.masks) {
          const DepthMask removed =
              make_depth_mask(layout, parse_mask_selection(mask, "train.masks"));
          const bool removes_any =
              std::any_of(removed.keep.begin(), removed.keep.end(), [](const auto& keep) {
                return std::any_of(keep.begin(), keep.end(), [](double k) { return k < 1.0; });
              });
          if (!removes_any)
            continue;  // e.g. distant:2 with N = 1: no read has more than two sources
          run.masks.push_back(history_mask_experiment(
              model, mask_windows, parse_mask_selection(mask, "train.masks"), quick ? 2 : 8, seed,
              check_progress(progress)));
        }
      }
      if (training.save_models) {
        const ModelWeights<double> model = trainer.model();
        run.model_config_json = model_config_to_json(model.config);
        run.model_safetensors = model_safetensors_bytes(model);
      }
      runs.push_back(std::move(run));
    }
  }
  report_progress(progress, total, total, "training");
  return runs;
}

namespace {

// What every table and chart of the section states: the model, steps, batch, data and seeds.
struct TrainingSetup {
  int L = 0;
  std::int64_t d = 0;
  std::int64_t steps = 0;
  std::string text;  // "2 layers (L = 4 sublayers), d = 64, 200 steps of ..., seeds 1 2 3"
};

TrainingSetup training_setup(const ScenarioTraining& training,
                             const std::vector<TrainingRun>& runs) {
  const ModelConfig config = model_config_of(training);
  TrainingSetup setup;
  setup.L = config.sublayers();
  setup.d = config.hidden_size;
  setup.steps = runs.front().log.back().step;
  setup.text = std::to_string(config.num_hidden_layers) +
               " layers (L = " + std::to_string(setup.L) +
               " sublayers), d = " + std::to_string(setup.d) + ", " + std::to_string(setup.steps) +
               " steps of " + std::to_string(training.batch) + " x " +
               std::to_string(training.seq) + " byte tokens from " + training.data + ", seeds";
  for (auto seed : training.seeds) setup.text += " " + std::to_string(seed);
  setup.text += runs.front().precision == Precision::bf16
                    ? "; bf16 matrix products with f32 accumulation, f32 weights"
                    : "; f32";
  return setup;
}

// The runs of each scheme, the schemes in the order they ran.
struct SchemeGroups {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const TrainingRun*>> by_scheme;
};

SchemeGroups group_runs(const std::vector<TrainingRun>& runs) {
  SchemeGroups groups;
  for (const auto& run : runs) {
    if (!groups.by_scheme.count(run.scheme)) groups.order.push_back(run.scheme);
    groups.by_scheme[run.scheme].push_back(&run);
  }
  return groups;
}

// The train_quality table and what the loss chart and the Table 4 comparison take from it.
struct QualitySection {
  ReportTable table;
  json rows = json::array();
  std::vector<std::pair<int, std::array<double, 3>>> curve;  // N -> mean, min, max (paper defaults)
  double standard_mean = std::nan("");
  // The rows that have a paper Table 4 loss: measured mean, paper loss, seed range, wording.
  std::vector<double> table4_measured, table4_paper, table4_low, table4_high;
  std::vector<std::pair<std::string, std::string>> table4_rows;  // (scheme, the paper's wording)
};

// Costs of the tiny model from the cost engine's one description of each scheme.
SchemeCost tiny_model_cost(const AttnResConfig& config, int L, std::int64_t d) {
  CostInputs sizes;
  sizes.sublayers = L;
  sizes.d_model = d;
  // Block: its own S; every other scheme: Full's best two-phase schedule block (docs/math.md
  // §3.1).
  sizes.block_size = config.mode == ResidualMode::block ? config.block_size
                                                        : best_full_schedule_block(L, d).block_size;
  if (config.mode == ResidualMode::mhc) sizes.streams = config.streams;
  return scheme_cost(config, resolve_cost_inputs(sizes));
}

double paper_table4_loss(const std::string& scheme) {
  double paper_loss = std::nan("");
  for (const auto& row : paper::kTable4) {
    if (scheme == row.scheme) paper_loss = row.loss;
  }
  return paper_loss;
}

// One scheme's row: its final validation loss over seeds, paired by seed with the standard
// residual, the tiny model's costs, the alpha entropy and the paper's Table 4 loss.
void add_quality_row(const TrainingSetup& setup, const std::string& scheme,
                     const std::vector<const TrainingRun*>& group,
                     const PairedComparison* vs_standard, QualitySection& q) {
  double sum = 0.0, lowest = INFINITY, highest = -INFINITY, entropy = 0.0, uniform = 0.0;
  for (const TrainingRun* run : group) {
    const double v = final_val(*run);
    sum += v;
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
    const auto [h, u] = mean_read_entropy(run->trace);
    entropy += h;
    uniform += u;
  }
  const double mean = sum / static_cast<double>(group.size());
  const TrainingRun& first = *group.front();
  const double nan = std::nan("");
  const PairedInterval none{0, nan, nan, nan, nan, nan};
  const PairedInterval& paired = vs_standard ? vs_standard->interval : none;
  const double paired_mean = paired.pairs ? paired.mean : nan;
  const std::string verdict = vs_standard ? paired_verdict(*vs_standard) : "";
  const SchemeCost cost = tiny_model_cost(first.config, setup.L, setup.d);
  const std::string io =
      format_number(cost.io.total() / static_cast<double>(setup.d)) + " (" + cost.io_schedule + ")";
  const std::string history = std::to_string(cost.history_vectors);
  std::string ratio = "-";
  if (first.mode == ResidualMode::standard) q.standard_mean = mean;
  // Entropy against uniform only means something for weights that sum to 1.
  const bool normalised =
      first.mode == ResidualMode::rescaled ||
      (first.config.attention_mode() && first.config.gate != DepthGate::sigmoid);
  if (normalised) ratio = fixed(entropy / uniform, 3);
  if (first.config.paper_defaults() && first.mode != ResidualMode::standard) {
    q.curve.push_back({first.blocks, {mean, lowest, highest}});
  }
  const double paper_loss = paper_table4_loss(scheme);
  if (!std::isnan(paper_loss)) {
    q.table4_measured.push_back(mean);
    q.table4_paper.push_back(paper_loss);
    q.table4_low.push_back(lowest);
    q.table4_high.push_back(highest);
    for (const auto& row : paper::kTable4) {
      if (scheme == row.scheme) q.table4_rows.push_back({scheme, row.row});
    }
  }
  add_row(
      q.table,
      {scheme, first.blocks ? json(first.blocks) : json(),
       first.block_size ? json(first.block_size) : json(), mean, lowest, highest,
       static_cast<std::int64_t>(group.size()), number_or_null(paired_mean),
       number_or_null(paired.low), number_or_null(paired.high),
       vs_standard ? json(verdict) : json(), cost.io.total() / static_cast<double>(setup.d),
       cost.io_schedule, cost.history_vectors,
       normalised && first.mode != ResidualMode::standard ? json(entropy / uniform) : json(),
       number_or_null(paper_loss)},
      {"", first.blocks ? "" : "-", first.block_size ? "" : "-", fixed(mean, 4), fixed(lowest, 4),
       fixed(highest, 4), "", std::isnan(paired_mean) ? "-" : signed_fixed(paired_mean, 4),
       format_signed_bound(paired.low, 4), format_signed_bound(paired.high, 4),
       vs_standard ? verdict : "-", format_number(cost.io.total() / static_cast<double>(setup.d)),
       "", history, ratio, fixed(paper_loss, 3)});
  q.rows.push_back(
      {{"scheme", scheme},
       {"spec", cost.spec},
       {"description", first.config.describe()},
       {"mode", to_string(first.mode)},
       {"blocks", first.blocks},
       {"block_size", first.block_size},
       {"val_loss_mean", mean},
       {"val_loss_min", lowest},
       {"val_loss_max", highest},
       {"val_loss_minus_standard_paired", std::isnan(paired_mean) ? json() : json(paired_mean)},
       {"vs_standard_ci_low", number_or_null(paired.low)},
       {"vs_standard_ci_high", number_or_null(paired.high)},
       {"vs_standard_verdict", vs_standard ? json(verdict) : json()},
       {"paper_table4_loss", std::isnan(paper_loss) ? json() : json(paper_loss)},
       {"alpha_entropy", first.mode == ResidualMode::standard
                             ? json()
                             : json(entropy / static_cast<double>(group.size()))},
       {"alpha_uniform_entropy", first.mode == ResidualMode::standard
                                     ? json()
                                     : json(uniform / static_cast<double>(group.size()))}});
}

// ---- Quality against N, beside the tiny model's costs.
QualitySection quality_section(const TrainingSetup& setup, const SchemeGroups& groups,
                               const std::vector<PairedComparison>& comparisons) {
  QualitySection q;
  q.table = typed_table(
      "train_quality", "Measured quality (this tool's training) against the number of blocks N",
      {{"scheme", "scheme", Shown::text},
       {"blocks", "N", Shown::integer},
       {"block_size", "S", Shown::integer},
       {"val_loss_mean", "val loss mean (nats/token)", Shown::number},
       {"val_loss_min", "min", Shown::number},
       {"val_loss_max", "max", Shown::number},
       {"seeds", "seeds", Shown::integer},
       {"val_loss_minus_standard_paired", "vs standard, paired by seed", Shown::number},
       {"vs_standard_ci_low", "95 % interval low", Shown::number},
       {"vs_standard_ci_high", "high", Shown::number},
       {"vs_standard_verdict", "vs standard at 95 %", Shown::text},
       {"io_multiples_of_d", "residual I/O per sublayer (x d)", Shown::number},
       {"io_schedule", "I/O schedule", Shown::text},
       {"history_vectors_per_token", "stored history (vectors/token)", Shown::integer},
       {"alpha_entropy_over_uniform", "alpha entropy / uniform", Shown::number},
       {"paper_table4_loss", "paper Table 4 loss", Shown::number}},
      "train_loss_vs_blocks");
  q.table.note =
      "Measured here: " + setup.text +
      " (docs/training.md). These are tiny models trained for seconds, not the paper's "
      "1.6B-parameter runs: compare the trend, not the values, with the paper's Fig. 6. \"vs "
      "standard\": the mean over seeds of (this scheme's loss - the standard residual's loss "
      "with the same seed), which removes most of the seed-to-seed spread, with its 95 % "
      "interval (Student t for paired differences; resolved when it excludes 0; "
      "docs/training.md#statistics). Entropy: mean over "
      "reads of the entropy of the mean depth-attention row, divided by log(#sources) (1 = "
      "uniform mean).";
  for (const auto& scheme : groups.order) {
    const auto vs_standard =
        std::find_if(comparisons.begin(), comparisons.end(), [&](const PairedComparison& c) {
          return c.scheme == scheme && c.comparison == "vs standard";
        });
    add_quality_row(setup, scheme, groups.by_scheme.at(scheme),
                    vs_standard == comparisons.end() ? nullptr : &*vs_standard, q);
  }
  return q;
}

// Measured validation loss against N: Block AttnRes at each N, Full AttnRes at N = L, the
// standard residual flat.
ChartSpec loss_vs_blocks_chart(const TrainingSetup& setup, const QualitySection& q) {
  ChartSpec chart =
      detail::xy_chart("train_loss_vs_blocks",
                       "Measured validation loss against N (tiny model, mean and seed range)",
                       "blocks N", "validation loss (nats/token)");
  chart.log_x = true;
  chart.caption =
      "Block AttnRes at each N (mean, min and max over seeds); Full AttnRes is N = L and the "
      "standard residual is drawn flat for reference. Measured by this tool: " +
      setup.text + ".";
  ChartSeries mean_series{
      "Block/Full AttnRes, mean over seeds", {}, ChartSeries::Style::line_and_points};
  ChartSeries low{"min over seeds", {}, ChartSeries::Style::scatter};
  ChartSeries high{"max over seeds", {}, ChartSeries::Style::scatter};
  auto curve = q.curve;
  std::sort(curve.begin(), curve.end());
  for (const auto& [n, values] : curve) {
    mean_series.points.push_back({n, values[0]});
    low.points.push_back({n, values[1]});
    high.points.push_back({n, values[2]});
  }
  chart.series = {mean_series, low, high};
  if (!std::isnan(q.standard_mean) && !curve.empty()) {
    chart.series.push_back(
        {"standard residual (mean)",
         {{curve.front().first, q.standard_mean}, {curve.back().first, q.standard_mean}},
         ChartSeries::Style::line});
  }
  if (curve.empty()) {  // only the standard residual: plot it at N = 1 so the chart is not empty
    chart.series = {
        {"standard residual (mean)", {{1, q.standard_mean}}, ChartSeries::Style::scatter}};
  }
  return chart;
}

// Rank 1 = the lowest value.
std::vector<int> ranks_of(const std::vector<double>& values) {
  std::vector<int> rank(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    rank[i] = 1 + static_cast<int>(std::count_if(values.begin(), values.end(),
                                                 [&](double v) { return v < values[i]; }));
  }
  return rank;
}

// The comparison with the paper's Table 4: its chart, the tiny Table 4 and the rank correlation.
struct Table4Section {
  ChartSpec chart;
  ReportTable table;
  json summary;
};

// When at least three rows have a paper value; adds the rank correlation to the quality note.
std::optional<Table4Section> table4_section(const TrainingSetup& setup, QualitySection& q) {
  if (q.table4_measured.size() < 3) return std::nullopt;
  const double rho = rank_correlation(q.table4_measured, q.table4_paper);
  const std::string verdict = rho >= 0.8 ? "the tiny scale reproduces the paper's order closely"
                              : rho >= 0.5
                                  ? "the tiny scale reproduces the paper's order only roughly"
                                  : "the tiny scale does not reproduce the paper's order";
  q.table.note +=
      " Paper column: Table 4 of the paper (its 32-sublayer ablation model; Block rows S = 4, "
      "window W = 8, multi-head H = 16; the baseline row is its standard residual). Spearman rank "
      "correlation between the measured means and the paper's losses over the " +
      std::to_string(q.table4_measured.size()) + " rows that have one: " + fixed(rho, 3) +
      " (1 = the same order, 0 = unrelated): " + verdict +
      ". Every row uses the same learning rate, schedule, data and seeds (no per-row tuning).";
  Table4Section section;
  ChartSpec& chart = section.chart;
  chart = detail::xy_chart("train_table4", "Measured validation loss against the paper's Table 4",
                           "paper's validation loss (Table 4)",
                           "measured validation loss (nats/token)");
  chart.caption =
      "One point per scheme of the table above: the paper's loss across, this tool's tiny-model "
      "loss up (mean, min and max over seeds). The same order would put the points on a rising "
      "curve; Spearman rho = " +
      fixed(rho, 3) + ".";
  ChartSeries means{"measured mean over seeds", {}, ChartSeries::Style::scatter};
  ChartSeries lows{"min over seeds", {}, ChartSeries::Style::scatter};
  ChartSeries highs{"max over seeds", {}, ChartSeries::Style::scatter};
  for (std::size_t i = 0; i < q.table4_measured.size(); ++i) {
    means.points.push_back({q.table4_paper[i], q.table4_measured[i]});
    lows.points.push_back({q.table4_paper[i], q.table4_low[i]});
    highs.points.push_back({q.table4_paper[i], q.table4_high[i]});
  }
  chart.series = {means, lows, highs};
  // The tiny Table 4 itself: each row's measured loss and rank beside the paper's.
  const auto measured_rank = ranks_of(q.table4_measured), paper_rank = ranks_of(q.table4_paper);
  section.table =
      typed_table("train_table4", "A tiny Table 4: measured validation loss beside the paper's",
                  {{"scheme", "scheme", Shown::text},
                   {"paper_row", "paper's row", Shown::text},
                   {"paper_loss", "paper loss", Shown::number},
                   {"paper_rank", "paper rank", Shown::integer},
                   {"val_loss_mean", "measured mean (nats/token)", Shown::number},
                   {"val_loss_min", "seed min", Shown::number},
                   {"val_loss_max", "seed max", Shown::number},
                   {"measured_rank", "measured rank", Shown::integer}},
                  "train_table4");
  section.table.note = "Rank 1 = the lowest loss. Spearman rho = " + fixed(rho, 3) + ": " +
                       verdict + ". Measured: " + setup.text +
                       "; the paper: its 32-sublayer ablation model.";
  for (std::size_t i = 0; i < q.table4_rows.size(); ++i) {
    add_row(section.table,
            {q.table4_rows[i].first, q.table4_rows[i].second, q.table4_paper[i],
             static_cast<std::int64_t>(paper_rank[i]), q.table4_measured[i], q.table4_low[i],
             q.table4_high[i], static_cast<std::int64_t>(measured_rank[i])},
            {"", "", fixed(q.table4_paper[i], 3), "", fixed(q.table4_measured[i], 4),
             fixed(q.table4_low[i], 4), fixed(q.table4_high[i], 4), ""});
  }
  section.summary = {{"rank_correlation", std::isnan(rho) ? json() : json(rho)},
                     {"rows", q.table4_measured.size()}};
  return section;
}

// ---- Every run, with the loss curves: the train_runs table and chart; returns the runs' JSON.
json add_runs_section(const std::vector<TrainingRun>& runs, const SchemeGroups& groups,
                      Report& report) {
  ReportTable run_table = typed_table("train_runs", "Training runs (loss curves)",
                                      {{"scheme", "scheme", Shown::text},
                                       {"seed", "seed", Shown::integer},
                                       {"initial_val_loss", "initial val loss", Shown::number},
                                       {"final_val_loss", "final val loss", Shown::number},
                                       {"final_train_loss", "final train loss", Shown::number},
                                       {"steps", "steps", Shown::integer},
                                       {"tokens_per_second", "tokens/s", Shown::number},
                                       {"seconds", "seconds", Shown::number}},
                                      "train_loss_curves");
  run_table.note =
      "Validation loss of the fixed validation windows at every evaluation; "
      "tokens/s counts training steps only (evaluation excluded).";
  ChartSpec curves =
      detail::xy_chart("train_loss_curves", "Validation loss during training (mean over seeds)",
                       "step", "validation loss (nats/token)");
  curves.caption =
      "Each scheme's validation loss at the evaluation steps, averaged over its seeds.";
  json runs_json = json::array();
  for (const auto& run : runs) {
    add_row(
        run_table,
        {run.scheme, static_cast<std::int64_t>(run.seed), number_or_null(run.log.front().val_loss),
         number_or_null(final_val(run)), number_or_null(run.log.back().train_loss),
         static_cast<std::int64_t>(run.log.back().step), run.tokens_per_second, run.seconds},
        {"", "", fixed(run.log.front().val_loss, 4), fixed(final_val(run), 4),
         fixed(run.log.back().train_loss, 4), "", format_number(std::round(run.tokens_per_second)),
         fixed(run.seconds, 1)});
    json curve_json = json::array();
    for (const auto& row : run.log) {
      if (!std::isnan(row.val_loss))
        curve_json.push_back({{"step", row.step}, {"val_loss", row.val_loss}});
    }
    runs_json.push_back({{"scheme", run.scheme},
                         {"seed", run.seed},
                         {"final_val_loss", final_val(run)},
                         {"tokens_per_second", run.tokens_per_second},
                         {"val_curve", curve_json}});
  }
  for (const auto& scheme : groups.order) {
    std::map<std::int64_t, std::pair<double, int>> at_step;
    for (const TrainingRun* run : groups.by_scheme.at(scheme)) {
      for (const auto& row : run->log) {
        if (std::isnan(row.val_loss)) continue;
        at_step[row.step].first += row.val_loss;
        at_step[row.step].second += 1;
      }
    }
    ChartSeries series{scheme, {}, ChartSeries::Style::line_and_points};
    for (const auto& [step, sum] : at_step)
      series.points.push_back({static_cast<double>(step), sum.first / sum.second});
    curves.series.push_back(std::move(series));
  }
  report.tables.push_back(std::move(run_table));
  report.charts.push_back(std::move(curves));
  return runs_json;
}

// ---- Magnitudes or gradients by depth at the end of training (Fig. 5b/5c): table and chart.
void add_depth_section(const SchemeGroups& groups, int L, const std::string& id,
                       const std::string& title, bool gradient, Report& report) {
  // One column per scheme, keyed by the scheme's name in snake_case with the quantity after it.
  std::vector<TableColumn> columns_of_table{{"sublayer", "sublayer", Shown::integer}};
  const std::string suffix = gradient ? "_output_grad_rms" : "_output_rms";
  ChartSpec chart =
      detail::xy_chart(id, title, "sublayer l", gradient ? "RMS of d loss / d v_l" : "RMS of v_l");
  chart.log_y = gradient;
  chart.caption =
      std::string(gradient ? "Fig. 5c at tiny scale: gradient reaching each sublayer's output"
                           : "Fig. 5b at tiny scale: output magnitude of each sublayer") +
      ", from the last training step's batch, averaged over seeds.";
  std::vector<std::vector<double>> columns;
  for (const auto& scheme : groups.order) {
    const auto& group = groups.by_scheme.at(scheme);
    columns_of_table.push_back({snake_case_key(scheme) + suffix, scheme, Shown::number});
    std::vector<double> mean(static_cast<std::size_t>(L), 0.0);
    for (const TrainingRun* run : group) {
      const auto& values = gradient ? run->log.back().output_grad_rms : run->log.back().output_rms;
      for (int l = 0; l < L && l < static_cast<int>(values.size()); ++l) {
        mean[static_cast<std::size_t>(l)] +=
            values[static_cast<std::size_t>(l)] / static_cast<double>(group.size());
      }
    }
    ChartSeries series{scheme, {}, ChartSeries::Style::line_and_points};
    for (int l = 0; l < L; ++l) series.points.push_back({l + 1, mean[static_cast<std::size_t>(l)]});
    chart.series.push_back(std::move(series));
    columns.push_back(std::move(mean));
  }
  ReportTable table = typed_table(id, title, columns_of_table, id);
  for (int l = 0; l < L; ++l) {
    std::vector<json> row{static_cast<std::int64_t>(l + 1)};
    for (const auto& column : columns) row.emplace_back(column[static_cast<std::size_t>(l)]);
    add_row(table, std::move(row));
  }
  report.tables.push_back(std::move(table));
  report.charts.push_back(std::move(chart));
}

// ---- History masking on the trained AttnRes models: the table (when any mask removed
// something); returns the experiments' JSON.
json add_masks_section(const std::vector<TrainingRun>& runs, Report& report) {
  json masks_json = json::array();
  ReportTable masks = typed_table(
      "train_history_masks",
      "History masking on the trained models: chosen sources against random masks of equal mass",
      {{"scheme", "scheme", Shown::text},
       {"drop", "drop", Shown::text},
       {"reads_masked", "masked reads", Shown::integer},
       {"mass_removed", "mass removed", Shown::number},
       {"loss_delta", "loss change (nats/token)", Shown::number},
       {"random_loss_delta_mean", "random masks: mean loss change", Shown::number},
       {"random_loss_delta_std", "std", Shown::number}});
  masks.note =
      "Each mask removes the named sources from every depth read of the trained model (first seed) "
      "and renormalises the rest; the random masks remove the same mean weight from every masked "
      "read, taken from its sources in a random order (8 masks). A chosen mask that hurts more "
      "than random masks of equal mass marks sources the model relies on beyond their share of the "
      "weight (docs/training.md). A mask that would remove nothing from a scheme (every read too "
      "short) is left out.";
  for (const auto& run : runs) {
    for (const auto& e : run.masks) {
      add_row(masks,
              {run.scheme, e.selection, static_cast<std::int64_t>(e.reads_masked), e.mass_removed,
               e.delta, e.random_mean, e.random_std},
              {"", "", "", fixed(e.mass_removed, 3), signed_fixed(e.delta, 4),
               signed_fixed(e.random_mean, 4), fixed(e.random_std, 4)});
      masks_json.push_back({{"scheme", run.scheme},
                            {"drop", e.selection},
                            {"base_loss", e.base_loss},
                            {"delta", e.delta},
                            {"mass_removed", e.mass_removed},
                            {"random_mean", e.random_mean},
                            {"random_std", e.random_std},
                            {"random_deltas", e.random_deltas}});
    }
  }
  if (!masks.rows.empty()) report.tables.push_back(std::move(masks));
  return masks_json;
}

// With save_models: models/<run>/config.json, model.safetensors and train_log.csv.
void add_model_files(const std::vector<TrainingRun>& runs, int L, Report& report) {
  for (const auto& run : runs) {
    report.files.push_back({"models/" + run.directory + "/config.json", run.model_config_json});
    report.files.push_back(
        {"models/" + run.directory + "/model.safetensors", run.model_safetensors});
    report.files.push_back(
        {"models/" + run.directory + "/train_log.csv", train_log_csv(run.log, L)});
  }
}

}  // namespace

void add_training_section(const ScenarioTraining& training, const std::vector<TrainingRun>& runs,
                          Report& report) {
  if (runs.empty()) return;
  const TrainingSetup setup = training_setup(training, runs);
  const SchemeGroups groups = group_runs(runs);
  const std::vector<SchemeLosses> losses = scheme_losses(runs);
  const std::vector<PairedComparison> comparisons = paired_comparisons(losses);
  QualitySection quality = quality_section(setup, groups, comparisons);
  std::optional<Table4Section> table4 = table4_section(setup, quality);
  const ChartSpec vs_blocks = loss_vs_blocks_chart(setup, quality);
  report.tables.push_back(std::move(quality.table));
  report.charts.push_back(vs_blocks);
  const json paired_json = detail::add_paired_section(setup.text, comparisons, losses, report);
  detail::add_measured_fraction(setup.L, setup.text, losses, report);
  if (table4) {
    report.tables.push_back(std::move(table4->table));
    report.charts.push_back(std::move(table4->chart));
  }
  const json runs_json = add_runs_section(runs, groups, report);
  add_depth_section(groups, setup.L, "train_output_rms",
                    "Output magnitude by depth after training (Fig. 5b, tiny scale)", false,
                    report);
  add_depth_section(groups, setup.L, "train_output_grad_rms",
                    "Output-gradient magnitude by depth after training (Fig. 5c, tiny scale)", true,
                    report);
  const json masks_json = add_masks_section(runs, report);

  report.json["training"] = {{"setup", setup.text},
                             {"data", training.data},
                             {"steps", setup.steps},
                             {"quality", quality.rows},
                             {"runs", runs_json},
                             {"history_masks", masks_json},
                             {"paired_differences", paired_json},
                             {"statistics_method", detail::kStatisticsMethod}};
  if (table4) report.json["training"]["table4"] = table4->summary;
  if (training.save_models) add_model_files(runs, setup.L, report);
}

}  // namespace attnres
