// The one-read walkthrough panel (read_panel.hpp).
#include "read_panel.hpp"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QShowEvent>
#include <QSpinBox>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attnres/error.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v < 0 ? "−∞" : "∞";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v == 0.0 ? 0.0 : v);  // no "-0"
  return text;
}

// The first channels of a vector: "[0.012, -0.3, 0.07, …]".
std::string head_of(const Eigen::VectorXd& v, Eigen::Index count = 4) {
  std::string out = "[";
  for (Eigen::Index i = 0; i < std::min(count, v.size()); ++i) {
    if (i > 0) out += ", ";
    out += num(v(i));
  }
  if (v.size() > count) out += ", …";
  return out + "]";
}

// Per-head values "0.5" or "0.5 | 0.2" (one per depth-attention head).
std::string per_head(const Eigen::VectorXd& v) {
  std::string out;
  for (Eigen::Index c = 0; c < v.size(); ++c) {
    if (c > 0) out += " | ";
    out += num(v(c));
  }
  return out;
}

std::string escaped(const std::string& text) {
  return QString::fromStdString(text).toHtmlEscaped().toStdString();
}

std::string cell(const std::string& text, bool right = false) {
  return std::string(right ? "<td align=right>" : "<td>") + escaped(text) + "</td>";
}

std::string stats_row(const std::string& name, const WalkthroughStats& stats,
                      const ReadWalkthrough& w) {
  std::string sources;
  for (const int i : stats.sources) {
    if (!sources.empty()) sources += ", ";
    sources += w.sources[static_cast<std::size_t>(i)].label;
  }
  return std::string("<tr>") + cell(name) + cell(sources.empty() ? "none" : sources) +
         cell(per_head(stats.m), true) + cell(per_head(stats.l), true) + cell(head_of(stats.o)) +
         "</tr>";
}

std::string walkthrough_html(const ReadWalkthrough& w, const std::string& scheme) {
  const bool standard = w.scheme.mode == ResidualMode::standard;
  std::string html = std::string("<p><b>") + escaped(scheme) + "</b>, read " +
                     std::to_string(w.read) + ": the input of " + escaped(w.target) +
                     ", at token " + std::to_string(w.token) + " (id " +
                     std::to_string(w.token_id) + ") of " + std::to_string(w.tokens) + ".</p>";
  html += "<p><b>1. Sources</b> v<sub>i</sub> the read sees (the most recent last)";
  if (!standard) {
    html +=
        ", their keys k<sub>i</sub> = KeyNorm(v<sub>i</sub>) and scores s<sub>i</sub> = "
        "w·k<sub>i</sub> (w: this read's pseudo-query";
    if (w.heads > 1) html += "; one value per head";
    html += ")";
  }
  html +=
      ".</p><table border=1 cellspacing=0 cellpadding=3><tr><th>i</th><th>source</th>"
      "<th>RMS of v<sub>i</sub></th><th>v<sub>i</sub> (first channels)</th>";
  if (!standard) html += "<th>score s<sub>i</sub></th><th>exp(s<sub>i</sub> − m)</th>";
  html += "<th>weight α<sub>i</sub></th>";
  if (w.two_phase) html += "<th>phase</th>";
  html += "</tr>";
  for (std::size_t i = 0; i < w.sources.size(); ++i) {
    const WalkthroughSource& s = w.sources[i];
    html += std::string("<tr>") + cell(std::to_string(i), true) + cell(s.description) +
            cell(num(s.rms), true) + cell(head_of(s.value));
    if (!standard) html += cell(per_head(s.score), true) + cell(per_head(s.shifted_exp), true);
    html += cell(per_head(s.weight), true);
    if (w.two_phase) html += cell(std::to_string(s.phase), true);
    html += "</tr>";
  }
  html += "</table>";
  if (!standard) {
    html += std::string("<p><b>2. Softmax</b> over the ") + std::to_string(w.sources.size()) +
            " sources: m = max<sub>i</sub> s<sub>i</sub> = " + per_head(w.softmax_max) +
            ", ℓ = Σ exp(s<sub>i</sub> − m) = " + per_head(w.softmax_denominator) +
            ", α<sub>i</sub> = exp(s<sub>i</sub> − m) / ℓ (the weights above sum to 1).</p>";
  } else {
    html += "<p><b>2. No softmax</b>: the standard residual weighs every source by 1.</p>";
  }
  html += std::string("<p><b>3. The weighted sum</b> h = Σ α<sub>i</sub> v<sub>i</sub> = ") +
          head_of(w.h, 6) + ", RMS " + num(w.h_rms) + ": the input of " + escaped(w.target) +
          ".</p>";
  if (w.two_phase) {
    const WalkthroughTwoPhase& t = *w.two_phase;
    html += std::string("<p><b>4. Two-phase</b> (docs/math.md): the reads ") +
            std::to_string(t.group_first_read) + " .. " + std::to_string(t.group_last_read) +
            " share phase 1, computed once for the group over the history before it (for Block: "
            "the completed blocks); phase 2 adds what the group produced (for Block: the partial "
            "sum). Each phase keeps o = Σ exp(s<sub>i</sub> − m) v<sub>i</sub>, m and ℓ; the merge "
            "takes m = max(m<sub>1</sub>, m<sub>2</sub>) and scales each phase by exp(m<sub>p</sub>"
            " − m).</p><table border=1 cellspacing=0 cellpadding=3><tr><th>phase</th>"
            "<th>sources</th><th>m</th><th>ℓ</th><th>o (first channels)</th></tr>";
    html += stats_row("1", t.phase1, w) + stats_row("2", t.phase2, w) +
            stats_row("merged", t.merged, w) + "</table>";
    html += std::string("<p>exp(m<sub>1</sub> − m) = ") + per_head(t.scale1) +
            ", exp(m<sub>2</sub> − m) = " + per_head(t.scale2) +
            "; h = o / ℓ = " + head_of(t.h, 6) +
            ", the same as the one-shot h: largest difference " + num(t.max_difference) + ".</p>";
  } else if (!w.two_phase_note.empty()) {
    html += std::string("<p><i>") + escaped(w.two_phase_note) + "</i></p>";
  }
  return html;
}

}  // namespace

ReadPanel::ReadPanel(QWidget* parent) : QWidget(parent) {
  setObjectName("read_panel");
  auto* column = new QVBoxLayout(this);
  auto* controls = new QHBoxLayout;
  read_ = spin(0, 4096, 3);
  read_->setObjectName("walk_read");
  read_->setToolTip(
      "The read r: the input of sublayer r + 1 (0: the first sublayer's; L: the final read)");
  token_ = spin(0, 4096, 2);
  token_->setObjectName("walk_token");
  token_->setToolTip("The token position t whose read is shown (0 .. T - 1)");
  controls->addWidget(new QLabel("read r"));
  controls->addWidget(with_slider(read_, "walk_read_slider"), 2);
  controls->addWidget(new QLabel("token t"));
  controls->addWidget(token_);
  controls->addStretch(1);
  column->addLayout(controls);
  text_ = new QTextBrowser;
  text_->setObjectName("walk_text");
  text_->setOpenLinks(false);
  column->addWidget(text_, 1);
  on_change(this, {read_, token_}, [this] { refresh(); });
}

void ReadPanel::set_model(std::shared_ptr<const ModelWeights<double>> model,
                          std::vector<int> tokens, std::string name) {
  model_ = std::move(model);
  tokens_ = std::move(tokens);
  name_ = std::move(name);
  const QSignalBlocker b1(read_), b2(token_);
  if (model_) set_spin_range(read_, 0, model_->config.sublayers());
  token_->setRange(0, std::max(0, static_cast<int>(tokens_.size()) - 1));
  dirty_ = true;
  if (isVisible()) refresh();
}

void ReadPanel::refresh() {
  dirty_ = false;
  walkthrough_.reset();
  if (!model_) {
    text_->setHtml("<p>No model yet.</p>");
    return;
  }
  try {
    walkthrough_ = read_walkthrough(*model_, tokens_, token_->value(), read_->value());
    text_->setHtml(QString::fromStdString(walkthrough_html(*walkthrough_, name_)));
  } catch (const Error& error) {
    text_->setHtml("<p><i>" + QString::fromStdString(error.what()).toHtmlEscaped() +
                   "</i></p><p>The step-by-step read covers the standard residual and Full and "
                   "Block AttnRes with the softmax gate; pick one of them as the scheme.</p>");
  }
}

QString ReadPanel::text() const {
  return text_->toPlainText();
}

void ReadPanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (dirty_) refresh();
}

}  // namespace attnres::gui
