#include "server/ticket.h"

namespace strata::server {

void Ticket::append(const std::string& text, std::vector<TokenLogprob> logprobs) {
  if (text.empty() && logprobs.empty()) return;
  {
    std::lock_guard lock(mu_);
    pending_.text += text;
    for (auto& t : logprobs) pending_.logprobs.push_back(std::move(t));
  }
  cv_.notify_all();
}

void Ticket::finish(std::string finish_reason, Usage usage) {
  {
    std::lock_guard lock(mu_);
    pending_.done = true;
    pending_.finish_reason = std::move(finish_reason);
    pending_.usage = usage;
  }
  cv_.notify_all();
}

void Ticket::fail(std::string error) {
  {
    std::lock_guard lock(mu_);
    pending_.done = true;
    pending_.error = std::move(error);
  }
  cv_.notify_all();
}

Update Ticket::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return pending_.done || !pending_.text.empty() || !pending_.logprobs.empty(); });
  Update u = pending_;
  pending_.text.clear();
  pending_.logprobs.clear();  // the end stays: every later wait() sees it again
  return u;
}

}  // namespace strata::server
