#include "train/loop/progress.hpp"

#include <algorithm>
#include <numbers>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <unistd.h>

#include "framework/engine/runtime/clock.hpp"
#include "train/run/shell_quote.hpp"

namespace headgrad::train {
namespace {

constexpr const char* kClearLine = "\r\033[K";


std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

} // namespace

Progress::Progress(bool quiet, bool json, std::int64_t start, std::int64_t total, std::int64_t tokens_per_step,
                   bool text, const char* unit)
    : quiet_(quiet), json_(json), tty_(isatty(fileno(stdout)) && !json), text_(text), unit_(unit), start_(start),
      total_(total),
      tokens_per_step_(tokens_per_step), plain_every_(std::clamp<std::int64_t>(total / 20, 10, 500)) {}

void Progress::step(std::int64_t step, double loss, double lr, double train_seconds) {
  if (quiet_) return;
  const std::int64_t done = step - start_, todo = total_ - start_;
  const double tokens_per_s = static_cast<double>(tokens_per_step_ * done) / train_seconds;
  const double eta = train_seconds / static_cast<double>(done) * static_cast<double>(todo - done);
  if (tty_ && (runtime::seconds_now() - last_draw_ > 0.1 || step == total_)) {
    const int width = 24;
    const int filled = static_cast<int>(static_cast<double>(width) * static_cast<double>(done) / static_cast<double>(todo));
    fmt::print("{}[{}{}] step {}/{}  loss {:.4f}  {:.0f} {}/s  ETA {}", kClearLine, std::string(filled, '#'),
               std::string(width - filled, '.'), step, total_, loss, tokens_per_s, unit_, format_eta(eta));
    std::fflush(stdout);
    last_draw_ = runtime::seconds_now();
  } else if (!tty_ && !json_ && step % plain_every_ == 0) {
    fmt::print("step {:>6}/{}  loss {:.4f}  lr {:.3g}  {:.0f} {}/s  ETA {}\n", step, total_, loss, lr, tokens_per_s,
               unit_, format_eta(eta));
    std::fflush(stdout);
  }
}

void Progress::eval(std::int64_t step, const EvalResult& e) {
  if (quiet_) return;
  if (tty_) fmt::print("{}", kClearLine);
  if (text_) // bits per token = nats / ln 2
    fmt::print("eval  step {:>6}: val loss {:.4f} ({:.3f} bits per token), next-token acc {:.4f}\n", step, e.loss,
               e.loss / std::numbers::ln2, e.token_acc);
  else
    fmt::print("eval  step {:>6}: loss {:.4f}, token acc {:.4f}, seq acc {:.4f}\n", step, e.loss, e.token_acc, e.seq_acc);
  std::fflush(stdout);
}

void Progress::interrupted(std::int64_t step, const std::string& model_path) {
  if (quiet_) return;
  fmt::print("{}interrupted at step {}: checkpoint saved to {} (continue with --resume {})\n", tty_ ? kClearLine : "",
             step, model_path, shell_quote(model_path));
}

void Progress::interrupted_at_start(std::int64_t done) {
  if (quiet_) return;
  fmt::print("interrupted while starting up, before step {}: nothing trained, nothing saved\n", done + 1);
}

void Progress::done() {
  if (tty_ && !quiet_) fmt::print("{}", kClearLine);
}

} // namespace headgrad::train
