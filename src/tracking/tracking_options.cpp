#include "tracking/tracking_options.h"

#include <fmt/format.h>

#include "tracking/http.h"

namespace tune {

Status CheckMlflowUri(const std::string& uri) {
  for (const char* scheme : {"http://", "https://"}) {
    const std::string s(scheme);
    if (uri.rfind(s, 0) == 0 && uri.size() > s.size() && uri[s.size()] != '/') {
      return Status::Ok();
    }
  }
  std::string hint;
  if (uri.rfind("file:", 0) == 0 || uri.rfind("/", 0) == 0) {
    hint =
        "; a file store is not written by tune: run `mlflow server` over it and give its "
        "http:// address";
  } else if (uri.find("://") == std::string::npos && !uri.empty()) {
    hint = fmt::format(" (did you mean 'http://{}'?)", uri);
  }
  return InvalidArgumentError(
      fmt::format("'{}' is not an MLflow tracking server's address; valid: http://HOST[:PORT] or "
                  "https://HOST[:PORT]{}",
                  uri, hint));
}

Status CheckMlflowSupported() { return CheckHttpAvailable(); }

}  // namespace tune
