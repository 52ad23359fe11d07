// The named schemes (docs/scheme-costs.md "Named schemes"): the modes and the paper's Table 4
// ablations in table order, what each changes, the AttnResConfig a name stands for at given
// sizes, and scheme spec strings "NAME[:key=value,...]" both ways (parse_scheme_spec,
// scheme_spec). The costs of a scheme are in scheme_cost.cpp.
#include "named_schemes.hpp"

#include <algorithm>
#include <limits>

#include "attnres/format.hpp"

namespace attnres {

namespace {

// The depth-attention heads of the *_multihead ablations: 16 when 16 divides d, else the largest
// divisor of d below 16.
int multihead_heads(std::int64_t d) {
  for (int h = 16; h > 1; --h) {
    if (d % h == 0) return h;
  }
  return 1;
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ", ";
    out += word;
  }
  return out;
}

std::string with_hint(std::string message, const std::string& word,
                      const std::vector<std::string>& candidates) {
  const std::string hint = did_you_mean(word, candidates);
  if (!hint.empty()) {
    message += " (did you mean '";
    message += hint;
    message += "'?)";
  }
  return message;
}

const std::vector<std::string>& spec_keys() {
  static const std::vector<std::string> keys = {
      "block_size",   "gate",   "key_norm", "window",  "heads",
      "query_source", "mixing", "streams",  "dynamic", "sinkhorn_iterations"};
  return keys;
}

// The named schemes (docs/scheme-costs.md "Named schemes"), in table order.
enum class Variant {
  none,
  static_mhc,
  sigmoid,
  sigmoid_normalized,
  no_key_norm,
  window,
  multihead,
  input_query,
  scalars
};
struct NamedScheme {
  const char* name;
  ResidualMode mode;
  Variant variant;
  const char* summary;
};
constexpr NamedScheme kNamedSchemes[] = {
    {"standard", ResidualMode::standard, Variant::none, "standard residual h <- h + f(h)"},
    {"full", ResidualMode::full, Variant::none,
     "Full AttnRes: every earlier output is a source (paper defaults)"},
    {"block", ResidualMode::block, Variant::none,
     "Block AttnRes: block summaries are the sources (paper defaults)"},
    {"denseformer", ResidualMode::denseformer, Variant::none,
     "DenseFormer: learned unnormalised weights over every earlier output"},
    {"rescaled", ResidualMode::rescaled, Variant::none,
     "rescaled residual: the running mean of the outputs"},
    {"mhc", ResidualMode::mhc, Variant::none,
     "mHC: m streams, dynamic coefficients, Sinkhorn-projected mixing"},
    {"mhc_static", ResidualMode::mhc, Variant::static_mhc,
     "mHC with static coefficients (biases only)"},
    {"full_sigmoid", ResidualMode::full, Variant::sigmoid,
     "Full AttnRes, sigmoid gate (unnormalised)"},
    {"full_sigmoid_normalized", ResidualMode::full, Variant::sigmoid_normalized,
     "Full AttnRes, sigmoid gate divided by its sum"},
    {"full_no_key_norm", ResidualMode::full, Variant::no_key_norm,
     "Full AttnRes scoring the raw sources (no key norm)"},
    {"full_window", ResidualMode::full, Variant::window,
     "Full AttnRes reading the embedding and the last 8 outputs"},
    {"full_multihead", ResidualMode::full, Variant::multihead,
     "Full AttnRes with 16 depth-attention heads (or the largest divisor of d below 16)"},
    {"full_input_query", ResidualMode::full, Variant::input_query,
     "Full AttnRes with a query computed from the latest source"},
    {"full_scalars", ResidualMode::full, Variant::scalars,
     "Full AttnRes with learned input-independent logits"},
    {"block_sigmoid", ResidualMode::block, Variant::sigmoid,
     "Block AttnRes, sigmoid gate (unnormalised)"},
    {"block_sigmoid_normalized", ResidualMode::block, Variant::sigmoid_normalized,
     "Block AttnRes, sigmoid gate divided by its sum"},
    {"block_no_key_norm", ResidualMode::block, Variant::no_key_norm,
     "Block AttnRes scoring the raw sources (no key norm)"},
    {"block_multihead", ResidualMode::block, Variant::multihead,
     "Block AttnRes with 16 depth-attention heads (or the largest divisor of d below 16)"},
    {"block_input_query", ResidualMode::block, Variant::input_query,
     "Block AttnRes with a query computed from the latest source"},
    {"block_scalars", ResidualMode::block, Variant::scalars,
     "Block AttnRes with learned input-independent logits"},
};

const NamedScheme* find_named(const std::string& name) {
  for (const auto& entry : kNamedSchemes) {
    if (name == entry.name) return &entry;
  }
  return nullptr;
}

AttnResConfig make_named(const NamedScheme& entry, const CostInputs& in) {
  AttnResConfig c;
  c.mode = entry.mode;
  if (c.mode == ResidualMode::block) {
    c.block_size =
        in.block_size <= std::numeric_limits<int>::max() ? static_cast<int>(in.block_size) : 0;
  }
  if (c.mode == ResidualMode::mhc) {
    c.streams =
        static_cast<int>(std::min<std::int64_t>(in.streams, std::numeric_limits<int>::max()));
  }
  switch (entry.variant) {
    case Variant::none:
      break;
    case Variant::static_mhc:
      c.dynamic = false;
      break;
    case Variant::sigmoid:
      c.gate = DepthGate::sigmoid;
      break;
    case Variant::sigmoid_normalized:
      c.gate = DepthGate::sigmoid_normalized;
      break;
    case Variant::no_key_norm:
      c.key_norm = false;
      break;
    case Variant::window:
      c.window = 8;
      break;  // the paper's "W = 1 + 8"
    case Variant::multihead:
      c.heads = multihead_heads(in.d_model);
      break;
    case Variant::input_query:
      c.query_source = QuerySource::input;
      break;
    case Variant::scalars:
      c.mixing = DepthMixing::scalars;
      break;
  }
  return c;
}

// The named scheme of each kSchemeIoKeys row, looked up once.
const std::array<const NamedScheme*, kSchemeIoKeyCount>& scheme_io_entries() {
  static const std::array<const NamedScheme*, kSchemeIoKeyCount> entries = [] {
    std::array<const NamedScheme*, kSchemeIoKeyCount> out{};
    for (std::size_t i = 0; i < kSchemeIoKeyCount; ++i)
      out[i] = find_named(kSchemeIoKeys[i].scheme);
    return out;
  }();
  return entries;
}

}  // namespace

namespace detail {

AttnResConfig scheme_of_io_key(std::size_t index, const CostInputs& resolved) {
  return make_named(*scheme_io_entries()[index], resolved);
}

}  // namespace detail

const std::vector<std::string>& scheme_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : kNamedSchemes) out.emplace_back(entry.name);
    return out;
  }();
  return names;
}

std::string scheme_summary(const std::string& name) {
  const NamedScheme* entry = find_named(name);
  return entry ? entry->summary : "";
}

AttnResConfig named_scheme(const std::string& name, const CostInputs& in) {
  const NamedScheme* entry = find_named(name);
  if (!entry) {
    std::string message = with_hint("unknown scheme '" + name + "'", name, scheme_names());
    message += "; expected one of: ";
    message += join(scheme_names());
    throw CostInputError("scheme", message);
  }
  return make_named(*entry, in);
}

AttnResConfig parse_scheme_spec(const std::string& spec, const CostInputs& in) {
  const auto colon = spec.find(':');
  AttnResConfig c = named_scheme(spec.substr(0, colon), in);
  if (colon == std::string::npos) return c;
  const std::string items = spec.substr(colon + 1);
  if (items.empty()) {
    throw CostInputError(
        "scheme", "'" + spec + "' has nothing after ':' (expected NAME:key=value[,key=value...])");
  }
  std::vector<std::string> seen;
  std::size_t start = 0;
  while (start <= items.size()) {
    const std::size_t comma = std::min(items.find(',', start), items.size());
    const std::string item = items.substr(start, comma - start);
    start = comma + 1;
    const auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw CostInputError(
          "scheme", "'" + item + "' in '" + spec +
                        "' is not key=value (expected e.g. block:gate=sigmoid,block_size=4)");
    }
    const std::string key = item.substr(0, equals), value = item.substr(equals + 1);
    if (std::find(spec_keys().begin(), spec_keys().end(), key) == spec_keys().end()) {
      std::string message =
          with_hint("unknown key '" + key + "' in '" + spec + "'", key, spec_keys());
      message += "; expected one of: ";
      message += join(spec_keys());
      throw CostInputError("scheme", message);
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      throw CostInputError(key, key + " is given twice in '" + spec + "'");
    }
    seen.push_back(key);
    auto integer = [&]() {
      std::size_t used = 0;
      long long number = 0;
      try {
        number = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || number < std::numeric_limits<int>::min() ||
          number > std::numeric_limits<int>::max()) {
        throw CostInputError(key, key + " must be an integer, got '" + value + "'");
      }
      return static_cast<int>(number);
    };
    auto boolean = [&]() {
      if (value == "true" || value == "on") return true;
      if (value == "false" || value == "off") return false;
      throw CostInputError(key, key + " must be true or false (or on / off), got '" + value + "'");
    };
    try {
      if (key == "block_size") {
        // 0 would mean "the inputs' S" silently: a key that is given must say a size.
        c.block_size = integer();
        if (c.block_size < 1 || c.block_size > in.sublayers) {
          throw CostInputError(
              key, "block_size must be between 1 and L = " + std::to_string(in.sublayers) +
                       " sublayers, got " + value + " (in '" + spec + "')");
        }
      }
      if (key == "gate") c.gate = parse_depth_gate(value, key);
      if (key == "key_norm") c.key_norm = boolean();
      if (key == "window") c.window = integer();
      if (key == "heads") c.heads = integer();
      if (key == "query_source") c.query_source = parse_query_source(value, key);
      if (key == "mixing") c.mixing = parse_depth_mixing(value, key);
      if (key == "streams") c.streams = integer();
      if (key == "dynamic") c.dynamic = boolean();
      if (key == "sinkhorn_iterations") c.sinkhorn_iterations = integer();
    } catch (const CostInputError&) {
      throw;
    } catch (const Error& error) {
      throw CostInputError(key, error.what());
    }
  }
  return c;
}

std::string scheme_spec(const AttnResConfig& c) {
  const AttnResConfig defaults;
  std::vector<std::string> items;
  auto add = [&items](const std::string& key, const std::string& value) {
    std::string item = key;
    item += '=';
    item += value;
    items.push_back(std::move(item));
  };
  if (c.mode == ResidualMode::block && c.block_size > 0)
    add("block_size", std::to_string(c.block_size));
  if (c.gate != defaults.gate) add("gate", to_string(c.gate));
  if (c.key_norm != defaults.key_norm) add("key_norm", c.key_norm ? "true" : "false");
  if (c.window != defaults.window) add("window", std::to_string(c.window));
  if (c.heads != defaults.heads) add("heads", std::to_string(c.heads));
  if (c.query_source != defaults.query_source) add("query_source", to_string(c.query_source));
  if (c.mixing != defaults.mixing) add("mixing", to_string(c.mixing));
  if (c.mode == ResidualMode::mhc || c.streams != defaults.streams)
    add("streams", std::to_string(c.streams));
  if (c.dynamic != defaults.dynamic) add("dynamic", c.dynamic ? "true" : "false");
  if (c.sinkhorn_iterations != defaults.sinkhorn_iterations) {
    add("sinkhorn_iterations", std::to_string(c.sinkhorn_iterations));
  }
  std::string out = to_string(c.mode);
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += i == 0 ? ':' : ',';
    out += items[i];
  }
  return out;
}

}  // namespace attnres
