// The model views' snapshot, picked schemes and forward passes (model_state.hpp).
#include "model_state.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnres/cost.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/token_ids.hpp"

namespace attnres::gui {

namespace {

// The key the random model's weights are cached under: its settings.
std::string cache_key(const ModelSnapshot& s) {
  char text[256];
  std::snprintf(text, sizeof text, "random:%d,%d,%d,%d,%d,%d,%s,%llu,%.17g",
                s.config.num_hidden_layers, s.config.hidden_size, s.config.num_attention_heads,
                s.config.num_key_value_heads, s.config.intermediate_size, s.config.vocab_size,
                s.config.attn_res.describe().c_str(),
                static_cast<unsigned long long>(s.random.seed), s.random.query_std);
  return text;
}

// How a view names a residual scheme it runs on the chosen model (describe()): the model's own
// scheme is "trained Full AttnRes"; another scheme on a trained or loaded model's weights says
// whose weights they are; on the random model the scheme's name alone.
std::string scheme_label(const AttnResConfig& scheme, const ModelConfig& model,
                         const std::string& origin) {
  std::string label = scheme.describe();
  if (origin.empty()) return label;
  if (scheme == model.attn_res) return origin + " " + label;
  label += " on the ";
  label += origin;
  label += " ";
  label += model.attn_res.describe();
  label += " model";
  return label;
}

// The sizes named schemes are made for on this model: its L and d, Block's S from the view's
// spin box (a Block model's own S), mHC's m = 4.
CostInputs model_scheme_sizes(const ModelConfig& model, int block_size) {
  CostInputs in;
  in.sublayers = model.sublayers();
  in.d_model = model.hidden_size;
  in.block_size = std::clamp(block_size, 1, std::max(1, model.sublayers()));
  in.streams = 4;
  if (auto problem = try_resolve_cost_inputs(in)) throw Error(problem->message);
  return in;
}

// `pick` (a picker's spec or kOwnScheme) read on `model`.
SchemeOnModel scheme_on_model(const std::string& pick, const char* picker,
                              const ModelWeights<double>& model, const ModelSnapshot& snapshot) {
  SchemeOnModel out;
  if (pick == kOwnScheme) {
    out.scheme = model.config.attn_res;
  } else {
    std::string where = picker;
    where += " '";
    where += pick;
    where += "'";
    try {
      out.scheme = parse_scheme_spec(pick, model_scheme_sizes(model.config, snapshot.block_size));
    } catch (const Error& error) {
      throw Error(where + ": " + error.what());
    }
    ModelConfig config = model.config;
    config.attn_res = out.scheme;
    config.validate(where);  // e.g. heads that do not divide d, S > L
  }
  out.label = scheme_label(out.scheme, model.config, snapshot.origin);
  out.name = out.scheme == model.config.attn_res
                 ? scheme_label(out.scheme, model.config, snapshot.origin)
                 : out.scheme.describe();
  out.model = out.scheme == model.config.attn_res ? model : convert_scheme(model, out.scheme);
  return out;
}

// The one forward engine of the model views (and its thread pool), kept across runs: a run on
// other weights copies them in and re-prepares the engine (ForwardEngine::set_model) instead of
// starting new threads. Runs come from the views' worker threads, one at a time.
class TraceEngine {
 public:
  ForwardTrace trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                     const ForwardOptions& options) {
    const std::lock_guard<std::mutex> lock(mutex_);
    model_ = model;
    if (engine_) {
      engine_->set_model(model_);
    } else {
      engine_ = std::make_unique<ForwardEngine<double>>(model_, EngineOptions{});
    }
    return engine_->forward(tokens, options).trace;
  }

 private:
  std::mutex mutex_;
  ModelWeights<double> model_;
  std::unique_ptr<ForwardEngine<double>> engine_;
};

// Never destroyed: its matrix products hold oneDNN objects whose library state would be gone
// by the time a static's destructor ran at exit (it is still reachable: no leak is reported).
TraceEngine& trace_engine() {
  static TraceEngine* engine = new TraceEngine;
  return *engine;
}

}  // namespace

std::shared_ptr<const ModelWeights<double>> ModelSnapshot::build() const {
  if (opened) {
    if (!opened->weights) std::rethrow_exception(opened->error);
    return opened->weights;
  }
  const std::string key = cache_key(*this);
  if (cache) {
    const std::lock_guard<std::mutex> lock(cache->mutex);
    if (cache->weights && cache->key == key) return cache->weights;
  }
  auto weights = std::make_shared<const ModelWeights<double>>(random_model(config, random));
  if (cache) {
    const std::lock_guard<std::mutex> lock(cache->mutex);
    cache->key = key;
    cache->weights = weights;
  }
  return weights;
}

std::vector<int> ModelSnapshot::token_ids(const ModelConfig& model) const {
  return parse_token_ids(tokens, "tokens", model.vocab_size);  // the CLI's --tokens rules
}

std::shared_ptr<const OpenedModel> read_model_directory(const std::string& dir,
                                                        const Progress& progress) {
  auto opened = std::make_shared<OpenedModel>();
  opened->directory = dir;
  try {
    opened->weights = std::make_shared<const ModelWeights<double>>(
        load_model_as<double>(dir, progress, &opened->checkpoint));
  } catch (const Cancelled&) {
    throw;
  } catch (...) {
    opened->error = std::current_exception();
  }
  return opened;
}

double pseudo_query_rms(const ModelWeights<double>& model) {
  double sum = 0.0;
  std::int64_t count = 0;
  if (model.has_attn_res_tensors) {
    for_each_tensor(model, [&](const TensorView& tensor) {
      if (!tensor.attn_res || !tensor.name.ends_with(".query")) return;
      for (std::int64_t i = 0; i < tensor.element_count(); ++i)
        sum += tensor.data[i] * tensor.data[i];
      count += tensor.element_count();
    });
  }
  return count > 0 ? std::sqrt(sum / static_cast<double>(count)) : 0.0;
}

ForwardTrace scheme_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                          Progress progress, bool mixing) {
  ForwardOptions options;
  options.progress = std::move(progress);
  options.record_mixing = mixing;
  return trace_engine().trace(model, tokens, options);
}

bool picks_use_block_size(const SchemePicks& picks, const ModelConfig& config) {
  if (config.sublayers() < 2) return false;  // S is 1 whatever the field says
  for (const std::string& pick : {picks.scheme, picks.compare}) {
    if (pick == kOwnScheme || pick == kNoScheme) continue;
    try {
      if (parse_scheme_spec(pick, model_scheme_sizes(config, 1)) !=
          parse_scheme_spec(pick, model_scheme_sizes(config, 2)))
        return true;
    } catch (const Error&) {
      // Said by the view's run.
    }
  }
  return false;
}

std::vector<SchemeOnModel> picked_models(const SchemePicks& picks,
                                         const ModelWeights<double>& model,
                                         const ModelSnapshot& snapshot) {
  std::vector<SchemeOnModel> out;
  out.push_back(scheme_on_model(picks.scheme, "scheme", model, snapshot));
  if (picks.comparing())
    out.push_back(scheme_on_model(picks.compare, "compare with", model, snapshot));
  return out;
}

// Step `index` of `count` equal steps of one run (e.g. the second of three forward passes) as
// its part of the run's progress.
Progress step(const Progress& progress, std::size_t index, std::size_t count) {
  if (!progress) return {};
  return [progress, index, count](std::size_t done, std::size_t total) {
    return total == 0 ? progress(0, 0) : progress(index * total + done, count * total);
  };
}

// Only asks whether the run goes on (for nested work whose own counts would confuse the bar).
Progress check_only(const Progress& progress) {
  if (!progress) return {};
  return [progress](std::size_t, std::size_t) { return progress(0, 0); };
}

}  // namespace attnres::gui
