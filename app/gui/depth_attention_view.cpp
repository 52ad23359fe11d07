// The Depth attention view (docs/math.md §2.2, docs/schemes.md): the weights α of every read over
// its sources, for the picked scheme and, with "compare with", a second one on the same weights
// of the lesson model; one token's or the mean over tokens, one head's or the mean over heads.
// The heatmaps are the core's (alpha_heatmap, as `attnres forward --chart` draws them).
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <iterator>
#include <memory>

#include "attnres/model_charts.hpp"
#include "model_results.hpp"
#include "model_view.hpp"
#include "read_panel.hpp"
#include "routing_panel.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

class DepthAttentionView : public ModelView {
 public:
  DepthAttentionView(const ViewHost& host, const ViewEntry& table_row)
      : ModelView(table_row, host) {
    QFormLayout* form = nullptr;
    QWidget* inputs = make_inputs(form);
    token_ = new QComboBox;
    token_->setObjectName("token");
    token_->setToolTip("The weights of one token, or their mean over the tokens");
    token_->addItem("mean over tokens");
    head_ = new QComboBox;
    head_->setObjectName("head");
    head_->setToolTip("One depth-attention head of a multi-head scheme, or the mean over heads");
    head_->addItem("mean over heads");
    head_->setEnabled(false);
    form->addRow("token", token_);
    form->addRow("head", head_);
    auto* content = new QWidget;
    auto* outer = new QVBoxLayout(content);
    outer->setContentsMargins(0, 0, 0, 0);
    pages_ = new QTabWidget;
    pages_->setObjectName("depth_pages");
    outer->addWidget(pages_);
    auto* maps_page = new QWidget;
    auto* column = new QVBoxLayout(maps_page);
    auto* row = new QHBoxLayout;
    first_ = new HeatmapWidget;
    second_ = new HeatmapWidget;
    second_->setVisible(false);
    row->addWidget(first_);
    row->addWidget(second_);
    column->addLayout(row, 1);
    note_ = new QLabel;
    note_->setObjectName("heads_note");
    note_->setWordWrap(true);
    note_->setVisible(false);
    column->addWidget(note_);
    pages_->addTab(maps_page, page_title(table_row, 0));
    read_panel_ = new ReadPanel;
    pages_->addTab(read_panel_, page_title(table_row, 1));
    routing_panel_ = new RoutingPanel;
    pages_->addTab(routing_panel_, page_title(table_row, 2));
    three_columns(
        this, inputs, content,
        "<h3>Depth attention</h3><p><b>What you see.</b> The weights α of every read (rows: the "
        "input of each sublayer, then the final read) over its sources (columns): every earlier "
        "output v<sub>i</sub> (Full AttnRes, DenseFormer, rescaled, mHC), or the embedding, "
        "completed "
        "blocks b<sub>n</sub> and the running partial sum (Block AttnRes). Grey: not a source of "
        "that "
        "read. mHC, DenseFormer and the rescaled residual show their effective weight of each "
        "v<sub>i</sub>; the standard residual weighs every one by 1.</p>"
        "<p><b>Formula</b> (docs/math.md §2.2, docs/schemes.md): α = "
        "softmax<sub>i</sub>(w<sub>l</sub>·"
        "KeyNorm(v<sub>i</sub>)); h<sub>l</sub> = Σ α v<sub>i</sub>. With zero queries every read "
        "is a "
        "plain mean.</p><p><b>Schemes.</b> <i>scheme</i> reads the chosen model's weights with any "
        "scheme of the lab (the model's own first); <i>compare with</i> draws a second map beside "
        "it. "
        "Other schemes keep every shared tensor and start what they add at its start value "
        "(docs/schemes.md). Type a spec such as <tt>full:heads=4</tt> for any setting.</p>"
        "<p><b>Model.</b> The view opens on the shipped <i>trained</i> Full AttnRes model (4 "
        "layers, "
        "d = 128, trained on the lab corpus; docs/training.md), on the bytes of a sentence; the "
        "random "
        "model (Full AttnRes with random queries) brings back the spin boxes.</p>"
        "<p><b>Routing statistics</b> (docs/interop.md): per read of the first map, the mean "
        "over the tokens of its normalised entropy, effective sources, top-1 mass and weight on "
        "the embedding and on the most recent source, as <tt>attnres inspect --text</tt> prints "
        "them; the cosine similarity of the reads' pseudo-queries; where the weights came from "
        "(the checkpoint's layout and dtypes).</p>"
        "<p><b>Try:</b> compare with block; pick a single token (byte); the random model with "
        "query "
        "std 0 (uniform rows), then 2 (sharp rows); DenseFormer (all ones at its start); "
        "full_multihead and a head.</p>");
    on_change(this, model_inputs(), [this] { recompute(); });
    QObject::connect(token_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
    QObject::connect(head_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  }

  void recompute() override {
    const auto snapshot = lesson_->snapshot();
    state_.picks = picks();
    run("depth attention: forward passes",
        [this, snapshot, picks = state_.picks](const Progress& progress) -> std::function<void()> {
          auto result = std::make_shared<DepthAttentionResult>(
              depth_attention_result(snapshot, picks, progress));
          return [this, result] {
            read_panel_->set_model(result->first, result->tokens, result->first_label);
            routing_panel_->set_result(result->routing);
            result_ = result;
            second_->setVisible(result_->shown.size() > 1);
            fill_token_choice(result_->tokens, result_->bytes);
            fill_head_choice(result_->heads);
            redraw();
            clear_error();
          };
        });
  }

  // "mean over tokens", then one entry per token (a byte's character for text), keeping the
  // choice where it still exists.
  void fill_token_choice(const std::vector<int>& tokens, bool bytes) {
    const QSignalBlocker blocker(token_);
    const int keep = token_->currentIndex();
    token_->clear();
    token_->addItem("mean over tokens");
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      const int id = tokens[t];
      if (bytes && id > 32 && id < 127) {
        token_->addItem(QString("token %1 ('%2', id %3)").arg(t).arg(QChar(id)).arg(id));
      } else if (bytes && id == 32) {
        token_->addItem(QString("token %1 (space, id %2)").arg(t).arg(id));
      } else {
        token_->addItem(QString("token %1 (id %2)").arg(t).arg(id));
      }
    }
    token_->setCurrentIndex(keep < token_->count() ? std::max(0, keep) : 0);
  }

  // "mean over heads", then one entry per head of a multi-head scheme, and the note about them.
  void fill_head_choice(int heads) {
    {
      const QSignalBlocker blocker(head_);
      const int keep = head_->currentIndex();
      head_->clear();
      head_->addItem("mean over heads");
      for (int h = 0; h < heads; ++h) head_->addItem(QString("head %1").arg(h));
      head_->setCurrentIndex(keep < head_->count() ? std::max(0, keep) : 0);
      head_->setEnabled(heads > 1);
    }
    note_->setVisible(heads > 1);
    note_->setText(QString("Multi-head reads: each of the %1 heads (a group of d/%1 "
                           "channels) has its own softmax "
                           "over depth. The map shows the mean over heads (each source's "
                           "weight averaged over "
                           "the channels) unless you pick a head.")
                       .arg(heads));
  }

  // The token and head choices are the state's; the maps are depth_attention_maps of it.
  void redraw() {
    state_.token = token_->currentIndex() - 1;
    state_.head = head_->currentIndex() - 1;
    if (!result_) return;
    HeatmapWidget* maps[] = {first_, second_};
    const std::vector<HeatmapSpec> specs = depth_attention_maps(*result_, state_);
    for (std::size_t i = 0; i < specs.size() && i < std::size(maps); ++i)
      maps[i]->set_spec(specs[i]);
  }
  // What the page on screen shows: the routing page its chart and cosine map, the others the
  // maps of every read.
  bool on_routing_page() const { return pages_->currentWidget() == routing_panel_; }
  void show_page(int index) override { pages_->setCurrentIndex(index); }
  std::vector<ChartSpec> charts() const override {
    if (on_routing_page() && routing_panel_->has_chart()) return {routing_panel_->chart()->spec()};
    return {};
  }
  std::vector<HeatmapWidget*> heatmaps() override {
    if (on_routing_page())
      return routing_panel_->has_cosines() ? std::vector<HeatmapWidget*>{routing_panel_->cosines()}
                                           : std::vector<HeatmapWidget*>{};
    if (result_ && result_->shown.size() > 1) return {first_, second_};
    return {first_};
  }

 private:
  QComboBox *token_, *head_;
  QTabWidget* pages_;
  ReadPanel* read_panel_;
  RoutingPanel* routing_panel_;
  HeatmapWidget *first_, *second_;
  QLabel* note_;
  DepthAttentionState state_;
  std::shared_ptr<const DepthAttentionResult> result_;  // the latest run's
};

}  // namespace

View* make_depth_attention_view(const ViewHost& host, const ViewEntry& entry) {
  return new DepthAttentionView(host, entry);
}

}  // namespace attnres::gui
