#include "train/thread_replicas.hpp"

#include "framework/random.hpp"

namespace headgrad::train {

ThreadReplicas::ThreadReplicas(models::TokenModel& model, int threads, std::uint64_t seed) : model_(model) {
  for (int i = 1; i < threads; ++i) {
    auto r = model.replica(mix_seed(seed, static_cast<std::uint64_t>(i)));
    r->share_parameters(model);
    replicas_.push_back(std::move(r));
  }
  follow_mode();
}

void ThreadReplicas::follow_mode() {
  for (auto& r : replicas_) r->train(model_.training());
}

void ThreadReplicas::add_gradients_to_model() {
  for (auto& r : replicas_) model_.take_gradients_from(*r);
}

std::unique_ptr<ThreadReplicas> workers_for(models::TokenModel& model, int threads, std::uint64_t seed) {
  if (threads <= 1) return nullptr;
  return std::make_unique<ThreadReplicas>(model, threads, seed);
}

} // namespace headgrad::train
