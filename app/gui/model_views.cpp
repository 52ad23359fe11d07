// The views on a model: depth attention, magnitudes by depth and the depth-sequence duality
// (docs/math.md §2, docs/schemes.md).
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QShowEvent>
#include <QSpinBox>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QTimer>
#include <QVBoxLayout>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "attnres/atomic_file.hpp"
#include "attnres/cost.hpp"
#include "attnres/cost_metrics.hpp"
#include "attnres/engine.hpp"
#include "attnres/error.hpp"
#include "attnres/format.hpp"
#include "attnres/forward.hpp"
#include "attnres/layers.hpp"
#include "attnres/model.hpp"
#include "attnres/model_charts.hpp"
#include "attnres/model_config.hpp"
#include "attnres/paper_reference.hpp"
#include "attnres/report.hpp"
#include "attnres/sweep.hpp"
#include "lesson_model.hpp"
#include "training_view.hpp"
#include "view_kit.hpp"

namespace attnres::gui {

namespace {

// How a view names a residual scheme it runs on the chosen model (describe()): the model's own
// scheme is "trained Full AttnRes"; another scheme on a trained or loaded model's weights says
// whose weights they are; on the random model the scheme's name alone.
std::string scheme_label(const AttnResConfig& scheme, const ModelConfig& model,
                         const std::string& origin) {
  std::string label = scheme.describe();
  if (origin.empty()) return label;
  if (scheme == model.attn_res) return origin + " " + label;
  label += " on the ";
  label += origin;
  label += " ";
  label += model.attn_res.describe();
  label += " model";
  return label;
}

// ------------------------------------------------------------------ cost explorer

// ------------------------------------------------------------------ views on a model

// The scheme pickers of the model views (docs/schemes.md "Comparing schemes"): the cost
// explorer's named schemes (named_scheme_picker, one list for the whole lab) after these two
// entries; a typed spec such as "full:heads=4,gate=sigmoid" is read as parse_scheme_spec reads it.
constexpr const char* kOwnScheme = "@own";  // the chosen model's own scheme
constexpr const char* kNoScheme = "@none";  // "compare with": nothing

QComboBox* model_scheme_picker(bool compare) {
  QComboBox* combo = named_scheme_picker("");
  combo->insertItem(0, "model's own", QString(kOwnScheme));
  combo->setItemData(0, "the scheme the model was trained with (the random model: Full AttnRes)",
                     Qt::ToolTipRole);
  if (compare) {
    combo->insertItem(0, "none", QString(kNoScheme));
    combo->setItemData(0, "show one scheme only", Qt::ToolTipRole);
  }
  combo->setCurrentIndex(0);
  combo->setEditable(true);
  combo->setInsertPolicy(QComboBox::NoInsert);
  combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  combo->setMinimumContentsLength(16);
  // A long entry shows its start (the line edit would scroll to its end).
  QObject::connect(combo, &QComboBox::currentIndexChanged, combo,
                   [combo] { combo->lineEdit()->setCursorPosition(0); });
  combo->setToolTip(
      "A named scheme (the cost explorer's list), or type a spec such as full:heads=4,gate=sigmoid "
      "or "
      "mhc:streams=2 and press Enter (docs/schemes.md). The model's weights are converted: shared "
      "tensors kept, new ones at their start values.");
  return combo;
}

// What a picker holds: the data of the entry its text names, else the typed text (a spec).
std::string picked_scheme(const QComboBox* combo, const char* when_empty) {
  const QString text = combo->currentText().trimmed();
  if (text.isEmpty()) return when_empty;
  const int index = combo->findText(text);
  return index >= 0 ? combo->itemData(index).toString().toStdString() : text.toStdString();
}

// The sizes named schemes are made for on this model: its L and d, Block's S from the view's
// spin box (a Block model's own S), mHC's m = 4.
CostInputs model_scheme_sizes(const ModelConfig& model, int block_size) {
  CostInputs in;
  in.sublayers = model.sublayers();
  in.d_model = model.hidden_size;
  in.block_size = std::clamp(block_size, 1, std::max(1, model.sublayers()));
  in.streams = 4;
  if (auto problem = try_resolve_cost_inputs(in)) throw Error(problem->message);
  return in;
}

// A picked scheme resolved against the model: its settings, its label and the weights read with it
// (convert_scheme; the model itself for its own scheme). Errors name the picker and the text.
struct SchemeOnModel {
  AttnResConfig scheme;
  std::string label;  // scheme_label: the scheme and whose weights
  std::string name;   // for chart legends: describe(), "trained ..." for the model's own
  ModelWeights<double> model;
};

SchemeOnModel scheme_on_model(const std::string& pick, const char* picker,
                              const ModelWeights<double>& model,
                              const LessonModel::Snapshot& snapshot) {
  SchemeOnModel out;
  if (pick == kOwnScheme) {
    out.scheme = model.config.attn_res;
  } else {
    std::string where = picker;
    where += " '";
    where += pick;
    where += "'";
    try {
      out.scheme = parse_scheme_spec(pick, model_scheme_sizes(model.config, snapshot.block_size));
    } catch (const Error& error) {
      throw Error(where + ": " + error.what());
    }
    ModelConfig config = model.config;
    config.attn_res = out.scheme;
    config.validate(where);  // e.g. heads that do not divide d, S > L
  }
  out.label = scheme_label(out.scheme, model.config, snapshot.origin);
  out.name = out.scheme == model.config.attn_res
                 ? scheme_label(out.scheme, model.config, snapshot.origin)
                 : out.scheme.describe();
  out.model = out.scheme == model.config.attn_res ? model : convert_scheme(model, out.scheme);
  return out;
}

// One forward pass of a model view (the fast engine hands other schemes to the reference).
ForwardTrace scheme_trace(const ModelWeights<double>& model, const std::vector<int>& tokens,
                          Progress progress, bool mixing) {
  ForwardOptions options;
  options.progress = std::move(progress);
  options.record_mixing = mixing;
  return engine_forward(model, tokens, options, EngineOptions{}).trace;
}

// A scheme a view shows: its label and trace.
struct ShownScheme {
  std::string label;
  ForwardTrace trace;
};

class ModelView : public View {
 public:
  ModelView(std::string name, QString title, const ViewHost& host)
      : View(std::move(name), std::move(title), host) {
    if (host.lesson == nullptr) own_lesson_ = std::make_unique<LessonModel>();
    lesson_ = host.lesson != nullptr ? host.lesson : own_lesson_.get();
  }
  ~ModelView() override {
    // A panel this view holds goes with the view; the lesson model must not point at its slot.
    if (own_lesson_ == nullptr && lesson_->slot() == slot_) lesson_->panel()->setParent(nullptr);
  }
  LessonModel& lesson() const { return *lesson_; }

 protected:
  // The lesson model's panel (shared, moved here when this view is shown) above the view's own
  // form: the two scheme pickers, then what the view adds.
  QWidget* make_inputs(QFormLayout*& form) {
    auto* inputs = new QWidget;
    auto* column = new QVBoxLayout(inputs);
    column->setContentsMargins(0, 0, 0, 0);
    slot_ = new QWidget;
    slot_->setObjectName("lesson_slot");
    auto* slot_layout = new QVBoxLayout(slot_);
    slot_layout->setContentsMargins(0, 0, 0, 0);
    slot_->setMinimumWidth(
        lesson_->panel()->minimumSizeHint().width());  // the panel may move here later
    column->addWidget(slot_);
    auto* own = new QWidget;
    form = new QFormLayout(own);
    form->setContentsMargins(6, 0, 6, 0);
    column->addWidget(own);
    column->addStretch(1);
    scheme_ = model_scheme_picker(false);
    scheme_->setObjectName("scheme");
    compare_ = model_scheme_picker(true);
    compare_->setObjectName("compare");
    form->addRow("scheme", scheme_);
    form->addRow("compare with", compare_);
    if (lesson_->slot() == nullptr) lesson_->show_in(slot_);
    lesson_->subscribe([this] { lesson_changed(); });
    show_own_scheme();
    return inputs;
  }
  // The inputs of this view whose changes recompute it (the lesson model's come by subscription).
  std::vector<QWidget*> model_inputs() const { return {scheme_, compare_}; }
  struct Picks {
    std::string scheme, compare;  // specs, kOwnScheme or kNoScheme
    bool comparing() const { return compare != kNoScheme; }
  };
  Picks picks() const {
    return {picked_scheme(scheme_, kOwnScheme), picked_scheme(compare_, kNoScheme)};
  }
  // The schemes of a run, resolved and converted before any forward pass (a bad spec fails fast).
  static std::vector<SchemeOnModel> picked_models(const Picks& picks,
                                                  const ModelWeights<double>& model,
                                                  const LessonModel::Snapshot& snapshot) {
    std::vector<SchemeOnModel> out;
    out.push_back(scheme_on_model(picks.scheme, "scheme", model, snapshot));
    if (picks.comparing())
      out.push_back(scheme_on_model(picks.compare, "compare with", model, snapshot));
    return out;
  }
  // The "model's own" entries name the chosen model's scheme.
  void show_own_scheme() {
    const QString own =
        QString::fromStdString(std::string("model's own: ") + lesson_->own_scheme().describe());
    for (QComboBox* picker : {scheme_, compare_}) {
      picker->setItemText(picker->findData(QString(kOwnScheme)), own);
      picker->lineEdit()->setCursorPosition(0);
    }
  }
  // The lesson model changed: recompute now when this view is on screen (or the window is not,
  // as in tests and screenshots); a hidden view of a shown window recomputes when it is shown.
  void lesson_changed() {
    show_own_scheme();
    if (!isVisible() && window()->isVisible()) {
      dirty_ = true;
      set_stale("not current: the lesson model changed (shown when this tab opens)");
      return;
    }
    recompute();
  }
  void showEvent(QShowEvent* event) override {
    View::showEvent(event);
    lesson_->show_in(slot_);
    if (dirty_) {
      dirty_ = false;
      recompute();
    }
  }
  // The field behind an error of this view's runs.
  std::vector<QWidget*> fields_for_error(const std::string& message) const override {
    if (message.rfind("tokens:", 0) == 0) return {lesson_->tokens};
    if (message.rfind("scheme '", 0) == 0) return {scheme_};
    if (message.rfind("compare with '", 0) == 0) return {compare_};
    return {};
  }
  LessonModel* lesson_ = nullptr;
  std::unique_ptr<LessonModel> own_lesson_;  // only without a main window's
  QWidget* slot_ = nullptr;
  bool dirty_ = false;
  QComboBox *scheme_ = nullptr, *compare_ = nullptr;
};

class DepthAttentionView : public ModelView {
 public:
  explicit DepthAttentionView(const ViewHost& host)
      : ModelView("depth-attention", "Depth attention", host) {
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
    auto* column = new QVBoxLayout(content);
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
    const Picks picks = this->picks();
    run("depth attention: forward passes",
        [this, snapshot, picks](const Progress& progress) -> std::function<void()> {
          const auto built = snapshot.build();
          const ModelWeights<double>& model = *built;
          const auto tokens = snapshot.token_ids(model.config);
          const std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
          std::vector<ShownScheme> shown;
          for (std::size_t i = 0; i < runs.size(); ++i) {
            // This view shows alpha only: no mixing matrix.
            shown.push_back({runs[i].label, scheme_trace(runs[i].model, tokens,
                                                         step(progress, i, runs.size()), false)});
          }
          const bool bytes = !snapshot.origin.empty();  // trained and loaded models read text bytes
          return [this, shown = std::move(shown), tokens, bytes]() mutable {
            shown_ = std::move(shown);
            second_->setVisible(shown_.size() > 1);
            {
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
            int heads = 1;
            for (const auto& s : shown_) heads = std::max(heads, trace_heads(s.trace));
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
            redraw();
            clear_error();
          };
        });
  }

  void redraw() {
    const int token = token_->currentIndex() - 1, head = head_->currentIndex() - 1;
    HeatmapWidget* maps[] = {first_, second_};
    for (std::size_t i = 0; i < shown_.size() && i < std::size(maps); ++i) {
      const ForwardTrace& trace = shown_[i].trace;
      maps[i]->set_spec(
          alpha_heatmap(trace, alpha_title(shown_[i].label, trace, token, head), token, head));
    }
  }
  std::vector<HeatmapWidget*> heatmaps() override {
    if (shown_.size() > 1) return {first_, second_};
    return {first_};
  }

 private:
  QComboBox *token_, *head_;
  HeatmapWidget *first_, *second_;
  QLabel* note_;
  std::vector<ShownScheme> shown_;
};

class MagnitudesView : public ModelView {
 public:
  explicit MagnitudesView(const ViewHost& host)
      : ModelView("magnitudes", "Magnitudes by depth", host) {
    QFormLayout* form = nullptr;
    QWidget* inputs = make_inputs(form);
    auto* content = new QWidget;
    auto* column = new QVBoxLayout(content);
    input_panel_ = new ChartPanel;
    output_panel_ = new ChartPanel;
    column->addWidget(input_panel_);
    column->addWidget(output_panel_);
    three_columns(
        this, inputs, content,
        "<h3>Magnitudes by depth</h3><p><b>What you see.</b> The RMS of each sublayer's input "
        "h<sub>l</sub> and output v<sub>l</sub> for the picked scheme and, with <i>compare "
        "with</i>, a "
        "second one on the same weights (the paper's Fig. 5b question). The thin line is the "
        "standard "
        "residual on the same weights, for reference, unless one of the two is standard.</p>"
        "<p><b>Why.</b> The standard residual sums every output with weight one, so h<sub>l</sub> "
        "grows "
        "with depth and each new output matters less; AttnRes forms a convex combination, so the "
        "input "
        "stays on the scale of a single output. DenseFormer, sigmoid gates and mHC need not.</p>"
        "<p><b>Model.</b> By default the shipped trained Full AttnRes model (docs/training.md); a "
        "curve "
        "marked <i>trained</i> is the scheme it was trained with, the others read the same weights "
        "(shared tensors kept, new ones at their start). The random model brings back the spin "
        "boxes.</p><p><b>Try:</b> compare with standard; the trained standard model with Full; "
        "mHC; "
        "the random model with more layers; query std 0 (means) against 1.</p>");
    on_change(this, model_inputs(), [this] { recompute(); });
  }

  void recompute() override {
    const auto snapshot = lesson_->snapshot();
    const Picks picks = this->picks();
    run("magnitudes: forward passes",
        [this, snapshot, picks](const Progress& progress) -> std::function<void()> {
          const auto built = snapshot.build();
          const ModelWeights<double>& model = *built;
          const auto tokens = snapshot.token_ids(model.config);
          std::vector<SchemeOnModel> runs = picked_models(picks, model, snapshot);
          const std::size_t picked = runs.size();
          if (std::none_of(runs.begin(), runs.end(), [](const SchemeOnModel& r) {
                return r.scheme.mode == ResidualMode::standard;
              })) {
            SchemeOnModel reference;
            reference.name = reference.scheme.describe() + " (reference)";
            reference.model = convert_scheme(model, reference.scheme);
            runs.push_back(std::move(reference));
          }
          std::vector<ForwardTrace> traces;
          for (std::size_t m = 0; m < runs.size(); ++m) {
            traces.push_back(
                scheme_trace(runs[m].model, tokens, step(progress, m, runs.size()), false));
          }
          std::vector<MagnitudeCurve> curves;
          for (std::size_t m = 0; m < runs.size(); ++m)
            curves.push_back({runs[m].name, &traces[m], m >= picked});
          // Legends name the schemes; the titles say whose weights (a trained or loaded model's).
          const std::string weights =
              snapshot.origin.empty()
                  ? std::string()
                  : snapshot.origin + " " + model.config.attn_res.describe() + " model";
          const std::array<ChartSpec, 2> figures = magnitude_charts(curves, weights);
          const ChartSpec& inputs = figures[0];
          const ChartSpec& outputs = figures[1];
          return [this, inputs, outputs] {
            input_panel_->set_spec(inputs);
            output_panel_->set_spec(outputs);
            clear_error();
          };
        });
  }
  std::vector<ChartSpec> charts() const override {
    return {input_panel_->spec(), output_panel_->spec()};
  }

 private:
  ChartPanel *input_panel_, *output_panel_;
};

// ------------------------------------------------------------------ the rank taxonomy (Duality)

// The RMS of the model's pseudo-queries, or 0.5 when it has none (or all zero): the spread at which
// the taxonomy draws the depth parameters a scheme adds.
double depth_parameter_sigma(const ModelWeights<double>& model) {
  const double rms = pseudo_query_rms(model);
  return rms > 0.0 ? rms : 0.5;
}

// `model` read with `scheme`: its depth parameters kept where the model has them (same name and
// shape) and drawn where it does not, N(0, sigma²) (DenseFormer weights 1 + N(0, sigma²)), so that
// a scheme the model was not trained with is not at its start (where DenseFormer and mHC are the
// standard residual). `parameters` says which are whose.
ModelWeights<double> with_drawn_parameters(const ModelWeights<double>& model,
                                           const AttnResConfig& scheme, double sigma,
                                           std::uint64_t seed, std::string& parameters) {
  ModelWeights<double> out = convert_scheme(model, scheme);
  parameters = "none";
  if (scheme.mode == ResidualMode::standard || scheme.mode == ResidualMode::rescaled) return out;
  std::map<std::string, std::vector<std::int64_t>> own;
  for_each_tensor(model, [&](const TensorView& tensor) {
    if (!tensor.attn_res || model.has_attn_res_tensors) own.emplace(tensor.name, tensor.shape);
  });
  const ModelWeights<double> drawn =
      random_model(out.config, {.seed = seed, .weight_std = 0.02, .query_std = sigma});
  std::map<std::string, const double*> drawn_data;
  for_each_tensor(drawn,
                  [&](const TensorView& tensor) { drawn_data.emplace(tensor.name, tensor.data); });
  std::vector<std::pair<std::string, bool>> kinds;  // (kind, drawn), in tensor order
  for_each_tensor(out, [&](const TensorVisit& tensor) {
    const char* kind = depth_mixing_parameter_kind(tensor.name);
    if (kind == nullptr) return;
    const auto it = own.find(tensor.name);
    const bool from_model = it != own.end() && it->second == tensor.shape;
    if (!from_model) {
      const double* source = drawn_data.at(tensor.name);
      std::copy(source, source + tensor.element_count(), tensor.data);
    }
    auto entry =
        std::find_if(kinds.begin(), kinds.end(), [kind](const auto& k) { return k.first == kind; });
    if (entry == kinds.end()) {
      kinds.emplace_back(kind, !from_model);
    } else {
      entry->second = entry->second || !from_model;
    }
  });
  if (kinds.empty()) {
    if (scheme.mode == ResidualMode::mhc) parameters = "biases at their start";
    return out;
  }
  parameters.clear();
  for (const auto& [kind, was_drawn] : kinds) {
    if (!parameters.empty()) parameters += "; ";
    parameters += was_drawn ? "drawn " : "model's ";
    parameters += kind;
    if (was_drawn)
      parameters += scheme.mode == ResidualMode::denseformer ? " 1 + N(0, σ²)" : " N(0, σ²)";
  }
  return out;
}

// One row of the taxonomy table: ranks computed from a forward pass's mixing matrices, beside the
// bound the scheme must respect.
struct TaxonomyRow {
  std::string scheme, parameters, rule, detail;
  int mean_rank = 0;   // max over cuts, token-mean M
  int token_rank = 0;  // max over cuts and tokens
  int bound = 0;       // max over cuts
  bool mean_bounded = true;
  bool holds = true;  // every cut within its bound
};

TaxonomyRow taxonomy_row(std::string scheme, std::string parameters, const ForwardTrace& trace) {
  TaxonomyRow row{std::move(scheme), std::move(parameters), {}, {}, 0, 0, 0, true, true};
  const RankBound bound = rank_bound(trace);
  row.rule = bound.rule;
  row.detail = bound.detail;
  row.mean_bounded = bound.mean_bounded;
  for (std::size_t k = 0; k < bound.per_cut.size(); ++k) {
    const int mean = k < trace.semiseparable_rank.size() ? trace.semiseparable_rank[k] : 0;
    const int token = k < trace.semiseparable_rank_max.size() ? trace.semiseparable_rank_max[k] : 0;
    row.mean_rank = std::max(row.mean_rank, mean);
    row.token_rank = std::max(row.token_rank, token);
    row.bound = std::max(row.bound, bound.per_cut[k]);
    if (token > bound.per_cut[k] || (bound.mean_bounded && mean > bound.per_cut[k]))
      row.holds = false;
  }
  return row;
}

// The reference rows: every kind of scheme at this model's size (Block at the model's S, else 4).
std::vector<AttnResConfig> taxonomy_schemes(const ModelConfig& model) {
  std::vector<AttnResConfig> schemes(7);
  schemes[0].mode = ResidualMode::standard;
  schemes[1].mode = ResidualMode::full;
  schemes[2].mode = ResidualMode::block;
  schemes[2].block_size = model.attn_res.mode == ResidualMode::block
                              ? model.attn_res.block_size
                              : std::min(4, model.sublayers());
  schemes[3].mode = ResidualMode::denseformer;
  schemes[4].mode = ResidualMode::rescaled;
  schemes[5].mode = ResidualMode::mhc;
  schemes[5].streams = 2;
  schemes[6].mode = ResidualMode::mhc;
  schemes[6].streams = 4;
  return schemes;
}

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
          const std::vector<AttnResConfig> references = taxonomy_schemes(model.config);
          const std::size_t passes = runs.size() + references.size();
          std::vector<ShownScheme> shown;
          std::vector<TaxonomyRow> rows;
          const char* roles[] = {"scheme ▸ ", "compare ▸ "};
          for (std::size_t i = 0; i < runs.size(); ++i) {
            shown.push_back({runs[i].label,
                             scheme_trace(runs[i].model, tokens, step(progress, i, passes), true)});
            rows.push_back(taxonomy_row(std::string(roles[i]) + runs[i].scheme.describe(),
                                        "as shown above", shown.back().trace));
          }
          const double sigma = depth_parameter_sigma(model);
          for (std::size_t i = 0; i < references.size(); ++i) {
            std::string parameters;
            const auto drawn = with_drawn_parameters(model, references[i], sigma,
                                                     snapshot.random.seed + 1000, parameters);
            const ForwardTrace trace =
                scheme_trace(drawn, tokens, step(progress, runs.size() + i, passes), true);
            rows.push_back(taxonomy_row(references[i].describe(), std::move(parameters), trace));
          }
          // The sequence side: one head's attention in the chosen layer, on that layer's real input
          // under the picked scheme (a reference pass that records every sublayer's input h).
          const int shown_layer = std::min(layer, model.config.num_hidden_layers - 1);
          std::vector<Eigen::MatrixXd> layer_inputs;
          ForwardOptions capture;
          capture.record_mixing = false;
          capture.sublayer_inputs = &layer_inputs;
          capture.progress = check_only(progress);
          forward(runs[0].model, tokens, capture);
          const int shown_head = std::min(head, model.config.num_attention_heads - 1);
          const Eigen::MatrixXd attention_d =
              attention_probabilities(runs[0].model, shown_layer, shown_head,
                                      layer_inputs.at(static_cast<std::size_t>(2 * shown_layer)));
          // The figures, built by the core (attnres forward --chart draws the same ones).
          std::vector<HeatmapSpec> mixing;
          std::vector<const ForwardTrace*> depth_traces;
          for (const auto& one : shown) {
            mixing.push_back(mixing_heatmap(one.trace, one.label));
            depth_traces.push_back(&one.trace);
          }
          ChartSpec ranks = depth_rank_chart(depth_traces);
          HeatmapSpec sequence = sequence_attention_heatmap(attention_d, shown_layer, shown_head);
          HeatmapSpec running = running_sum_heatmap(static_cast<int>(attention_d.rows()));
          ChartSpec sequence_ranks = sequence_rank_chart(attention_d);
          char text[400];
          std::snprintf(text, sizeof text,
                        "Semiseparable rank of the depth mixing matrix M by forward passes on "
                        "these weights (L = %d, "
                        "T = %d tokens), the largest over the cuts k = 1..L. Depth parameters a "
                        "scheme adds are drawn "
                        "with σ = %.3g (the model's query RMS, else 0.5).",
                        model.config.sublayers(), static_cast<int>(tokens.size()), sigma);
          std::string caption = text;
          if (std::any_of(rows.begin(), rows.end(),
                          [](const TaxonomyRow& row) { return !row.mean_bounded; })) {
            caption +=
                " *: the token mean of input-dependent mHC matrices is not bounded by m; each "
                "token's M is.";
          }
          return
              [this, shown = std::move(shown), rows = std::move(rows), mixing = std::move(mixing),
               ranks = std::move(ranks), sequence = std::move(sequence),
               running = std::move(running), sequence_ranks = std::move(sequence_ranks),
               caption = std::move(caption)]() mutable {
                shown_ = std::move(shown);
                HeatmapWidget* maps[] = {depth_, depth_b_};
                for (std::size_t i = 0; i < mixing.size() && i < std::size(maps); ++i)
                  maps[i]->set_spec(std::move(mixing[i]));
                depth_b_->setVisible(shown_.size() > 1);
                ranks_->set_spec(ranks);
                sequence_->set_spec(std::move(sequence));
                running_->set_spec(std::move(running));
                sequence_ranks_->set_spec(sequence_ranks);
                caption_->setText(QString::fromStdString(caption));
                fill_taxonomy(rows);
                clear_error();
              };
        });
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

View* make_depth_attention_view(const ViewHost& host) {
  return new DepthAttentionView(host);
}
View* make_magnitudes_view(const ViewHost& host) {
  return new MagnitudesView(host);
}
View* make_duality_view(const ViewHost& host) {
  return new DualityView(host);
}

}  // namespace attnres::gui
