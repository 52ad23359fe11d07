#include "attnres/history_mask.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>

#include "attnres/backward.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward_steps.hpp"

namespace attnres {

MaskSelection parse_mask_selection(const std::string& text, const std::string& where) {
  MaskSelection selection;
  selection.text = text;
  const auto colon = text.find(':');
  const auto kind = find_enum(MaskSelection::kKindNames, std::string_view(text).substr(0, colon));
  if (kind == MaskSelection::Kind::embedding && colon == std::string::npos) return selection;
  if (kind && kind != MaskSelection::Kind::embedding && colon != std::string::npos) {
    const std::string number = text.substr(colon + 1);
    int count = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), count);
    if (error == std::errc() && end == number.data() + number.size() && count >= 1) {
      selection.kind = *kind;
      selection.count = count;
      return selection;
    }
  }
  throw Error(where + ": unknown mask '" + printable_text(text) +
              "' (expected embedding, distant:K (all but the K most recent sources) or recent:K "
              "(the K most "
              "recent sources), K >= 1)");
}

DepthMask make_depth_mask(const DepthLayout& layout, const MaskSelection& selection) {
  DepthMask mask;
  for (const auto& sources : layout.reads) {
    const std::size_t n = sources.size();
    std::vector<double> keep(n, 1.0);
    const auto k = static_cast<std::size_t>(selection.count);
    switch (selection.kind) {
      case MaskSelection::Kind::embedding:
        if (n >= 2) keep[0] = 0.0;  // the embedding is always source 0
        break;
      case MaskSelection::Kind::distant:
        if (n > k) std::fill(keep.begin(), keep.end() - static_cast<std::ptrdiff_t>(k), 0.0);
        break;
      case MaskSelection::Kind::recent:
        if (n > k) std::fill(keep.end() - static_cast<std::ptrdiff_t>(k), keep.end(), 0.0);
        break;
    }
    mask.keep.push_back(std::move(keep));
  }
  return mask;
}

MaskExperiment history_mask_experiment(const ModelWeights<double>& model,
                                       const std::vector<std::vector<int>>& windows,
                                       const MaskSelection& selection, int random_masks,
                                       std::uint64_t seed, const Progress& progress) {
  const DepthLayout layout = resolve_layout(model.config, {});
  if (layout.mode == ResidualMode::standard) {
    throw Error(
        "history masking needs a Full or Block AttnRes model; this model's residual is standard "
        "(no depth "
        "attention to mask)");
  }
  const std::size_t total = static_cast<std::size_t>(2 + std::max(0, random_masks));
  std::size_t done = 0;
  auto loss_with = [&](const DepthMask* mask) {
    report_progress(progress, done++, total, "history masking");
    ForwardOptions options;
    options.mask = mask;
    options.record_mixing = false;
    return batch_loss(model, windows, options);
  };

  // Mean weight of every source of every read over all windows (no mask).
  std::vector<Eigen::VectorXd> mean_alpha(layout.reads.size());
  for (std::size_t r = 0; r < layout.reads.size(); ++r)
    mean_alpha[r] = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(layout.reads[r].size()));
  double base_sum = 0.0;
  std::int64_t predicted = check_training_batch(model.config, windows, "history masking");
  report_progress(progress, done++, total, "history masking");
  for (const auto& tokens : windows) {
    ForwardOptions options;
    options.record_mixing = false;
    const ForwardResult<double> result = forward(model, tokens, options);
    base_sum += next_token_cross_entropy_sum(result.logits, tokens);
    for (const auto& read : result.trace.reads) {
      mean_alpha[static_cast<std::size_t>(read.read)] +=
          read.alpha_mean / static_cast<double>(windows.size());
    }
  }

  MaskExperiment out;
  out.selection = selection.text;
  out.base_loss = base_sum / static_cast<double>(predicted);
  const DepthMask chosen = make_depth_mask(layout, selection);
  std::vector<double> target_mass(layout.reads.size(), 0.0);
  double mass_sum = 0.0;
  for (std::size_t r = 0; r < chosen.keep.size(); ++r) {
    const auto& keep = chosen.keep[r];
    if (std::all_of(keep.begin(), keep.end(), [](double k) { return k == 1.0; })) continue;
    for (std::size_t i = 0; i < keep.size(); ++i)
      target_mass[r] += (1.0 - keep[i]) * mean_alpha[r](static_cast<Eigen::Index>(i));
    mass_sum += target_mass[r];
    ++out.reads_masked;
  }
  if (out.reads_masked == 0) {
    throw Error("history masking: '" + selection.text +
                "' removes no source of any read of this model (every read has "
                "too few sources)");
  }
  out.mass_removed = mass_sum / out.reads_masked;
  out.masked_loss = loss_with(&chosen);
  out.delta = out.masked_loss - out.base_loss;

  // Random masks: every masked read loses exactly the same (token-mean) mass, taken from its
  // sources in a random order — whole sources while they fit, then part of the next one.
  for (int k = 0; k < random_masks; ++k) {
    std::mt19937_64 engine(seed * 1000003ull + static_cast<std::uint64_t>(k));
    DepthMask random;
    for (std::size_t r = 0; r < chosen.keep.size(); ++r) {
      const std::size_t n = chosen.keep[r].size();
      std::vector<double> keep(n, 1.0);
      double needed = target_mass[r];
      std::vector<std::size_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), engine);
      for (std::size_t i : order) {
        if (needed <= 0.0) break;
        const double weight = mean_alpha[r](static_cast<Eigen::Index>(i));
        if (weight <= 0.0) continue;
        const double taken = std::min(weight, needed);
        keep[i] = 1.0 - taken / weight;
        needed -= taken;
      }
      random.keep.push_back(std::move(keep));
    }
    out.random_deltas.push_back(loss_with(&random) - out.base_loss);
  }
  out.random_mass_removed = out.mass_removed;
  if (!out.random_deltas.empty()) {
    const double count = static_cast<double>(out.random_deltas.size());
    for (double delta : out.random_deltas) out.random_mean += delta / count;
    for (double delta : out.random_deltas)
      out.random_std += (delta - out.random_mean) * (delta - out.random_mean) / count;
    out.random_std = std::sqrt(out.random_std);
  }
  return out;
}

}  // namespace attnres
