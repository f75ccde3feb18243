#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace strata::server {

std::string ApiError::body() const {
  nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  // A message may quote bytes of the request that are not UTF-8: replace rather than throw.
  return nlohmann::json{{"error", e}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace strata::server
