// The HTTP client of a tune built without libcurl (CMake did not find it): MLflow addresses are
// refused when a config or `tune export --mlflow` names one, saying what to install; TensorBoard
// tracking needs no HTTP and works.
#include "tracking/http.h"

namespace tune {
namespace {

const char kWhy[] =
    "this tune was built without libcurl, so it cannot reach an MLflow server (install "
    "libcurl4-openssl-dev on Debian or Ubuntu, or libcurl's headers elsewhere, and rebuild; "
    "TensorBoard tracking works without it)";

class NoHttpClient final : public HttpClient {
 public:
  Result<HttpResponse> Request(const std::string&, const std::string&,
                               const std::string&) override {
    return UnavailableError(kWhy);
  }
};

}  // namespace

Status CheckHttpAvailable() { return UnavailableError(kWhy); }

std::unique_ptr<HttpClient> NewCurlHttpClient(double) { return std::make_unique<NoHttpClient>(); }

}  // namespace tune
