// HTTP for the MLflow sink: the smallest interface it needs (a JSON request, a status and a
// body), so that tests fake the server; NewCurlHttpClient is the real one (libcurl).
// Not thread-safe: one client per thread.
#pragma once

#include <memory>
#include <string>

#include "tune/status.h"

namespace tune {

struct HttpResponse {
  long status = 0;  // 200, 404, ...
  std::string body;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // method: "GET" or "POST"; `body` is sent as application/json (POST). Unavailable when no
  // response came (connection refused, timeout), naming the URL and why.
  virtual Result<HttpResponse> Request(const std::string& method, const std::string& url,
                                       const std::string& body) = 0;
};

// libcurl, one connection kept alive between requests; each request gives up after
// `timeout_seconds` (connecting: at most 2 s of it).
std::unique_ptr<HttpClient> NewCurlHttpClient(double timeout_seconds);

// Ok when this build speaks HTTP; Unavailable, naming the package to install, when it was built
// without libcurl (curl_unavailable.cpp), whose NewCurlHttpClient's requests then fail the same.
Status CheckHttpAvailable();

}  // namespace tune
