#include "attnres/block_layout.hpp"

#include <algorithm>
#include <charconv>
#include <numeric>
#include <sstream>

#include "attnres/checked_math.hpp"
#include "attnres/error.hpp"

namespace attnres {

std::int64_t BlockLayout::sublayers() const {
  std::int64_t sum = 0;
  for (std::int64_t size : sizes) sum = checked_add(sum, size, "block layout sublayers");
  return sum;
}

std::int64_t BlockLayout::completed_after(std::int64_t e) const {
  std::int64_t end = 0, done = 0;
  for (std::int64_t size : sizes) {
    end += size;
    if (end > e) break;
    ++done;
  }
  return done;
}

bool BlockLayout::equal() const {
  return std::all_of(sizes.begin(), sizes.end(),
                     [this](std::int64_t size) { return size == sizes.front(); });
}

std::string BlockLayout::describe() const {
  if (sizes.empty()) return "(no blocks)";
  if (equal()) return std::to_string(sizes.front()) + " x " + std::to_string(sizes.size());
  std::string text;
  for (std::int64_t size : sizes) text += (text.empty() ? "" : ", ") + std::to_string(size);
  return text;
}

BlockLayout uniform_block_layout(std::int64_t sublayers, std::int64_t block_size) {
  if (sublayers < 1 || block_size < 1 || block_size > sublayers) {
    throw Error("block layout: need 1 <= S <= L, got S = " + std::to_string(block_size) +
                ", L = " + std::to_string(sublayers));
  }
  if ((sublayers + block_size - 1) / block_size > static_cast<std::int64_t>(kMaxListedBlocks)) {
    throw Error("block layout: " + std::to_string((sublayers + block_size - 1) / block_size) +
                " blocks; the layout view and the implementation strategies list at most " +
                std::to_string(kMaxListedBlocks));
  }
  BlockLayout layout;
  for (std::int64_t start = 0; start < sublayers; start += block_size) {
    layout.sizes.push_back(std::min(block_size, sublayers - start));
  }
  return layout;
}

BlockLayout block_layout_of(const CostInputs& resolved) {
  if (!resolved.block_sizes.empty()) return BlockLayout{resolved.block_sizes};
  return uniform_block_layout(resolved.sublayers, resolved.block_size);
}

std::int64_t block_size_from_layers(std::int64_t layers_per_block) {
  return checked_multiply(2, layers_per_block, "block size from layers");
}

std::optional<std::int64_t> layers_per_block(std::int64_t block_size) {
  if (block_size < 2 || block_size % 2 != 0) return std::nullopt;
  return block_size / 2;
}

std::vector<std::int64_t> parse_block_list(const std::string& text, const std::string& where) {
  const std::string expected = "expected block sizes in sublayers separated by commas, e.g. 6,6,4";
  std::vector<std::int64_t> sizes;
  // getline drops an empty last item ("4,4,"): an empty entry wherever it is.
  const auto last = text.find_last_not_of(" \t");
  if (last != std::string::npos && text[last] == ',')
    throw Error(where + ": an empty entry after the last comma (" + expected + ")");
  std::stringstream stream(text);
  for (std::string word; std::getline(stream, word, ',');) {
    const auto first = word.find_first_not_of(" \t");
    if (first == std::string::npos) throw Error(where + ": an empty entry (" + expected + ")");
    word = word.substr(first, word.find_last_not_of(" \t") - first + 1);
    std::int64_t value = 0;
    const char* end = word.data() + word.size();
    const auto [ptr, ec] = std::from_chars(word.data(), end, value);
    if (ec != std::errc() || ptr != end) {
      throw Error(where + ": '" + word + "' is not an integer (" + expected + ")");
    }
    if (value < 1) {
      throw Error(where + ": block size " + word + " must be >= 1 (" + expected + ")");
    }
    sizes.push_back(value);
    if (sizes.size() > kMaxListedBlocks) {
      throw Error(where + ": more than " + std::to_string(kMaxListedBlocks) + " blocks");
    }
  }
  if (sizes.empty()) throw Error(where + ": no block sizes given (" + expected + ")");
  return sizes;
}

std::optional<CostInputProblem> block_list_problem(const std::vector<std::int64_t>& sizes,
                                                   std::int64_t sublayers) {
  if (sizes.empty()) return CostInputProblem{"block_sizes", "the block_sizes list is empty"};
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 1) {
      return CostInputProblem{"block_sizes", "block " + std::to_string(i + 1) + " has size " +
                                                 std::to_string(sizes[i]) + "; sizes must be >= 1"};
    }
    if (sizes[i] > sublayers || sum > sublayers) {
      sum = -1;  // already more than L: stop before any overflow
      break;
    }
    sum += sizes[i];  // at most 2L
  }
  if (sum != sublayers) {
    const std::string total =
        sum < 0 ? "more than " + std::to_string(sublayers) : std::to_string(sum);
    return CostInputProblem{"block_sizes", "block sizes sum to " + total +
                                               " sublayers, but L = " + std::to_string(sublayers) +
                                               " (the list must cover every sublayer once)"};
  }
  return std::nullopt;
}

std::vector<ReadSources> read_sources(const BlockLayout& layout) {
  const std::int64_t L = layout.sublayers();
  std::vector<ReadSources> reads(static_cast<std::size_t>(L + 1));
  reads[0].completed = 1;  // read 0 sees the embedding alone
  std::int64_t start = 1, done = 0;
  for (std::int64_t size : layout.sizes) {
    const std::int64_t end = start + size - 1;
    for (std::int64_t r = start; r <= end; ++r) {
      ReadSources& read = reads[static_cast<std::size_t>(r)];
      read.partial = r != end;  // the block stays open after sublayer r
      read.completed = 1 + done + (r == end ? 1 : 0);
      read.accumulates = r != start;
    }
    ++done;
    start = end + 1;
  }
  return reads;
}

std::int64_t read_source_pairs(const BlockLayout& layout) {
  std::int64_t pairs = 0;
  for (const ReadSources& read : read_sources(layout)) pairs += read.sources();
  return pairs;
}

std::vector<LayoutBlockRow> layout_rows(const BlockLayout& layout, std::int64_t pp,
                                        std::int64_t vpp,
                                        const std::vector<std::int64_t>& chunk_last) {
  const std::int64_t L = layout.sublayers();
  const std::int64_t chunks = checked_multiply(pp, vpp, "pipeline chunks P·V");
  if (pp < 1 || vpp < 1 || chunks > L) {
    throw Error("layout: need 1 <= P·V <= L, got P·V = " + std::to_string(chunks) +
                ", L = " + std::to_string(L));
  }
  const auto last = chunk_last.empty() ? layer_aligned_chunks(L, chunks) : chunk_last;
  if (static_cast<std::int64_t>(last.size()) != chunks || last.back() != L)
    throw Error("layout: the stage layout does not split L = " + std::to_string(L) + " into " +
                std::to_string(chunks) + " chunks");
  auto chunk_of = [&](std::int64_t sublayer) {
    return static_cast<std::int64_t>(std::lower_bound(last.begin(), last.end(), sublayer) -
                                     last.begin());
  };
  const auto reads = read_sources(layout);
  std::vector<LayoutBlockRow> rows;
  std::int64_t end = 0;
  for (std::size_t n = 0; n < layout.sizes.size(); ++n) {
    LayoutBlockRow row;
    row.block = static_cast<std::int64_t>(n) + 1;
    row.size = layout.sizes[n];
    row.first_sublayer = end + 1;
    end += row.size;
    row.last_sublayer = end;
    row.first_layer = (row.first_sublayer + 1) / 2;
    row.last_layer = (row.last_sublayer + 1) / 2;
    row.splits_layer = row.first_sublayer % 2 == 0 || row.last_sublayer % 2 == 1;
    // The input of sublayer s is read s - 1.
    row.sources_min = row.sources_max =
        reads[static_cast<std::size_t>(row.first_sublayer - 1)].sources();
    for (std::int64_t s = row.first_sublayer; s <= row.last_sublayer; ++s) {
      const std::int64_t k = reads[static_cast<std::size_t>(s - 1)].sources();
      row.sources_min = std::min(row.sources_min, k);
      row.sources_max = std::max(row.sources_max, k);
    }
    row.first_chunk = chunk_of(row.first_sublayer);
    row.last_chunk = chunk_of(row.last_sublayer);
    row.crosses_stage = row.first_chunk != row.last_chunk;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace attnres
