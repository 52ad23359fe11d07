// attnres-lab: the desktop GUI. Also renders one view to a PNG and exits:
//   attnres-lab --view cost|depth-attention|magnitudes|pipeline|duality|scaling|training
//               [--scenario FILE.toml] [--model DIR] --screenshot OUT.png
// The Depth attention, Magnitudes and Duality views open on the shipped trained Full AttnRes model
// (resources/models/; ATTNRES_MODELS_DIR points elsewhere, empty for none) when it is there.
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <iostream>

#include "main_window.hpp"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("attnres-lab");
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "AttnRes Lab: explore, explain and present Attention Residuals.\n"
      "The model views open on the shipped trained models (environment: ATTNRES_MODELS_DIR=DIR to use\n"
      "another models directory, empty for none; else <bin>/../share/attnres/models or the source tree's).");
  parser.addHelpOption();
  const QCommandLineOption view(QStringLiteral("view"), "Open this view: cost, depth-attention, magnitudes, pipeline, duality, scaling, training.", "name");
  const QCommandLineOption scenario(QStringLiteral("scenario"), "Open this scenario file.", "file");
  const QCommandLineOption model(QStringLiteral("model"), "Open this model directory.", "dir");
  const QCommandLineOption screenshot(QStringLiteral("screenshot"), "Render the view at 1400x900 into this PNG and exit.", "png");
  parser.addOptions({view, scenario, model, screenshot});
  parser.process(app);  // unknown options: message and exit status 1

  const bool shot = parser.isSet(screenshot);
  attnres::gui::MainWindow window(shot);
  const std::string name = parser.isSet(view) ? parser.value(view).toStdString() : "cost";
  if (!window.view(name)) {
    std::cerr << "attnres-lab: unknown view '" << name
              << "' (expected cost, depth-attention, magnitudes, pipeline, duality, scaling or training)\n";
    return 2;
  }
  window.recompute_all();
  if (parser.isSet(scenario)) window.open_scenario(parser.value(scenario).toStdString());
  if (parser.isSet(model)) window.open_model(parser.value(model).toStdString());
  window.show_view(name);
  if (shot) {
    window.resize(1400, 900);
    window.show();
    QApplication::processEvents();
    const QString path = parser.value(screenshot);
    if (!window.grab().save(path, "PNG")) {
      std::cerr << "attnres-lab: cannot write screenshot '" << path.toStdString() << "'\n";
      return 1;
    }
    const std::string error = window.error_text();
    if (!error.empty()) std::cerr << "attnres-lab: " << error << "\n";
    return error.empty() ? 0 : 1;
  }
  window.show();
  return QApplication::exec();
}
