#include "attnres/gradient_engine.hpp"

#include <cmath>
#include <thread>

#include "attnres/error.hpp"
#include "attnres/forward_steps.hpp"
#include "cpu/fast_backward.hpp"
#include "cpu/thread_pool.hpp"
#include "src/fast_pass.hpp"

namespace attnres {

template <typename Scalar>
GradientEngine<Scalar>::GradientEngine(const ModelConfig& config, const EngineOptions& options)
    : options_(options) {
  if (options.device != Device::cpu) {
    throw Error(
        "gradients: only the CPU computes gradients (--device cpu); the CUDA engine is "
        "forward-only");
  }
  check_thread_count(options.threads, "threads");
  if (options.engine == EngineKind::fast) {
    fast_ = std::make_unique<engine::FastBackward<Scalar>>(
        config, options.threads > 0 ? options.threads : default_thread_count());
  }
}

template <typename Scalar>
GradientEngine<Scalar>::~GradientEngine() = default;

template <typename Scalar>
int GradientEngine<Scalar>::threads() const {
  return fast_ ? fast_->threads() : 1;
}

template <typename Scalar>
void GradientEngine<Scalar>::compute(const ModelWeights<Scalar>& model,
                                     const std::vector<std::vector<int>>& batch,
                                     const ForwardOptions& options, Gradients<Scalar>& out) {
  if (fast_ &&
      engine::fast_engines_run(resolve_scheme(model.config, options), engine::FastEngine::cpu)) {
    fast_->compute(model, batch, options, out);
  } else if (fast_ && batch.size() > 1 && fast_->threads() > 1) {
    reference_in_parallel(model, batch, options, out);
  } else {
    out = loss_and_gradients(model, batch, options);
  }
}

// Schemes the fast backward does not implement (fast_engines_run; docs/schemes.md): the reference
// code on contiguous slices of the batch, one per thread, combined in slice order (deterministic
// for a given thread count). Each slice's mean is weighted by its share of the predicted positions.
template <typename Scalar>
void GradientEngine<Scalar>::reference_in_parallel(const ModelWeights<Scalar>& model,
                                                   const std::vector<std::vector<int>>& batch,
                                                   const ForwardOptions& options,
                                                   Gradients<Scalar>& out) {
  const std::int64_t predicted = check_training_batch(model.config, batch, "gradients");
  const int parts = std::min<int>(fast_->threads(), static_cast<int>(batch.size()));
  std::vector<Gradients<Scalar>> slices(static_cast<std::size_t>(parts));
  std::vector<double> elements(static_cast<std::size_t>(parts), 0.0);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(parts));
  ForwardOptions slice_options = options;
  slice_options.progress = {};  // progress is the caller's; each slice runs to its end
  auto run_slice = [&](int k) {
    try {
      const auto [begin, end] = engine::ThreadPool::chunk(batch.size(), parts, k);
      const std::vector<std::vector<int>> slice(batch.begin() + static_cast<std::ptrdiff_t>(begin),
                                                batch.begin() + static_cast<std::ptrdiff_t>(end));
      for (const auto& sequence : slice) {
        elements[static_cast<std::size_t>(k)] +=
            static_cast<double>(sequence.size()) * model.config.hidden_size;
      }
      slices[static_cast<std::size_t>(k)] = loss_and_gradients(model, slice, slice_options);
    } catch (...) {
      errors[static_cast<std::size_t>(k)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (int k = 1; k < parts; ++k) workers.emplace_back(run_slice, k);
  run_slice(0);
  for (auto& worker : workers) worker.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  report_progress(options.progress, 1, 1, "backward pass");
  const double total_elements = [&] {
    double sum = 0.0;
    for (double e : elements) sum += e;
    return sum;
  }();
  auto weight = [&](std::size_t k) {
    return static_cast<double>(slices[k].predicted) / static_cast<double>(predicted);
  };
  const std::size_t L = slices.front().sublayer_output_rms.size();
  std::vector<double> output_squares(L, 0.0), grad_squares(L, 0.0);
  for (std::size_t k = 0; k < slices.size(); ++k) {
    for (std::size_t l = 0; l < L; ++l) {
      output_squares[l] += std::pow(slices[k].sublayer_output_rms[l], 2) * elements[k];
      // The slice's gradients are of its own mean loss; rescale to the batch mean.
      grad_squares[l] +=
          std::pow(slices[k].sublayer_output_grad_rms[l] * weight(k), 2) * elements[k];
    }
  }
  const double first = weight(0);
  out = std::move(slices.front());
  out.loss *= first;
  visit_tensors(out.grad, [&](const TensorRef<Scalar>& tensor) {
    for (std::int64_t i = 0; i < tensor.element_count(); ++i)
      tensor.data[i] *= static_cast<Scalar>(first);
  });
  for (std::size_t k = 1; k < slices.size(); ++k) {
    out.loss += slices[k].loss * weight(k);
    std::vector<Scalar*> sums;
    visit_tensors(out.grad, [&](const TensorRef<Scalar>& tensor) { sums.push_back(tensor.data); });
    std::size_t index = 0;
    visit_tensors(slices[k].grad, [&](const TensorRef<Scalar>& tensor) {
      Scalar* sum = sums[index++];
      for (std::int64_t i = 0; i < tensor.element_count(); ++i)
        sum[i] += static_cast<Scalar>(weight(k)) * tensor.data[i];
    });
  }
  out.predicted = predicted;
  for (std::size_t l = 0; l < L; ++l) {
    out.sublayer_output_rms[l] = std::sqrt(output_squares[l] / total_elements);
    out.sublayer_output_grad_rms[l] = std::sqrt(grad_squares[l] / total_elements);
  }
}

template class GradientEngine<float>;
template class GradientEngine<double>;

}  // namespace attnres
