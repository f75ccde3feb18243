// Recoverable failures travel as values: Status (ok or a message) and Result<T> (a value or a
// message). Messages carry their context (file, key, tensor, offset) because they are what the user
// reads. Contract violations (a caller bug, not bad input) use STRATA_CHECK and abort instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace strata {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  static Status ok() { return {}; }
  template <typename... Args>
  static Status error(fmt::format_string<Args...> f, Args&&... args) {
    Status s;
    s.message_ = fmt::format(f, std::forward<Args>(args)...);
    return s;
  }
  bool is_ok() const { return !message_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return *message_; }

  // Prefixes context to an error ("model.gguf: " + message); ok stays ok.
  Status with_context(const std::string& ctx) const {
    if (is_ok()) return *this;
    Status s;
    s.message_ = ctx + ": " + *message_;
    return s;
  }

 private:
  std::optional<std::string> message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {
    if (std::get<Status>(v_).is_ok()) {
      std::fprintf(stderr, "strata: Result constructed from an ok Status\n");
      std::abort();
    }
  }
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return std::get<Status>(v_); }
  const std::string& message() const { return status().message(); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace strata

// Asserts a contract (never bad input, which must produce a Status). Active in all builds.
#define STRATA_CHECK(cond, ...)                                                             \
  do {                                                                                      \
    if (!(cond)) ::strata::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

// Propagates an error Status from an expression returning Status.
#define STRATA_TRY(expr)                   \
  do {                                     \
    ::strata::Status strata_s_ = (expr);   \
    if (!strata_s_.is_ok()) return strata_s_; \
  } while (0)
