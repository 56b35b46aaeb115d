// libcurl's one home: curl/curl.h is included here only.
#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <mutex>

#include "tracking/http.h"

namespace tune {
namespace {

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

class CurlHttpClient : public HttpClient {
 public:
  explicit CurlHttpClient(double timeout_seconds) : timeout_ms_(timeout_seconds * 1000) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
    headers_ = curl_slist_append(nullptr, "Content-Type: application/json");
  }
  ~CurlHttpClient() override {
    if (curl_ != nullptr) curl_easy_cleanup(curl_);
    curl_slist_free_all(headers_);
  }

  Result<HttpResponse> Request(const std::string& method, const std::string& url,
                               const std::string& body) override {
    if (curl_ == nullptr) return UnavailableError("libcurl could not start");
    HttpResponse response;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_ms_));
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min(timeout_ms_, 2000.0)));
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, AppendBody);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers_);
    if (method == "POST") {
      curl_easy_setopt(curl_, CURLOPT_POST, 1L);
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    } else {
      curl_easy_setopt(curl_, CURLOPT_HTTPGET, 1L);
    }
    const CURLcode rc = curl_easy_perform(curl_);
    if (rc != CURLE_OK) {
      return UnavailableError(fmt::format("{} {}: {}", method, url, curl_easy_strerror(rc)));
    }
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
  }

 private:
  double timeout_ms_;
  CURL* curl_ = nullptr;
  curl_slist* headers_ = nullptr;
};

}  // namespace

Status CheckHttpAvailable() { return Status::Ok(); }

std::unique_ptr<HttpClient> NewCurlHttpClient(double timeout_seconds) {
  return std::make_unique<CurlHttpClient>(timeout_seconds);
}

}  // namespace tune
