#include "views.hpp"

#include <QCoreApplication>

#include "explorer_results.hpp"
#include "scaling_state.hpp"
#include "training_state.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace fs = std::filesystem;

fs::path shipped_models_directory() {
  // Set but empty: no shipped models (every model view starts on the random model).
  if (qEnvironmentVariableIsSet("ATTNRES_MODELS_DIR"))
    return fs::path(qgetenv("ATTNRES_MODELS_DIR").toStdString());
  if (QCoreApplication::instance() != nullptr) {
    const fs::path installed = fs::path(QCoreApplication::applicationDirPath().toStdString()) /
                               ".." / "share" / "attnres" / "models";
    std::error_code error;
    if (fs::is_directory(installed, error)) return installed.lexically_normal();
  }
#ifdef ATTNRES_SOURCE_MODELS_DIR
  return fs::path(ATTNRES_SOURCE_MODELS_DIR);
#else
  return {};
#endif
}

std::vector<ShippedModel> available_shipped_models() {
  static const std::pair<const char*, const char*> shipped[] = {
      {"full", "trained: Full AttnRes"},
      {"block_N4", "trained: Block AttnRes N = 4 (S = 2)"},
      {"block_N2", "trained: Block AttnRes N = 2 (S = 4)"},
      {"standard", "trained: standard residual"}};
  std::vector<ShippedModel> models;
  const fs::path root = shipped_models_directory();
  if (root.empty()) return models;
  for (const auto& [name, label] : shipped) {
    const fs::path dir = root / name;
    std::error_code e1, e2;
    if (fs::is_regular_file(dir / "config.json", e1) &&
        fs::is_regular_file(dir / "model.safetensors", e2)) {
      models.push_back({name, label, dir});
    }
  }
  return models;
}

// Each view's factory, defined in its own file (a new view: a line here and a row below).
View* make_cost_view(const ViewHost& host, const ViewEntry& entry);
View* make_depth_attention_view(const ViewHost& host, const ViewEntry& entry);
View* make_magnitudes_view(const ViewHost& host, const ViewEntry& entry);
View* make_pipeline_view(const ViewHost& host, const ViewEntry& entry);
View* make_duality_view(const ViewHost& host, const ViewEntry& entry);
View* make_scaling_view(const ViewHost& host, const ViewEntry& entry);
View* make_training_view(const ViewHost& host, const ViewEntry& entry);

const std::vector<ViewEntry>& view_table() {
  static const char* const kFromAModel =
      "computes from an opened model (--model), not from a scenario";
  static const std::vector<ViewEntry> table = {
      {"cost",
       "Cost",
       "Cost explorer",
       {"Charts", "Strategies", "Layout", "Calibration", "Memory", "Step", "Decision"},
       make_cost_view,
       cost_view_dump,
       ""},
      {"depth-attention",
       "Depth",
       "Depth attention",
       {"the weights of every read", "one read, step by step", "routing statistics"},
       make_depth_attention_view,
       nullptr,
       kFromAModel},
      {"magnitudes",
       "Magnitudes",
       "Magnitudes by depth",
       {},
       make_magnitudes_view,
       nullptr,
       kFromAModel},
      {"pipeline", "Pipeline", "Pipeline schedule", {}, make_pipeline_view, pipeline_view_dump, ""},
      {"duality",
       "Duality",
       "Depth-sequence duality",
       {"2×2: depth and sequence", "ranks and every scheme"},
       make_duality_view,
       nullptr,
       kFromAModel},
      {"scaling", "Scaling", "Scaling law", {}, make_scaling_view, scaling_view_dump, ""},
      {"training", "Training", "Training", {}, make_training_view, training_view_dump, ""}};
  return table;
}

const ViewEntry* find_view_entry(std::string_view name) {
  for (const ViewEntry& entry : view_table())
    if (entry.name == name) return &entry;
  return nullptr;
}

std::string view_names_text() {
  std::string text;
  const auto& table = view_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (i > 0) text += i + 1 == table.size() ? " or " : ", ";
    text += table[i].name;
  }
  return text;
}

std::vector<View*> make_views(const ViewHost& host, QWidget* parent) {
  std::vector<View*> views;
  for (const ViewEntry& entry : view_table()) {
    views.push_back(entry.make(host, entry));
    views.back()->setParent(parent);
  }
  return views;
}

Scenario scenario_from_views(const std::vector<View*>& views) {
  Scenario s;
  s.source = "attnres-lab";
  s.title = "Saved from attnres-lab";
  s.sections = {"io", "history", "prefill", "pipeline", "boundaries", "flops", "scaling"};
  for (View* view : views) view->save_to(s);
  return s;
}

}  // namespace attnres::gui
