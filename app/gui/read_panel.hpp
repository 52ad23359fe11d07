// One read, step by step (docs/math.md §2.2 Full AttnRes: reads and sources, §2.4 Two-phase
// schedule), inside the Depth attention view: for a chosen token and read of the view's first
// scheme, the sources with their RMS, the scores w·KeyNorm(v_i), the softmax (its max m and
// denominator ℓ), the weights and the weighted sum h, with the numbers; for Block AttnRes the
// two-phase form: phase 1 over the completed blocks, phase 2 over the partial sum, and the merge
// with its (o, m, ℓ) statistics. The numbers are the core's read_walkthrough
// (read_walkthrough.hpp); `attnres read` prints the same. Internal to app/gui: the view hands it
// the model and tokens.
#pragma once

#include <QWidget>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnres/model.hpp"
#include "attnres/read_walkthrough.hpp"

QT_BEGIN_NAMESPACE
class QLabel;
class QSpinBox;
class QTextBrowser;
QT_END_NAMESPACE

namespace attnres::gui {

class ReadPanel : public QWidget {
 public:
  explicit ReadPanel(QWidget* parent = nullptr);
  // The model whose reads are walked through (the view's first scheme, converted) and its tokens;
  // `name` names the scheme in the text. Recomputes the walkthrough when the panel is shown.
  void set_model(std::shared_ptr<const ModelWeights<double>> model, std::vector<int> tokens,
                 std::string name);
  // The last walkthrough (none when the scheme has no walkthrough: the text says why).
  const std::optional<ReadWalkthrough>& walkthrough() const { return walkthrough_; }
  QString text() const;  // the shown text, as plain text (tests)
  void refresh();        // computes the walkthrough of the chosen read and token and shows it

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QSpinBox *read_, *token_;
  QTextBrowser* text_;
  std::shared_ptr<const ModelWeights<double>> model_;
  std::vector<int> tokens_;
  std::string name_;
  std::optional<ReadWalkthrough> walkthrough_;
  bool dirty_ = true;
};

}  // namespace attnres::gui
