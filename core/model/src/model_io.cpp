// Loading and saving models: the lab's layout and Kimi K3's Hugging Face layout (docs/interop.md),
// single files or shards, every dtype, memory-mapped.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "attnres/atomic_file.hpp"
#include "attnres/checkpoint_files.hpp"
#include "attnres/error.hpp"
#include "attnres/json_reading.hpp"
#include "attnres/model.hpp"
#include "attnres/output_dir.hpp"
#include "attnres/safetensors.hpp"

namespace attnres {

namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// The lab's AttnRes tensor names and Kimi K3's (docs/interop.md): suffix of the lab's name, K3's
// suffix, whether K3 stores it as a (1, d) row.
struct RenamedSuffix {
  const char* lab;
  const char* k3;
  bool row;
};
constexpr RenamedSuffix kK3Names[] = {
    {".attn_res.query", ".self_attention_res_proj.weight", true},
    {".attn_res.key_norm.weight", ".self_attention_res_norm.weight", false},
    {".mlp_res.query", ".mlp_res_proj.weight", true},
    {".mlp_res.key_norm.weight", ".mlp_res_norm.weight", false},
    {"model.final_res.query", "model.output_attn_res_proj.weight", true},
    {"model.final_res.key_norm.weight", "model.output_attn_res_norm.weight", false}};

// Tensor names that mark a layout the lab reads only through docs/interop.md's mapping.
std::string foreign_layout_hint(const std::string& name) {
  if (name.find("pseudo_query") != std::string::npos ||
      name.find("key_norm_weight") != std::string::npos) {
    return " — a Megatron-LM AttnRes tensor (pseudo_query / key_norm_weight): convert the "
           "checkpoint to the Hugging Face K3 layout first (docs/interop.md \"Megatron-LM\")";
  }
  if (name == "queries" || name.ends_with(".queries")) {
    return " — a nanoGPT-style [2L + 1, d] queries matrix (docs/interop.md \"nanoGPT-style "
           "ports\"): its GPT-2 blocks are not the lab's architecture";
  }
  return "";
}

template <typename Scalar>
bool same_values(const Scalar* a, const Scalar* b, std::int64_t n) {
  return std::equal(a, a + n, b);
}

}  // namespace

std::string checkpoint_summary(const CheckpointReport& report) {
  std::string line;
  switch (report.layout) {
    case CheckpointLayout::lab:
      line = "the lab's layout (attn_res object)";
      break;
    case CheckpointLayout::k3:
      line = "Kimi K3 Hugging Face layout (attn_res_block_size)";
      break;
    case CheckpointLayout::plain:
      line = "plain Hugging Face Llama/Qwen3 (no AttnRes keys: the standard residual)";
      break;
  }
  if (report.sharded)
    line.append(", sharded over ").append(std::to_string(report.files.size())).append(" files");
  for (const auto& [dtype, count] : report.dtypes)
    line.append(", ").append(std::to_string(count)).append(" ").append(dtype);
  return line.append(" tensors (").append(std::to_string(report.tensor_bytes)).append(" bytes)");
}

std::string checkpoint_tensor_name(const std::string& lab_name, CheckpointLayout layout,
                                   bool* row) {
  if (row) *row = false;
  if (layout == CheckpointLayout::lab) return lab_name;
  for (const auto& renamed : kK3Names) {
    const std::string suffix = renamed.lab;
    if (lab_name.ends_with(suffix)) {
      if (row) *row = renamed.row;
      return lab_name.substr(0, lab_name.size() - suffix.size()) + renamed.k3;
    }
  }
  return lab_name;
}

template <typename Scalar>
ModelWeights<Scalar> load_model_as(const fs::path& directory, const Progress& progress,
                                   CheckpointReport* report) {
  const fs::path config_path = directory / "config.json";
  if (!fs::is_directory(directory)) {
    std::error_code error;
    if (!fs::exists(directory, error))
      throw Error("model directory '" + directory.string() + "' does not exist");
    const std::string what = not_a_regular_file(directory);
    throw Error("'" + directory.string() + "' " + (what.empty() ? "is a file" : what) +
                ", not a model directory (expected a directory with config.json and "
                "model.safetensors or model.safetensors.index.json)");
  }
  // A write of this directory cut short (init-model, train) is completed first, and none
  // switches its files while they are read: config.json and the weights are one set.
  const OutputDirectoryReadLock lock(directory);
  const ModelConfig config =
      parse_model_config(read_document(config_path, "a config.json file"), config_path.string());
  // Refuse before allocating anything: the weights at this precision must fit (the files are
  // mapped, not copied).
  const std::uint64_t needed = model_bytes(config, config_path.string(), sizeof(Scalar));
  const std::uint64_t available = available_memory_bytes();
  if (needed > available) {
    throw Error(
        config_path.string() + ": the shapes it declares need " + std::to_string(needed / 1000000) +
        " MB as float" + std::to_string(8 * sizeof(Scalar)) + ", but only " +
        std::to_string(available / 1000000) + " MB of memory is available; refusing to load");
  }
  // The headers first: names and shapes are checked against config.json (a missing, misshapen or
  // stray tensor is refused) before any tensor data is read; then the data, once.
  CheckpointFiles files = CheckpointFiles::open(directory);
  const std::string source = files.source();
  const CheckpointLayout layout = config.layout;

  auto model = allocate_model<Scalar>(config);
  struct Planned {
    const TensorRef<Scalar>* ref;
    const CheckpointFiles::Tensor* tensor;
  };
  std::vector<TensorRef<Scalar>> refs;
  visit_tensors(model, [&](const TensorRef<Scalar>& tensor) { refs.push_back(tensor); });
  std::set<std::string> expected;
  std::vector<std::string> missing_attn_res;
  std::vector<Planned> plan;
  std::size_t present_attn_res = 0;
  bool lm_head_in_file = true;
  for (const auto& tensor : refs) {
    bool row = false;
    const std::string name = checkpoint_tensor_name(tensor.name, layout, &row);
    expected.insert(name);
    const CheckpointFiles::Tensor* found = files.find(name);
    if (found == nullptr) {
      if (tensor.attn_res) {
        missing_attn_res.push_back(name);
        continue;
      }
      if (name == "lm_head.weight" && config.tie_word_embeddings) {
        lm_head_in_file = false;
        continue;
      }
      throw Error(source + ": missing tensor '" + name + "' (expected shape " +
                  shape_text(tensor.shape) + " from " + config_path.string() + ")");
    }
    const std::vector<std::int64_t> shape =
        row ? std::vector<std::int64_t>{1, tensor.shape[0]} : tensor.shape;
    if (found->info->shape != shape) {
      throw Error(found->file->source() + ": tensor '" + name + "' has shape " +
                  shape_text(found->info->shape) + ", expected " + shape_text(shape) + " from " +
                  config_path.string());
    }
    if (tensor.attn_res) ++present_attn_res;
    plan.push_back({&tensor, found});
  }
  for (const auto& [name, tensor] : files.tensors()) {
    if (!expected.count(name) && !name.ends_with(".rotary_emb.inv_freq")) {
      throw Error(tensor.file->source() + ": unexpected tensor '" + name +
                  "' (not part of a Llama/Qwen3 AttnRes model with this config.json" +
                  (layout == CheckpointLayout::lab ? "" : ", in the Kimi K3 layout") + ")" +
                  foreign_layout_hint(name));
    }
  }
  const std::string final_proj = checkpoint_tensor_name("model.final_res.query", layout);
  const bool final_missing = std::find(missing_attn_res.begin(), missing_attn_res.end(),
                                       final_proj) != missing_attn_res.end();
  if (present_attn_res > 0 && !missing_attn_res.empty()) {
    if (layout != CheckpointLayout::lab && final_missing &&
        missing_attn_res.size() == 2) {  // the final read's two tensors, nothing else
      throw Error(source + ": has AttnRes tensors for every layer but no final read ('" +
                  final_proj +
                  "'): a port without the final read, which no scheme of the lab computes "
                  "(docs/interop.md \"Deviations\"); refusing rather than reading it as the "
                  "paper's scheme");
    }
    throw Error(source + ": has some AttnRes tensors but not '" + missing_attn_res.front() + "' (" +
                std::to_string(missing_attn_res.size()) +
                " missing); a model has all of them or none");
  }
  if (present_attn_res > 0 && layout != CheckpointLayout::lab &&
      config.attn_res.mode == ResidualMode::standard) {
    throw Error(source + ": holds AttnRes tensors (e.g. '" +
                checkpoint_tensor_name("model.final_res.query", layout) + "') but " +
                config_path.string() +
                (layout == CheckpointLayout::k3
                     ? " sets attn_res_block_size to null (the standard residual)"
                     : " has no attn_res_block_size (add it: decoder layers per block)"));
  }
  if (present_attn_res == 0 && !missing_attn_res.empty() &&
      config.attn_res.mode != ResidualMode::standard) {
    throw Error(source + ": " + config_path.string() + " asks for " + config.attn_res.describe() +
                " but the checkpoint has no AttnRes tensors (e.g. '" + missing_attn_res.front() +
                "')");
  }
  files.load_data();
  std::uint64_t total = 0;
  for (const auto& p : plan) total += p.tensor->info->end - p.tensor->info->begin;
  std::uint64_t done = 0;
  const std::string what = "loading " + directory.string();
  report_progress(progress, 0, static_cast<std::size_t>(total), what);
  for (const auto& p : plan) {
    p.tensor->file->copy_values(*p.tensor->info, p.ref->data);
    const std::int64_t count = p.ref->element_count();
    for (std::int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(p.ref->data[i])) {
        throw Error(p.tensor->file->source() + ": tensor '" + p.tensor->info->name +
                    "' holds a non-finite value (" + std::to_string(p.ref->data[i]) +
                    ") at flat index " + std::to_string(i));
      }
    }
    done += p.tensor->info->end - p.tensor->info->begin;
    report_progress(progress, static_cast<std::size_t>(done), static_cast<std::size_t>(total),
                    what);
  }
  if (config.tie_word_embeddings) {
    if (lm_head_in_file &&
        !same_values(model.lm_head.data(), model.embed_tokens.data(), model.lm_head.size())) {
      throw Error(source +
                  ": tie_word_embeddings is true but lm_head.weight differs from "
                  "model.embed_tokens.weight");
    }
    model.lm_head = model.embed_tokens;
  }
  model.has_attn_res_tensors = present_attn_res > 0;
  if (report) {
    report->layout = layout;
    report->sharded = files.sharded();
    report->files.clear();
    for (const auto& file : files.files()) report->files.push_back(file.source());
    report->dtypes.clear();
    for (const auto& [name, tensor] : files.tensors())
      ++report->dtypes[to_string(tensor.info->dtype)];
    report->tensor_bytes = files.tensor_bytes();
    report->notes = config.notes;
    if (config.tie_word_embeddings)
      report->notes.push_back("tie_word_embeddings: the LM head is the embedding matrix");
  }
  return model;
}

template ModelWeights<double> load_model_as(const fs::path&, const Progress&, CheckpointReport*);
template ModelWeights<float> load_model_as(const fs::path&, const Progress&, CheckpointReport*);

namespace {

// Whether the written file can leave lm_head.weight out (tied and still equal).
template <typename Scalar>
bool writes_tied(const ModelWeights<Scalar>& model) {
  return model.config.tie_word_embeddings && model.lm_head.size() == model.embed_tokens.size() &&
         same_values(model.lm_head.data(), model.embed_tokens.data(), model.lm_head.size());
}

}  // namespace

std::string model_safetensors_bytes(const ModelWeights<double>& model) {
  const bool tied = writes_tied(model);
  std::vector<TensorToWrite> tensors;
  for_each_tensor(model, [&](const TensorView& tensor) {
    if (tensor.attn_res && !model.has_attn_res_tensors) return;
    if (tied && tensor.name == "lm_head.weight") return;
    TensorToWrite out{tensor.name, tensor.shape, {}, {}, false};
    for (std::int64_t i = 0; i < tensor.element_count(); ++i) {
      out.data.push_back(static_cast<float>(tensor.data[i]));
    }
    tensors.push_back(std::move(out));
  });
  return serialize_safetensors(tensors, {{"format", "pt"}});
}

void save_model(const ModelWeights<double>& model, const fs::path& directory) {
  model.config.validate("save model");
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw Error("cannot create model directory '" + directory.string() + "': " + error.message());
  }
  ModelConfig config = model.config;
  config.tie_word_embeddings = writes_tied(model);  // a trained head is no longer tied
  write_file_atomically(directory / "model.safetensors", model_safetensors_bytes(model));
  write_file_atomically(directory / "config.json", model_config_to_json(config));
}

namespace {

const char* torch_dtype_name(TensorDType dtype) {
  switch (dtype) {
    case TensorDType::bf16:
      return "bfloat16";
    case TensorDType::f16:
      return "float16";
    case TensorDType::f32:
      return "float32";
    case TensorDType::f64:
      return "float64";
  }
  return "float32";
}

std::string shard_name(std::size_t k, std::size_t n) {
  char text[64];
  std::snprintf(text, sizeof text, "model-%05zu-of-%05zu.safetensors", k, n);
  return text;
}

}  // namespace

template <typename Scalar>
std::vector<std::string> save_hf_model(const ModelWeights<Scalar>& model, const fs::path& directory,
                                       const HfExportOptions& options, const Progress& progress) {
  model.config.validate("export");
  ModelConfig config = model.config;
  config.tie_word_embeddings = writes_tied(model);
  const std::string config_text = model_config_to_k3_json(config, torch_dtype_name(options.dtype));
  // Encode every tensor first (what cannot be written is refused before any file is).
  std::vector<RawTensor> tensors;
  std::vector<TensorRef<Scalar>> refs;
  visit_tensors(const_cast<ModelWeights<Scalar>&>(model),
                [&](const TensorRef<Scalar>& tensor) { refs.push_back(tensor); });
  std::vector<float> buffer;
  std::size_t done = 0;
  for (const auto& tensor : refs) {
    if (tensor.attn_res && !model.has_attn_res_tensors) continue;
    if (config.tie_word_embeddings && tensor.name == "lm_head.weight") continue;
    bool row = false;
    const std::string name = checkpoint_tensor_name(tensor.name, CheckpointLayout::k3, &row);
    buffer.assign(tensor.data, tensor.data + tensor.element_count());
    RawTensor out{name, options.dtype,
                  row ? std::vector<std::int64_t>{1, tensor.shape[0]} : tensor.shape,
                  encode_floats(buffer.data(), buffer.size(), options.dtype,
                                "export: tensor '" + name + "'")};
    tensors.push_back(std::move(out));
    report_progress(progress, ++done, refs.size(), "export");
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const RawTensor& a, const RawTensor& b) { return a.name < b.name; });
  // Shards: consecutive tensors (in name order) up to max_shard_bytes each.
  std::vector<std::vector<RawTensor>> shards(1);
  std::uint64_t in_shard = 0;
  for (auto& tensor : tensors) {
    if (options.max_shard_bytes > 0 && in_shard > 0 &&
        in_shard + tensor.bytes.size() > options.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    in_shard += tensor.bytes.size();
    shards.back().push_back(std::move(tensor));
  }
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    throw Error("cannot create model directory '" + directory.string() + "': " + error.message());
  }
  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  std::vector<std::string> written;
  if (shards.size() == 1) {
    write_file_atomically(directory / kSingleCheckpointFile,
                          serialize_safetensors(shards.front(), metadata));
    written.push_back(kSingleCheckpointFile);
  } else {
    nlohmann::json map = nlohmann::json::object();
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < shards.size(); ++k) {
      const std::string file = shard_name(k + 1, shards.size());
      for (const auto& tensor : shards[k]) {
        map[tensor.name] = file;
        total += tensor.bytes.size();
      }
      write_file_atomically(directory / file, serialize_safetensors(shards[k], metadata));
      written.push_back(file);
    }
    const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
    write_file_atomically(directory / kCheckpointIndexFile, index.dump(2) + "\n");
    written.push_back(kCheckpointIndexFile);
  }
  write_file_atomically(directory / "config.json", config_text);
  written.push_back("config.json");
  return written;
}

template std::vector<std::string> save_hf_model(const ModelWeights<double>&, const fs::path&,
                                                const HfExportOptions&, const Progress&);
template std::vector<std::string> save_hf_model(const ModelWeights<float>&, const fs::path&,
                                                const HfExportOptions&, const Progress&);

}  // namespace attnres
