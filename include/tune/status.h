// Status and Result<T>: errors as values inside tune's libraries.
//
// A Status is either OK or carries a code and a message. Result<T> holds a T or a non-OK Status
// (a small StatusOr). Libraries return these; only apps/tune maps them to exit codes.
//
// Example:
//   Result<int> ParsePort(std::string_view s);
//   TUNE_ASSIGN_OR_RETURN(int port, ParsePort(text));
//   TUNE_RETURN_IF_ERROR(storage.SetTrialParam(...));
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tune {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad config, CLI value or API argument
  kNotFound,            // study, trial or file not found
  kAlreadyExists,       // Optuna: DuplicatedStudyError
  kFailedPrecondition,  // Optuna: UpdateFinishedTrialError
  kResourceExhausted,   // predicted or real out-of-memory
  kUnavailable,         // transient (database busy): retry the call
  kCancelled,           // interrupted by the user (Ctrl-C)
  kDeviceLost,          // the device is unusable in this process (a sticky CUDA error)
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: message" (or "OK").
  std::string ToString() const;

  // Returns a copy whose message is "context: message".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Holds a value of type T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(data_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

  // REQUIRES: ok()
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const { return ok() ? std::get<T>(data_) : std::move(fallback); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace tune

#define TUNE_INTERNAL_CONCAT2(a, b) a##b
#define TUNE_INTERNAL_CONCAT(a, b) TUNE_INTERNAL_CONCAT2(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define TUNE_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::tune::Status tune_status_ = (expr);        \
    if (!tune_status_.ok()) return tune_status_; \
  } while (0)

// `lhs` = value of `rexpr` (a Result<T>), or returns its Status from the enclosing function.
#define TUNE_ASSIGN_OR_RETURN(lhs, rexpr) \
  TUNE_INTERNAL_ASSIGN_OR_RETURN(TUNE_INTERNAL_CONCAT(tune_result_, __LINE__), lhs, rexpr)
#define TUNE_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
