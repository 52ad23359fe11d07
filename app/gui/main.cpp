// attnres-lab: the desktop GUI. Also renders one view to a PNG and exits:
//   attnres-lab --view NAME [--scenario FILE.toml] [--model DIR] [--page NAME] [--lesson-step N]
//               [--presentation] [--size WxH] --screenshot OUT.png
// (the names and pages: the view table, views.cpp). Writes the views' states without a window:
//   attnres-lab --scenario FILE.toml --dump-state OUT.json [--view NAME]
// The Depth attention, Magnitudes and Duality views open on the shipped trained Full AttnRes model
// (resources/models/; ATTNRES_MODELS_DIR points elsewhere, empty for none) when it is there.
#include <QApplication>
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QTimer>
#include <iostream>
#include <string>

#include "attnres/version.hpp"
#include "lesson.hpp"
#include "main_window.hpp"
#include "state_dump.hpp"
#include "views.hpp"

int main(int argc, char** argv) {
  // --version needs no display (the application below would want one).
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--version") {
      std::cout << "attnres-lab " << attnres::kVersion << "\n";
      return 0;
    }
  }
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "AttnRes Lab: explore, explain and present Attention Residuals.\n"
      "The model views open on the shipped trained models (environment: ATTNRES_MODELS_DIR=DIR to "
      "use\n"
      "another models directory, empty for none; else <bin>/../share/attnres/models or the source "
      "tree's).");
  parser.addHelpOption();
  const QCommandLineOption view(
      QStringLiteral("view"),
      QString::fromStdString("Open this view: " + attnres::gui::view_names_text() + "."), "name");
  const QCommandLineOption scenario(QStringLiteral("scenario"), "Open this scenario file.", "file");
  const QCommandLineOption model(
      QStringLiteral("model"), "Open this model directory (any layout of docs/interop.md).", "dir");
  const QCommandLineOption page(QStringLiteral("page"),
                                "Show this page (inner tab) of the view, e.g. \"Memory\" of "
                                "cost or \"routing statistics\" of depth-attention.",
                                "name");
  const QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                      "Render the window into this PNG and exit.", "png");
  const QCommandLineOption size(QStringLiteral("size"),
                                "Window size for --screenshot, WxH (default 1400x900).", "WxH");
  const QCommandLineOption lesson_step(QStringLiteral("lesson-step"),
                                       "Go to step N (1 = the first) of the guided lesson.", "N");
  const QCommandLineOption presentation(
      QStringLiteral("presentation"),
      "Start in presentation mode (larger fonts, no input columns).");
  const QCommandLineOption models(
      QStringLiteral("models"),
      "Print the shipped models directory and the models found there, then exit.");
  const QCommandLineOption dump_state(
      QStringLiteral("dump-state"),
      "Write every view's state and headline results for --scenario FILE into this JSON file "
      "(schema attnres-lab.state; no window needed), then exit. With --view: that view's only.",
      "json");
  parser.addOptions({view, scenario, model, page, screenshot, size, lesson_step, presentation,
                     models, dump_state});
  {
    // The informational flags (--help, --models) and unknown options need no display: they are
    // handled under a QCoreApplication, before the QApplication (which wants one) exists.
    QCoreApplication core(argc, argv);
    QCoreApplication::setApplicationName("attnres-lab");
    QCoreApplication::setApplicationVersion(QString::fromLatin1(attnres::kVersion));
    parser.process(core);  // --help: the help, exit status 0; unknown options: exit status 1
    if (parser.isSet(dump_state)) {
      // It opens no window: a flag about the window would silently do nothing.
      for (const QCommandLineOption* unused :
           {&model, &page, &screenshot, &size, &lesson_step, &presentation}) {
        if (parser.isSet(*unused)) {
          std::cerr << "attnres-lab: --" << unused->names().front().toStdString()
                    << ": not used with --dump-state (it takes --scenario and --view only)\n";
          return 2;
        }
      }
      return attnres::gui::dump_state_command(
          parser.value(scenario).toStdString(), parser.isSet(scenario),
          parser.value(dump_state).toStdString(),
          parser.isSet(view) ? parser.value(view).toStdString() : std::string());
    }
    if (parser.isSet(models)) {
      std::cout << "models directory: " << attnres::gui::shipped_models_directory().string()
                << "\n";
      for (const auto& m : attnres::gui::available_shipped_models())
        std::cout << m.name << ": " << m.directory.string() << "\n";
      return 0;
    }
  }
  // Every flag is checked before the application (which wants a display) starts: a typo gets its
  // message, not Qt's abort.
  const std::string name = parser.isSet(view) ? parser.value(view).toStdString() : "cost";
  const attnres::gui::ViewEntry* entry = attnres::gui::find_view_entry(name);
  if (entry == nullptr) {
    std::cerr << "attnres-lab: --view: unknown view '" << name << "' (expected "
              << attnres::gui::view_names_text() << ")\n";
    return 2;
  }
  // --page: one of the view's pages (the view table's row), checked before the window starts.
  int page_index = -1;
  if (parser.isSet(page)) {
    const std::string wanted = parser.value(page).toStdString();
    std::string known;
    for (std::size_t i = 0; i < entry->pages.size(); ++i) {
      if (entry->pages[i] == wanted && page_index < 0) page_index = static_cast<int>(i);
      known += std::string(i ? ", '" : "'") + std::string(entry->pages[i]) + "'";
    }
    if (page_index < 0) {
      std::cerr << "attnres-lab: --page: the " << name << " view has no page '" << wanted << "'"
                << (known.empty() ? " (it has no pages)" : " (its pages: " + known + ")") << "\n";
      return 2;
    }
  }
  int step = 0;  // 1-based; 0: no lesson step
  if (parser.isSet(lesson_step)) {
    bool ok = false;
    step = parser.value(lesson_step).toInt(&ok);
    if (!ok || step < 1 || step > static_cast<int>(attnres::gui::lesson_steps().size())) {
      std::cerr << "attnres-lab: --lesson-step: expected 1 .. "
                << attnres::gui::lesson_steps().size() << ", got '"
                << parser.value(lesson_step).toStdString() << "'\n";
      return 2;
    }
  }
  int width = 1400, height = 900;
  if (parser.isSet(size)) {
    const QStringList parts = parser.value(size).split('x');
    bool ok_w = false, ok_h = false;
    if (parts.size() == 2) {
      width = parts[0].toInt(&ok_w);
      height = parts[1].toInt(&ok_h);
    }
    if (!ok_w || !ok_h || width < 1024 || height < 700 || width > 8000 || height > 8000) {
      std::cerr << "attnres-lab: --size: expected WxH from 1024x700 to 8000x8000, got '"
                << parser.value(size).toStdString() << "'\n";
      return 2;
    }
  }
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY") &&
      qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")) {
    std::cerr << "attnres-lab: no display (neither DISPLAY nor WAYLAND_DISPLAY is set): run it "
                 "in a desktop session, under xvfb-run, or with QT_QPA_PLATFORM=offscreen and "
                 "--screenshot FILE.png\n";
    return 1;
  }
  QApplication app(argc, argv);
  QApplication::setApplicationName("attnres-lab");
  QApplication::setApplicationVersion(QString::fromLatin1(attnres::kVersion));

  const bool shot = parser.isSet(screenshot);
  attnres::gui::MainWindow window(shot);
  window.recompute_all();
  // A scenario or model named on the command line that cannot be opened ends the start with its
  // message (not a window that quietly shows something else).
  if (parser.isSet(scenario) && !window.open_scenario(parser.value(scenario).toStdString())) {
    std::cerr << "attnres-lab: --scenario: " << window.error_text() << "\n";
    return 2;
  }
  // --screenshot reads it here (the window is synchronous); otherwise it is read in the background
  // while the window is up, and a model that does not load ends the program with its message.
  using OpenResult = attnres::gui::MainWindow::OpenResult;
  attnres::gui::MainWindow::OpenModelOptions model_options;
  model_options.done = [](OpenResult result, const std::string& error) {
    if (result != OpenResult::failed) return;
    std::cerr << "attnres-lab: --model: " << error << "\n";
    QApplication::exit(2);
  };
  if (parser.isSet(model) &&
      !window.open_model(parser.value(model).toStdString(),
                         shot ? attnres::gui::MainWindow::OpenModelOptions{} : model_options)) {
    std::cerr << "attnres-lab: --model: " << window.error_text() << "\n";
    return 2;
  }
  window.show_view(name);
  if (page_index >= 0) window.current_view()->show_page(page_index);
  if (step > 0) window.lesson_step(step - 1);
  if (parser.isSet(presentation)) window.set_presentation(true);
  if (shot) {
    window.resize(width, height);
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
