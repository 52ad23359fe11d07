// The history-masking experiment (docs/training.md): how much does a trained AttnRes model rely
// on particular depth sources? Remove the chosen sources from every read (renormalising the
// remaining weights), measure the loss change, and compare with random masks that remove the
// same attention mass — so that "the embedding matters" is told apart from "any 30 % of the mass
// matters".
//
//   auto windows = validation_windows(data, 128, 8);
//   MaskExperiment e = history_mask_experiment(model, windows, parse_mask_selection("embedding",
//   "--drop")); e.delta;        // loss(masked) - loss(unmasked), nats/token e.random_mean;  // the
//   same for random masks of equal mass
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnres/cancel.hpp"
#include "attnres/enum_names.hpp"
#include "attnres/forward.hpp"
#include "attnres/model.hpp"

namespace attnres {

struct MaskSelection {
  enum class Kind { embedding, distant, recent };
  static constexpr EnumNames<Kind, 3> kKindNames{
      {{Kind::embedding, "embedding"}, {Kind::distant, "distant"}, {Kind::recent, "recent"}}};
  Kind kind = Kind::embedding;
  int count = 0;     // distant: keep the K most recent sources; recent: drop the K most recent
  std::string text;  // as written: "embedding", "distant:2", "recent:1"
};

// "embedding" (the embedding source of every read that has another source), "distant:K" (every
// source but the K most recent), "recent:K" (the K most recent sources). Throws attnres::Error
// naming `where` otherwise.
MaskSelection parse_mask_selection(const std::string& text, const std::string& where);

// The mask of `selection` on `layout` (reads with too few sources keep them all).
DepthMask make_depth_mask(const DepthLayout& layout, const MaskSelection& selection);

struct MaskExperiment {
  std::string selection;
  double base_loss = 0.0;  // mean next-token cross-entropy, no mask (nats/token)
  double masked_loss = 0.0;
  double delta = 0.0;                 // masked - base
  int reads_masked = 0;               // reads that lose at least one source
  double mass_removed = 0.0;          // mean over those reads of the token-mean weight removed
  std::vector<double> random_deltas;  // one per random mask removing the same mass per read
  double random_mass_removed = 0.0;   // the random masks' mean removed mass (equal by construction)
  double random_mean = 0.0, random_std = 0.0;
};

// Runs the experiment with the reference forward pass at f64 on `windows` (each >= 2 tokens).
// Throws attnres::Error for a standard-residual model (no depth attention to mask) or when the
// selection removes nothing. progress(done, total forward passes); false cancels.
MaskExperiment history_mask_experiment(const ModelWeights<double>& model,
                                       const std::vector<std::vector<int>>& windows,
                                       const MaskSelection& selection, int random_masks = 8,
                                       std::uint64_t seed = 0, const Progress& progress = {});

}  // namespace attnres
