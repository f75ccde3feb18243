// An error answered to an HTTP client, in OpenAI's shape, so the official client libraries raise
// their usual exceptions (BadRequestError, AuthenticationError, RateLimitError, ...):
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// param and code are null when empty.
#pragma once

#include <string>

namespace strata::server {

struct ApiError {
  int status = 400;  // HTTP status
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault
  std::string code;   // a machine-readable reason ("invalid_api_key", "context_length_exceeded")

  std::string body() const;  // the JSON body
};

inline ApiError bad_request(std::string message, std::string param = {}) {
  return {400, std::move(message), "invalid_request_error", std::move(param), {}};
}

}  // namespace strata::server
