// The Duality view (docs/math.md §2, docs/schemes.md): depth and sequence are twins. Top: the
// depth mixing matrix M of the picked scheme (and of a second one with "compare with") on the
// lesson model's weights; middle: the rank at each cut and one head's causal sequence attention,
// the running sum and their ranks; below: the rank taxonomy of every kind of scheme. The widget
// shows what duality_result computes (duality_results.hpp).
#include <QColor>
#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
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
#include <optional>
#include <string>

#include "duality_results.hpp"
#include "model_view.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

class DualityView : public ModelView {
 public:
  DualityView(const ViewHost& host, const ViewEntry& table_row) : ModelView(table_row, host) {
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
    // Two pages: the 2×2 duality (depth above sequence, a state of one beside attention) and
    // the ranks with every scheme's row.
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    column->setContentsMargins(0, 0, 0, 0);
    pages_ = new QTabWidget;
    pages_->setObjectName("duality_pages");
    column->addWidget(pages_);
    auto* quad_page = new QWidget;
    auto* quad_column = new QVBoxLayout(quad_page);
    auto* controls = new QHBoxLayout;
    cut_ = spin(1, 4096, state_.cut);
    cut_->setObjectName("duality_cut");
    cut_->setToolTip(
        "The cut k drawn on all four maps: the block below row k and left of column k, whose rank "
        "is the size of the state a recurrence must carry past k (depth: sublayers; sequence: "
        "tokens)");
    token_ = new QComboBox;
    token_->setObjectName("duality_token");
    token_->setToolTip(
        "Depth maps: the token mean of M, or one token's M_t; sequence maps: that token's row "
        "outlined");
    token_->addItem("token mean", -1);
    controls->addWidget(new QLabel("cut k"));
    controls->addWidget(with_slider(cut_, "duality_cut_slider"), 2);
    controls->addWidget(new QLabel("token"));
    controls->addWidget(token_, 1);
    quad_column->addLayout(controls);
    auto* grid = new QGridLayout;
    standard_ = new HeatmapWidget;
    depth_ = new HeatmapWidget;
    running_ = new HeatmapWidget;
    sequence_ = new HeatmapWidget;
    standard_->setObjectName("duality_depth_standard");
    depth_->setObjectName("duality_depth_scheme");
    running_->setObjectName("duality_sequence_running");
    sequence_->setObjectName("duality_sequence_attention");
    grid->addWidget(standard_, 0, 0);
    grid->addWidget(depth_, 0, 1);
    grid->addWidget(running_, 1, 0);
    grid->addWidget(sequence_, 1, 1);
    for (int i = 0; i < 2; ++i) {  // four equal maps
      grid->setColumnStretch(i, 1);
      grid->setRowStretch(i, 1);
    }
    quad_column->addLayout(grid, 1);
    cut_summary_ = new QLabel;
    cut_summary_->setObjectName("duality_cut_summary");
    cut_summary_->setWordWrap(true);
    quad_column->addWidget(cut_summary_);
    // Linked hover: a cell of one map rings the same cell of its twin.
    link_hover(standard_, depth_);
    link_hover(running_, sequence_);
    pages_->addTab(quad_page, page_title(table_row, 0));

    auto* ranks_page = new QWidget;
    auto* ranks_column = new QVBoxLayout(ranks_page);
    auto* top = new QHBoxLayout;
    ranks_ = new ChartPanel;
    depth_b_ = new HeatmapWidget;
    depth_b_->setVisible(false);
    top->addWidget(ranks_, 3);
    top->addWidget(depth_b_, 2);
    auto* middle = new QHBoxLayout;
    sequence_ranks_ = new ChartPanel;
    middle->addWidget(sequence_ranks_);
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
    ranks_column->addLayout(top, 5);
    ranks_column->addLayout(middle, 3);
    ranks_column->addWidget(caption_);
    ranks_column->addWidget(taxonomy_);
    pages_->addTab(ranks_page, page_title(table_row, 1));
    three_columns(
        this, inputs, content,
        "<h3>Depth and sequence are twins</h3><p><b>The 2×2.</b> Top: depth, h<sub>l</sub> = "
        "Σ M<sub>l,i</sub> v<sub>i</sub>; bottom: sequence, one head's mix of the tokens. Left: a "
        "state of one — the standard residual's M is all ones (a running sum over depth) and the "
        "running sum over tokens is an RNN or linear attention. Right: attention — the picked "
        "scheme's M (Full or Block AttnRes) and one head's causal softmax attention of the chosen "
        "sequence layer, on that layer's real input. One colour scale for the four.</p><p><b>The "
        "cut k</b> (red box): the block below row k and left of column k. Its rank is the size of "
        "the state a recurrence must carry past k; the label gives the rank and the leading "
        "singular values. The running sums have rank 1 at every cut; attention reaches min(k, "
        "rows − k). <b>Token</b>: one token's M<sub>t</sub> (the mean otherwise) and its row "
        "outlined on the sequence side. Hover a depth cell for its source and that source's RMS, a "
        "sequence cell for its token; the twin map rings the same cell.</p><p><b>Ranks and every "
        "scheme</b> (second page): the rank at each cut with its bound, the compared scheme's M, "
        "and one forward pass per kind of scheme on these weights — the largest rank over the "
        "cuts (of the token-mean M and of any token's M) beside the bound each scheme must "
        "respect; <i>holds</i> checks every cut. Parameters the model lacks are drawn at random "
        "there (at their start DenseFormer and mHC would be the standard residual).</p><p><b>Try:"
        "</b> move the cut; pick a token; compare with mhc; type mhc:streams=1 (the standard "
        "residual's all-ones M at its start) or full:window=2.</p>");
    std::vector<QWidget*> watched = model_inputs();
    watched.insert(watched.end(), {layer_, head_});
    on_change(this, watched, [this] { recompute(); });
    // The cut and the token redraw the 2×2 from the last result (no forward pass).
    on_change(this, {cut_, token_}, [this] { show_quad(); });
  }

  // The taxonomy's Block row is at the lesson's S unless the model is a Block model itself
  // (taxonomy_schemes).
  bool uses_block_size() const override {
    return lesson_->snapshot().config.attn_res.mode != ResidualMode::block ||
           ModelView::uses_block_size();
  }

  void recompute() override {
    const auto snapshot = lesson_->snapshot();
    {
      // The sequence layer and head within the model (no silent clamping of what is shown).
      const QSignalBlocker b1(layer_), b2(head_);
      layer_->setMaximum(std::max(0, snapshot.config.num_hidden_layers - 1));
      head_->setMaximum(std::max(0, snapshot.config.num_attention_heads - 1));
    }
    state_.picks = picks();
    state_.layer = layer_->value();
    state_.head = head_->value();
    run("duality: mixing matrices and ranks",
        [this, snapshot, state = state_](const Progress& progress) -> std::function<void()> {
          return [this, run = duality_run(snapshot, state, progress)]() mutable {
            show_result(std::move(run.result), std::move(run.token_names));
          };
        });
  }

  // The results of a run on the widgets.
  void show_result(DualityResult result, std::vector<std::string> token_names) {
    shown_ = result.shown;
    if (result.mixing.size() > 1) depth_b_->set_spec(result.mixing[1]);
    depth_b_->setVisible(shown_.size() > 1);
    ranks_->set_spec(result.ranks);
    sequence_ranks_->set_spec(result.sequence_ranks);
    caption_->setText(QString::fromStdString(result.caption));
    fill_taxonomy(result.rows);
    token_names_ = std::move(token_names);
    {
      // The token picker and the cut's range follow the model and the tokens.
      const QSignalBlocker blocker(token_);
      const int kept = token_->currentData().toInt();
      token_->clear();
      token_->addItem("token mean", -1);
      for (std::size_t t = 0; t < token_names_.size(); ++t) {
        std::string item = "t";
        item += std::to_string(t);
        item += ": ";
        item += token_names_[t];
        token_->addItem(QString::fromStdString(item), static_cast<int>(t));
      }
      const int index = token_->findData(kept);
      token_->setCurrentIndex(index >= 0 ? index : 0);
      const QSignalBlocker cut_blocker(cut_);
      const int sublayers = result.shown.empty() ? 1 : result.shown.front().trace.sublayers;
      set_spin_range(cut_, 1, std::max(1, sublayers));
    }
    result_ = std::move(result);
    show_quad();
    clear_error();
  }

  // The 2×2 from the last result at the chosen cut and token.
  void show_quad() {
    if (!result_ || result_->shown.empty()) return;
    state_.token = token_->currentData().toInt();
    state_.cut = cut_->value();
    const DualityQuad quad = duality_quad(*result_, state_.token, state_.cut, token_names_);
    standard_->set_spec(quad.standard);
    depth_->set_spec(quad.scheme);
    running_->set_spec(quad.running);
    sequence_->set_spec(quad.attention);
    const auto rank = [](const DualityCut& cut) { return std::to_string(cut.rank); };
    std::string summary = "At the cut: depth, standard residual rank ";
    summary += rank(quad.standard_cut);
    summary += " against ";
    summary += result_->shown.front().label;
    summary += " rank ";
    summary += rank(quad.scheme_cut);
    summary += "; sequence, running sum rank ";
    summary += rank(quad.running_cut);
    summary += " against softmax attention rank ";
    summary += rank(quad.attention_cut);
    summary +=
        ". A rank is the size of the state a recurrence must carry past the cut: a running sum "
        "carries one vector, attention every earlier one (docs/math.md).";
    cut_summary_->setText(QString::fromStdString(summary));
  }

  static void link_hover(HeatmapWidget* a, HeatmapWidget* b) {
    a->set_hover_listener([b](int row, int col) { b->set_marked_cell(row, col); });
    b->set_hover_listener([a](int row, int col) { a->set_marked_cell(row, col); });
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

  void show_page(int index) override { pages_->setCurrentIndex(index); }
  std::vector<ChartSpec> charts() const override {
    return {ranks_->spec(), sequence_ranks_->spec()};
  }
  std::vector<HeatmapWidget*> heatmaps() override {
    if (shown_.size() > 1) return {depth_, depth_b_, sequence_, running_, standard_};
    return {depth_, sequence_, running_, standard_};
  }

 private:
  QSpinBox *layer_, *head_, *cut_;
  QComboBox* token_;
  HeatmapWidget *depth_, *depth_b_, *sequence_, *running_, *standard_;
  QTabWidget* pages_;
  QLabel* cut_summary_;
  std::optional<DualityResult> result_;
  std::vector<std::string> token_names_;
  DualityState state_;  // what the widgets show (duality_results.hpp)
  ChartPanel *ranks_, *sequence_ranks_;
  QLabel* caption_;
  QTableWidget* taxonomy_;
  std::vector<ShownScheme> shown_;
};

}  // namespace

View* make_duality_view(const ViewHost& host, const ViewEntry& entry) {
  return new DualityView(host, entry);
}

}  // namespace attnres::gui
