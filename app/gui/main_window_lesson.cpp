// The main window's lesson bar, presentation mode, the explanations and Help > About
// (main_window.hpp).
#include <QAction>
#include <QApplication>
#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QResizeEvent>
#include <QScrollArea>
#include <QStatusBar>
#include <QTabWidget>

#include "attnres/version.hpp"
#include "lesson.hpp"
#include "main_window.hpp"
#include "presentation_stage.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

void MainWindow::start_lesson() {
  lesson_step(0);
}

void MainWindow::lesson_step(int index) {
  const auto& steps = lesson_steps();
  if (index < 0 || index >= static_cast<int>(steps.size())) return;
  // Entering the lesson: every tab as it is now, to come back to when it ends.
  if (lesson_index_ < 0)
    for (View* v : views_) v->remember_before_lesson();
  lesson_index_ = index;
  const LessonStep& step = steps[static_cast<std::size_t>(index)];
  show_view(step.view);
  // Every step starts from the tab as the window opened: what an opened scenario, an earlier step
  // or the user changed does not leak into it, and Previous shows the earlier step's picture.
  if (View* v = view(step.view)) v->restore_inputs();
  // A step that cannot set what its text says shows why (a test fails on it), never a silent
  // no-op.
  guarded([&] { step.apply(*this); });
  lesson_text_->setText(QString("<b>Step %1 of %2 &mdash; %3</b><br>%4<br><i>Look for:</i> %5")
                            .arg(index + 1)
                            .arg(steps.size())
                            .arg(QString::fromStdString(step.title).toHtmlEscaped())
                            .arg(QString::fromStdString(step.action).toHtmlEscaped())
                            .arg(QString::fromStdString(step.look_for).toHtmlEscaped()));
  lesson_previous_->setEnabled(index > 0);
  lesson_next_->setEnabled(index + 1 < static_cast<int>(steps.size()));
  lesson_bar_->setVisible(true);
  update_stage();
}

PresentationStage* MainWindow::stage() const {
  return stage_.data();
}

void MainWindow::update_stage() {
  if (!stage_) return;
  const auto& steps = lesson_steps();
  View* v = current_view();
  const LessonStep* step = presentation_ && lesson_index_ >= 0 && !lesson_bar_->isHidden()
                               ? &steps[static_cast<std::size_t>(lesson_index_)]
                               : nullptr;
  if (step == nullptr || v == nullptr || v->name() != step->view || step->focus.empty() ||
      v->content() == nullptr) {
    stage_->hide_stage();
    return;
  }
  // The callout: the first sentence of what to look for (the lesson bar has the rest).
  QString look = QString::fromStdString(step->look_for);
  // (Not at an abbreviation: "Fig. 6", "e.g. ", "i.e. ".)
  static const QRegularExpression sentence_end("(?<!Fig)(?<!e\\.g)(?<!i\\.e)(?<!vs)\\. ");
  if (const auto end = look.indexOf(sentence_end); end > 0) look = look.left(end + 1);
  const QString callout = "Look for: " + look;
  for (const ChartSpec& chart : v->charts()) {
    if (chart.id == step->focus) {
      stage_->show_chart(v, v->content(), chart, callout);
      return;
    }
  }
  for (HeatmapWidget* map : v->heatmaps()) {
    if (map->spec().id == step->focus) {
      stage_->show_heatmap(v, v->content(), map->spec(), callout);
      return;
    }
  }
  stage_->hide_stage();  // not computed yet: the next result shows it
}

void MainWindow::end_lesson() {
  // Every tab back as the lesson found it (the lesson model the model tabs share stays).
  if (lesson_index_ >= 0)
    for (View* v : views_) v->restore_before_lesson();
  lesson_index_ = -1;
  lesson_bar_->setVisible(false);
  update_stage();
}

void MainWindow::set_presentation(bool on) {
  presentation_ = on;
  QFont font = normal_font_;
  if (on) font.setPointSizeF(font.pointSizeF() * 1.4);
  QApplication::setFont(font);
  set_chart_font_scale(on ? 1.4 : 1.0);
  // The lesson bar (a style sheet keeps the application font from reaching it) and the tabs:
  // the bar's text at the same scale, the tabs by their short names so that none is cut.
  for (QWidget* w : lesson_bar_->findChildren<QWidget*>()) w->setFont(font);
  for (int i = 0; i < tabs_->count(); ++i) {
    auto* v = static_cast<View*>(tabs_->widget(i));
    QString title = v->title();
    if (const ViewEntry* entry = find_view_entry(v->name()); on && entry != nullptr)
      title =
          QString::fromUtf8(entry->short_title.data(), static_cast<int>(entry->short_title.size()));
    tabs_->setTabText(i, title);
  }
  for (View* v : views_) {
    for (auto* scroll : v->findChildren<QScrollArea*>("inputs_scroll", Qt::FindDirectChildrenOnly))
      scroll->setVisible(!on);
    for (auto* panel : v->findChildren<QWidget*>("explanation_panel", Qt::FindDirectChildrenOnly))
      panel->setVisible(!on);
    for (auto* chart : v->findChildren<ChartPanel*>()) chart->refresh();
    v->update();
  }
  if (auto* action = findChild<QAction*>("presentation_action")) action->setChecked(on);
  if (stage_) {
    stage_->setFont(font);
    stage_->callout()->setFont(font);  // its style sheet keeps the inherited font away
  }
  update_stage();
  statusBar()->showMessage(on ? "presentation mode: F5 to leave" : "", 3000);
}

void MainWindow::resizeEvent(QResizeEvent* event) {
  QMainWindow::resizeEvent(event);
  if (!explanations_chosen_) set_explanations(width() >= 1200);
}

QString MainWindow::about_text() {
  // The documentation: installed next to the program (share/doc/attnres_lab), else the source
  // tree's.
  QString docs = QCoreApplication::applicationDirPath() + "/../share/doc/attnres_lab/docs";
  if (!QFileInfo(docs).isDir()) docs = QString::fromStdString(std::string(ATTNRES_SOURCE_DOCS_DIR));
  return QString(
             "<h3>AttnRes Lab %1</h3><p>Understand, teach and cost Attention Residuals (AttnRes): "
             "the "
             "residual sum of a transformer replaced by softmax attention over the outputs of "
             "earlier "
             "sublayers (Full AttnRes) or over block summaries (Block AttnRes), and what it costs "
             "in memory, "
             "I/O, pipeline traffic and time.</p><p>Documentation: %2 (teaching.md for the guided "
             "lesson, "
             "math.md for what is computed).</p><p>The command-line tool <tt>attnres</tt> computes "
             "the same "
             "numbers and charts.</p>")
      .arg(QString::fromLatin1(kVersion))
      .arg(QDir::cleanPath(docs).toHtmlEscaped());
}

void MainWindow::set_explanations(bool shown) {
  for (View* v : views_) {
    for (auto* w : v->findChildren<QWidget*>("explanation_panel")) {
      if (auto* panel = dynamic_cast<ExplanationPanel*>(w)) panel->set_collapsed(!shown);
    }
  }
  if (auto* action = findChild<QAction*>("explanations_action")) action->setChecked(shown);
}

}  // namespace attnres::gui
