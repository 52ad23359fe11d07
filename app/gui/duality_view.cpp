// The Duality view (docs/math.md §2, docs/schemes.md): depth and sequence are twins. Top: the
// depth mixing matrix M of the picked scheme (and of a second one with "compare with") on the
// lesson model's weights; middle: the rank at each cut and one head's causal sequence attention,
// the running sum and their ranks; below: the rank taxonomy of every kind of scheme. The widget
// shows what duality_result computes (duality_results.hpp).
#include <QColor>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <iterator>

#include "duality_results.hpp"
#include "model_view.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

class DualityView : public ModelView {
 public:
  explicit DualityView(const ViewHost& host)
      : ModelView("duality", "Depth-sequence duality", host) {
    QFormLayout* form = nullptr;
    QWidget* inputs = make_inputs(form);
    layer_ = spin(0, 63, 0);
    head_ = spin(0, 63, 0);
    layer_->setObjectName("sequence_layer");
    head_->setObjectName("sequence_head");
    layer_->setToolTip("The transformer layer whose sequence attention is shown (0 .. layers - 1)");
    head_->setToolTip("The attention head shown (0 .. heads - 1)");
    form->addRow("sequence layer", layer_);
    form->addRow("sequence head", head_);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    auto* top = new QHBoxLayout;
    depth_ = new HeatmapWidget;
    depth_b_ = new HeatmapWidget;
    depth_b_->setVisible(false);
    top->addWidget(depth_);
    top->addWidget(depth_b_);
    auto* middle = new QHBoxLayout;
    ranks_ = new ChartPanel;
    sequence_tabs_ = new QTabWidget;
    sequence_ = new HeatmapWidget;
    running_ = new HeatmapWidget;
    sequence_ranks_ = new ChartPanel;
    sequence_tabs_->addTab(sequence_, "attention");
    sequence_tabs_->addTab(running_, "running sum");
    sequence_tabs_->addTab(sequence_ranks_, "ranks");
    sequence_tabs_->setToolTip(
        "the sequence side: one head's causal softmax attention over the tokens, the running "
        "sum, and their ranks");
    middle->addWidget(ranks_, 3);
    middle->addWidget(sequence_tabs_, 2);
    caption_ = new QLabel;
    caption_->setObjectName("taxonomy_caption");
    caption_->setWordWrap(true);
    taxonomy_ = new QTableWidget;
    taxonomy_->setObjectName("scheme_taxonomy");
    taxonomy_->setColumnCount(6);
    taxonomy_->setHorizontalHeaderLabels(
        {"scheme", "depth parameters", "rank, mean", "rank, token", "bound", "holds"});
    taxonomy_->horizontalHeaderItem(2)->setToolTip(
        "the largest rank of M[k:, :k] over the cuts k, M the token mean");
    taxonomy_->horizontalHeaderItem(3)->setToolTip(
        "the largest rank of M_t[k:, :k] over the cuts k and the tokens t");
    taxonomy_->horizontalHeaderItem(4)->setToolTip(
        "the largest rank the scheme can reach, over the cuts");
    taxonomy_->horizontalHeaderItem(5)->setToolTip("every cut within its bound");
    taxonomy_->verticalHeader()->setVisible(false);
    taxonomy_->verticalHeader()->setDefaultSectionSize(20);
    taxonomy_->setWordWrap(false);
    taxonomy_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Every column in view: the scheme column gives way (its text is in the tooltip).
    taxonomy_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    taxonomy_->setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
    taxonomy_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    taxonomy_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
    column->addLayout(top, 5);
    column->addLayout(middle, 4);
    column->addWidget(caption_);
    column->addWidget(taxonomy_);
    three_columns(
        this, inputs, content,
        "<h3>Depth and sequence are twins</h3><p><b>Depth.</b> h<sub>l</sub> = Σ M<sub>l,i</sub> "
        "v<sub>i</sub> (top: M of the picked scheme and, with <i>compare with</i>, of a second one "
        "on "
        "the same weights). The rank of a cut M[k:, :k] is the size of the state a recurrence over "
        "depth must carry past sublayer k: a running sum is one state, like an RNN or linear "
        "attention over a sequence; m streams (mHC) are a larger state; a softmax over every "
        "earlier "
        "output (Full AttnRes) is softmax attention over depth; Block AttnRes keeps the embedding "
        "and "
        "the block summaries.</p><p><b>The table</b> computes it: one forward pass per scheme on "
        "these weights, the largest rank over cuts (of the token-mean M and of any token's M), "
        "beside "
        "the bound each scheme must respect at every cut; <i>holds</i> checks every cut. "
        "Parameters "
        "the model lacks are drawn at random there (at their start DenseFormer and mHC would be "
        "the "
        "standard residual).</p><p><b>Chart.</b> The rank at each cut (SVD, singular values above "
        "1e-6 of the largest) and its bound.</p><p><b>Sequence.</b> Right: the causal softmax "
        "attention of one head of the chosen sequence layer over the tokens, computed on that "
        "layer's real input under the picked scheme (dense, high rank), the running sum (rank 1) "
        "and both their ranks.</p><p><b>Try:</b> compare with mhc; type mhc:streams=1 (the "
        "standard "
        "residual's all-ones M at its start) or full:window=2.</p>");
    std::vector<QWidget*> watched = model_inputs();
    watched.insert(watched.end(), {layer_, head_});
    on_change(this, watched, [this] { recompute(); });
  }

  void recompute() override {
    const auto snapshot = lesson_->snapshot();
    const Picks picks = this->picks();
    {
      // The sequence layer and head within the model (no silent clamping of what is shown).
      const QSignalBlocker b1(layer_), b2(head_);
      layer_->setMaximum(std::max(0, snapshot.config.num_hidden_layers - 1));
      head_->setMaximum(std::max(0, snapshot.config.num_attention_heads - 1));
    }
    const int layer = layer_->value(), head = head_->value();
    run("duality: mixing matrices and ranks",
        [this, snapshot, picks, layer, head](const Progress& progress) -> std::function<void()> {
          const auto built = snapshot.build();
          const ModelWeights<double>& model = *built;
          const auto tokens = snapshot.token_ids(model.config);
          const std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
          return [this,
                  result = duality_result(runs, model, tokens, snapshot.random.seed + 1000, layer,
                                          head, snapshot.block_size, progress)]() mutable {
            show_result(std::move(result));
          };
        });
  }

  // The results of a run on the widgets.
  void show_result(DualityResult result) {
    shown_ = std::move(result.shown);
    HeatmapWidget* maps[] = {depth_, depth_b_};
    for (std::size_t i = 0; i < result.mixing.size() && i < std::size(maps); ++i)
      maps[i]->set_spec(std::move(result.mixing[i]));
    depth_b_->setVisible(shown_.size() > 1);
    ranks_->set_spec(result.ranks);
    sequence_->set_spec(std::move(result.sequence));
    running_->set_spec(std::move(result.running));
    sequence_ranks_->set_spec(result.sequence_ranks);
    caption_->setText(QString::fromStdString(result.caption));
    fill_taxonomy(result.rows);
    clear_error();
  }

  void fill_taxonomy(const std::vector<TaxonomyRow>& rows) {
    taxonomy_->setRowCount(0);
    for (const auto& row : rows) {
      const int r = taxonomy_->rowCount();
      taxonomy_->insertRow(r);
      const std::string mean = std::to_string(row.mean_rank) + (row.mean_bounded ? "" : " *");
      const std::string bound = std::string("≤ ") + std::to_string(row.bound) + ": " + row.rule;
      const std::string cells[] = {row.scheme, row.parameters,
                                   mean,       std::to_string(row.token_rank),
                                   bound,      row.holds ? "✓" : "✗"};
      for (int c = 0; c < 6; ++c) {
        auto* item = new QTableWidgetItem(QString::fromStdString(cells[c]));
        item->setToolTip(item->text());
        if (c == 2 || c == 3 || c == 5) item->setTextAlignment(Qt::AlignCenter);
        if (c == 2 && !row.mean_bounded) {
          item->setToolTip(
              "the token mean of input-dependent mHC matrices is not bounded by m; each token's M "
              "is");
        }
        if (c == 4) item->setToolTip(QString::fromStdString(row.detail));
        if (c == 5) item->setForeground(row.holds ? QColor(0, 120, 0) : QColor(180, 0, 0));
        taxonomy_->setItem(r, c, item);
      }
    }
    // Every row in view when there is room; a small window scrolls it rather than clipping it.
    const int header =
        taxonomy_->horizontalHeader()->sizeHint().height() + 2 * taxonomy_->frameWidth() + 2;
    const int row = taxonomy_->verticalHeader()->defaultSectionSize();
    taxonomy_->setMaximumHeight(header + row * taxonomy_->rowCount());
    taxonomy_->setMinimumHeight(header + row * std::min(4, taxonomy_->rowCount()));
  }

  std::vector<ChartSpec> charts() const override {
    return {ranks_->spec(), sequence_ranks_->spec()};
  }
  std::vector<HeatmapWidget*> heatmaps() override {
    if (shown_.size() > 1) return {depth_, depth_b_, sequence_, running_};
    return {depth_, sequence_, running_};
  }

 private:
  QSpinBox *layer_, *head_;
  HeatmapWidget *depth_, *depth_b_, *sequence_, *running_;
  QTabWidget* sequence_tabs_;
  ChartPanel *ranks_, *sequence_ranks_;
  QLabel* caption_;
  QTableWidget* taxonomy_;
  std::vector<ShownScheme> shown_;
};

}  // namespace

View* make_duality_view(const ViewHost& host) {
  return new DualityView(host);
}

}  // namespace attnres::gui
