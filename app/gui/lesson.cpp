#include "lesson.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QTabBar>
#include <QTabWidget>

#include "attnres/cost_input_fields.hpp"
#include "attnres/error.hpp"
#include "explorer_state.hpp"
#include "lesson_model.hpp"
#include "main_window.hpp"

namespace attnres::gui {

namespace {

// A step's input: a missing view or input is an error (the step would show something else than
// its text says), not a step that silently does nothing.
template <class Widget>
Widget* input(MainWindow& window, const std::string& view, const char* name) {
  View* v = window.view(view);
  auto* widget = v != nullptr ? v->findChild<Widget*>(name) : nullptr;
  if (widget == nullptr)
    throw Error("lesson: the " + view + " view has no input '" + std::string(name) + "'");
  return widget;
}

void set_int(MainWindow& window, const std::string& view, const char* name, int value) {
  input<QSpinBox>(window, view, name)->setValue(value);
}

// A step of the cost views names the whole state it shows (explorer_state.hpp).
void set_state(MainWindow& window, const std::string& view, const ExplorerState& state) {
  View* v = window.view(view);
  if (v == nullptr || !v->set_state(state))
    throw Error("lesson: the " + view + " view computes from no cost state");
}

// The cost explorer's opening state with L and N as given.
ExplorerState cost_state(std::int64_t sublayers, std::int64_t blocks) {
  ExplorerState state = default_explorer_state();
  CostInputs in = state.model;
  set_cost_input(in, "sublayers", sublayers);
  set_cost_input(in, "blocks", blocks);
  state.model = resolve_cost_inputs(in);
  return state;
}

// The Pipeline view's lesson state at `gbps` GB/s links and m micro-batches.
ExplorerState pipeline_state(double gbps, int microbatches) {
  ExplorerState state = pipeline_lesson_state();
  state.pipeline.link_bandwidth = gbps * 1e9;
  state.pipeline.microbatches = microbatches;
  return state;
}

// The cost explorer's charts page.
void cost_charts(MainWindow& window) {
  input<QTabBar>(window, "cost", "cost_tabs")->setCurrentIndex(0);
}

void set_double(MainWindow& window, const std::string& view, const char* name, double value) {
  input<QDoubleSpinBox>(window, view, name)->setValue(value);
}

// Picks the entry whose data is `data` ("@own", "@none", a named scheme, "naive", ...).
void pick(MainWindow& window, const std::string& view, const char* name, const char* data) {
  auto* combo = input<QComboBox>(window, view, name);
  int index = combo->findData(QString(data));
  if (index < 0) index = combo->findText(QString(data));
  if (index < 0)
    throw Error("lesson: the " + view + " view's '" + name + "' has no entry '" + data + "'");
  combo->setCurrentIndex(index);
  emit combo->activated(index);  // counts even when it was already chosen
}

// The lesson's random model: 4 layers, d = 64, six tokens, seed 1, the given query spread.
void random_lesson_model(MainWindow& window, double query_std, int block_size) {
  LessonModel& lesson = window.lesson();
  lesson.back_to_random();
  lesson.layers->setValue(4);
  lesson.d_model->setValue(64);
  lesson.heads->setValue(4);
  lesson.kv_heads->setValue(2);
  lesson.ffn->setValue(172);
  lesson.vocab->setValue(256);
  lesson.seed->setValue(1);
  lesson.query_std->setValue(query_std);
  lesson.block_size->setValue(block_size);
  if (lesson.tokens->text() != kRandomTokens) {
    lesson.tokens->setText(kRandomTokens);
    emit lesson.tokens->editingFinished();
  }
}

std::vector<LessonStep> make_steps() {
  std::vector<LessonStep> steps;
  steps.push_back(
      {"magnitudes", "Magnitudes: the standard residual grows with depth",
       "The random lesson model (4 layers, d = 64) with query std 0, Full AttnRes with the "
       "standard "
       "residual on the same weights for reference.",
       "The dark grey standard line climbs with depth: every output is added with weight one, "
       "so each new one matters less. Full AttnRes (orange) reads the mean of its sources, not "
       "their sum: its input stays below the scale of one output (a mean of nearly independent "
       "vectors shrinks like 1/sqrt(l)). With zero queries the mean is the sum divided by l and "
       "each sublayer's RMSNorm removes the scale, so the two output curves nearly coincide (its "
       "eps keeps a trace of it): what AttnRes changes comes from its queries (step 3).",
       [](MainWindow& w) {
         random_lesson_model(w, 0.0, 2);
         pick(w, "magnitudes", "scheme", "@own");
         pick(w, "magnitudes", "compare", "@none");
       },
       "magnitudes_input"});
  steps.push_back({"depth-attention", "Depth attention: zero queries read plain means",
                   "The same model, query std 0, one map (Full AttnRes).",
                   "Every row is uniform: with w = 0 the softmax gives each of the l sources 1/l.",
                   [](MainWindow& w) {
                     random_lesson_model(w, 0.0, 2);
                     pick(w, "depth-attention", "scheme", "@own");
                     pick(w, "depth-attention", "compare", "@none");
                   },
                   "depth_attention"});
  steps.push_back({"depth-attention", "Depth attention: queries make the reads selective",
                   "Query std raised from 0 to 2 (drag the slider).",
                   "The rows turn sharp and different from each other: each sublayer picks the few "
                   "earlier outputs "
                   "its query matches.",
                   [](MainWindow& w) { random_lesson_model(w, 2.0, 2); }, "depth_attention"});
  steps.push_back({"depth-attention", "Depth attention: Block with S = 1 is Full",
                   "Compare with Block AttnRes, block size S = 1.",
                   "The two maps are the same: blocks of one sublayer keep every output, so Block "
                   "reads what Full "
                   "reads. Raise S and the columns merge into block summaries.",
                   [](MainWindow& w) {
                     random_lesson_model(w, 2.0, 1);
                     pick(w, "depth-attention", "compare", "block");
                   },
                   ""});
  steps.push_back(
      {"depth-attention", "Depth attention: one read, step by step",
       "Block AttnRes with S = 2, query std 0.05 (small scores: soft weights you can read, none "
       "near 0 or 1), "
       "the read r = 3 (the input of sublayer 4) at token 2, on the page \"one read, step by "
       "step\".",
       "Its three sources (the embedding, the completed block b1 = v1 + v2, the partial sum v3), "
       "the scores w·KeyNorm(v_i), the softmax's max m and denominator l, the weights and their "
       "sum h. Below, the two-phase form: phase 1 over the embedding and b1 (computed once for "
       "the block's reads), phase 2 over the partial sum, merged with m = max(m1, m2): the same "
       "h.",
       [](MainWindow& w) {
         random_lesson_model(w, 0.05, 2);
         pick(w, "depth-attention", "scheme", "block");
         pick(w, "depth-attention", "compare", "@none");
         if (auto* pages = input<QTabWidget>(w, "depth-attention", "depth_pages"))
           pages->setCurrentIndex(1);
         set_int(w, "depth-attention", "walk_read", 3);
         set_int(w, "depth-attention", "walk_token", 2);
       },
       ""});
  steps.push_back(
      {"duality", "Duality: a running sum against attention over depth",
       "Full AttnRes (query std 0.5) compared with the standard residual on the same weights.",
       "Left, the standard residual's M (all ones) and the running sum over tokens: the red box of "
       "the cut k has rank 1 (a running sum, like an RNN). Right, Full AttnRes and one head's "
       "softmax attention: the box reaches min(k, L+1-k) over depth, like attention over a "
       "sequence. Move the cut k and watch the labels.",
       [](MainWindow& w) {
         random_lesson_model(w, 0.5, 2);
         pick(w, "duality", "scheme", "@own");
         pick(w, "duality", "compare", "standard");
       },
       ""});
  steps.push_back(
      {"cost", "Cost explorer: what Full costs",
       "The paper's 128-sublayer model with N = L = 128 blocks (Block at N = L is Full AttnRes).",
       "The dashed marker sits at N = 128: the stored history is Full's (L + 1 = 129 vectors per "
       "token) and the I/O per sublayer is Full's plus Block's bookkeeping of the partial sum "
       "(133 against Full's 129 x d, paper Table 1), far above the standard residual's 3d.",
       [](MainWindow& w) {
         cost_charts(w);
         set_state(w, "cost", cost_state(128, 128));
       },
       "cost_io"});
  steps.push_back(
      {"cost", "Cost explorer: what Block saves", "N = 8 blocks, the paper's choice.",
       "The marker moves to N = 8: a fraction of Full's I/O and history, while the paper's Fig. 6 "
       "losses (red-brown dots, right axis) are already close to Full's.",
       [](MainWindow& w) {
         cost_charts(w);
         pick(w, "cost", "quality_overlay", "paper_fig6");
         set_state(w, "cost", cost_state(128, 8));
       },
       "cost_io"});
  steps.push_back(
      {"pipeline", "Pipeline: the traffic hides at 200 GB/s",
       "The paper's MoE model (27 layers, d = 2304, 8 of 256 experts) on H100s, P = 4, V = 2, m = "
       "8, "
       "the cross-stage cache, links of 200 GB/s.",
       "The AttnRes overhead at the marker lies under the paper's 4 % line (the summary shows it "
       "in green): transfers overlap the compute.",
       [](MainWindow& w) { set_state(w, "pipeline", pipeline_state(200, 8)); },
       "pipeline_overhead_vs_link"});
  steps.push_back(
      {"pipeline", "Pipeline: a slower link exposes it",
       "Link bandwidth lowered from 200 to 50 GB/s.",
       "The overhead at the marker passes the 4 % line (the summary shows it in red): the block "
       "history no longer fits in the compute's shadow.",
       [](MainWindow& w) { set_state(w, "pipeline", pipeline_state(50, 8)); },
       "pipeline_overhead_vs_link"});
  steps.push_back({"pipeline", "Pipeline: more micro-batches hide it again",
                   "Micro-batches m raised from 8 to 32 (at 50 GB/s).",
                   "The overhead drops back under 4 %: more micro-batches give the transfers more "
                   "compute to hide "
                   "behind. Switch the cache to naive and it grows again.",
                   [](MainWindow& w) { set_state(w, "pipeline", pipeline_state(50, 32)); },
                   "pipeline_overhead_vs_link"});
  steps.push_back({"scaling", "Scaling law: what it is worth", "Target loss 1.695.",
                   "Block AttnRes reaches the baseline's loss with about 1/1.25 of its compute: a "
                   "1.25x compute "
                   "multiplier near loss 1.69-1.70.",
                   [](MainWindow& w) { set_double(w, "scaling", "target_loss", 1.695); },
                   "scaling_multiplier"});
  return steps;
}

}  // namespace

const std::vector<LessonStep>& lesson_steps() {
  static const std::vector<LessonStep> steps = make_steps();
  return steps;
}

}  // namespace attnres::gui
