// Memory per rank with the device capacity and a fit verdict, and the communication per step of
// every parallel group (rank_memory.hpp, docs/math.md §3.7): the tables of `attnres memory`, of
// `attnres pipeline` and of a report's memory section.
#include <cmath>

#include "attnres/report.hpp"
#include "report_parts.hpp"

namespace attnres {

using detail::num;

ReportTable memory_table(const std::vector<RankMemory>& ranks,
                         const std::vector<std::string>& assumptions, const std::string& where) {
  ReportTable t = typed_table("memory_per_rank", "Memory per rank" + where + ": does it fit?",
                              {{"rank", "rank", Shown::integer},
                               {"weights_bytes", "weights (GB)", Shown::gigabytes},
                               {"gradients_bytes", "gradients (GB)", Shown::gigabytes},
                               {"optimizer_bytes", "optimizer (GB)", Shown::gigabytes},
                               {"activations_bytes", "activations (GB)", Shown::gigabytes},
                               {"attnres_history_bytes", "AttnRes history (GB)", Shown::gigabytes},
                               {"kv_cache_bytes", "KV cache (GB)", Shown::gigabytes},
                               {"logits_bytes", "loss buffers (GB)", Shown::gigabytes},
                               {"reserve_bytes", "reserve (GB)", Shown::gigabytes},
                               {"total_bytes", "total (GB)", Shown::gigabytes},
                               {"capacity_bytes", "capacity (GB)", Shown::gigabytes},
                               {"margin_bytes", "spare (GB, < 0: over)", Shown::gigabytes},
                               {"fits", "fits", Shown::yes_no}});
  for (const RankMemory& m : ranks) {
    const nlohmann::json capacity = m.known_capacity() ? nlohmann::json(m.capacity) : nullptr;
    const nlohmann::json margin = m.known_capacity() ? nlohmann::json(m.margin()) : nullptr;
    const nlohmann::json fits = m.known_capacity() ? nlohmann::json(m.fits()) : nullptr;
    add_row(
        t, {static_cast<std::int64_t>(m.rank), m.weights, m.gradients, m.optimizer, m.activations,
            m.attnres_history, m.kv_cache, m.logits, m.reserve, m.total(), capacity, margin, fits});
  }
  const RankMemory* worst = nullptr;
  for (const RankMemory& m : ranks)
    if (!worst || m.total() > worst->total()) worst = &m;
  std::string note;
  if (worst)
    note = "Largest: rank " + num(static_cast<std::int64_t>(worst->rank)) + ", " +
           fit_verdict(*worst) + ".";
  for (const auto& line : assumptions) note += " " + line + ".";
  note += " (docs/math.md §3.7)";
  t.note = note;
  return t;
}

ReportTable communication_table(const std::vector<CommTerm>& terms) {
  ReportTable t = typed_table("communication", "Communication per training step, one rank",
                              {{"group", "group", Shown::text},
                               {"what", "what", Shown::text},
                               {"ranks", "ranks", Shown::integer},
                               {"link", "link", Shown::text},
                               {"bytes", "bytes per step (GB)", Shown::gigabytes},
                               {"exposed_seconds", "time if not overlapped (s)", Shown::number}});
  for (const CommTerm& c : terms) {
    std::string link = c.intra_node ? "intra_node" : "scale_out";
    if (c.nics > 1) {
      link += " x";
      link += std::to_string(c.nics);
    }
    add_row(t, {c.group, c.what, c.ranks, link, c.bytes, c.seconds});
  }
  t.note =
      "Ring collectives: all-reduce 2(n-1)/n of the buffer, reduce-scatter and all-gather "
      "(n-1)/n, all-to-all (n-1)/n. A group is intra-node when its ranks fit in one NVLink "
      "domain (t innermost, then c, D and P); a ring over nodes runs on the NICs of its ranks in "
      "each node together (scale_out xG). Time at the link bandwidth x efficiency; how much "
      "of it overlaps compute is the step time's question (docs/math.md §3.7).";
  return t;
}

}  // namespace attnres
