#include "views.hpp"

#include <QCoreApplication>

#include "training_view.hpp"
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

std::vector<View*> make_views(const ViewHost& host, QWidget* parent) {
  std::vector<View*> views = {make_cost_view(host),       make_depth_attention_view(host),
                              make_magnitudes_view(host), make_pipeline_view(host),
                              make_duality_view(host),    make_scaling_view(host),
                              new TrainingView(host)};
  for (View* view : views) view->setParent(parent);
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
