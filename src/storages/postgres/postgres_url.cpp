// ParsePostgresUrl: SQLAlchemy-style PostgreSQL URLs -> libpq keywords. No libpq here, so a
// build without it still explains what a URL means.
#include <fmt/format.h>

#include <charconv>

#include "storages/rdb/schema.h"
#include "tune/storages/postgres.h"
#include "util/text.h"

namespace tune {
namespace {

// The URL's password replaced by "***" (userinfo and a password= query key).
std::string Redact(const std::string& url) {
  std::string out = url;
  const size_t scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const size_t start = scheme_end + 3;
    const size_t query = out.find('?', start);
    const size_t at = out.rfind('@', query == std::string::npos ? std::string::npos : query);
    if (at != std::string::npos && at >= start) {
      const size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t pos = out.find('?'); pos != std::string::npos && pos < out.size();) {
    const size_t key = pos + 1;
    const size_t amp = out.find('&', key);
    const size_t end = amp == std::string::npos ? out.size() : amp;
    if (out.compare(key, 9, "password=") == 0 && key + 9 <= end) {
      out.replace(key + 9, end - key - 9, "***");
      pos = out.find('&', key);
    } else {
      pos = amp;
    }
  }
  return out;
}

Result<std::string> PercentDecode(const std::string& display, const std::string& text) {
  std::optional<std::string> decoded = tune::PercentDecode(text);
  if (!decoded) return InvalidArgumentError(fmt::format("storage '{}': bad %-escape", display));
  return *std::move(decoded);
}

}  // namespace

Result<PostgresUrl> ParsePostgresUrl(const std::string& url) {
  PostgresUrl out;
  out.display = Redact(url);
  const std::string usage =
      "a PostgreSQL URL is postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?KEY=VALUE&...]";
  const size_t scheme_end = url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : url.substr(0, scheme_end);
  const std::string base = scheme.substr(0, scheme.find('+'));
  if (base != "postgresql" && base != "postgres") {
    return InvalidArgumentError(fmt::format("storage '{}': {}", out.display, usage));
  }
  std::string rest = url.substr(scheme_end + 3);
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // [userinfo@]hostport[/dbname]; the password may hold any character but '@' unescaped.
  std::string userinfo;
  if (size_t at = rest.rfind('@'); at != std::string::npos) {
    userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
  }
  std::string hostport = rest;
  std::string dbname;
  if (size_t slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    dbname = rest.substr(slash + 1);
  }
  if (dbname.find('/') != std::string::npos) {
    return InvalidArgumentError(
        fmt::format("storage '{}': the database name contains '/'; {}", out.display, usage));
  }
  // Hosts "h1[:p1],h2[:p2]" (libpq's multi-host form), each possibly a bracketed IPv6 address.
  std::vector<std::string> hosts, ports;
  bool any_port = false;
  for (size_t pos = 0; !hostport.empty() && pos <= hostport.size();) {
    const size_t comma = hostport.find(',', pos);
    const std::string item =
        hostport.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? hostport.size() + 1 : comma + 1;
    std::string host = item, port;
    const size_t bracket = item.rfind(']');
    const size_t colon = item.rfind(':');
    if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
      host = item.substr(0, colon);
      port = item.substr(colon + 1);
      int number = 0;
      auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), number);
      if (ec != std::errc() || ptr != port.data() + port.size() || number < 1 || number > 65535) {
        return InvalidArgumentError(
            fmt::format("storage '{}': bad port '{}'; {}", out.display, port, usage));
      }
      any_port = true;
    }
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    TUNE_ASSIGN_OR_RETURN(host, PercentDecode(out.display, host));
    hosts.push_back(host);
    ports.push_back(port);
  }
  if (!userinfo.empty()) {
    const size_t colon = userinfo.find(':');
    TUNE_ASSIGN_OR_RETURN(std::string user, PercentDecode(out.display, userinfo.substr(0, colon)));
    if (!user.empty()) out.params.emplace_back("user", user);
    if (colon != std::string::npos) {
      TUNE_ASSIGN_OR_RETURN(std::string password,
                            PercentDecode(out.display, userinfo.substr(colon + 1)));
      out.params.emplace_back("password", password);
    }
  }
  if (!JoinNames(hosts, "").empty()) out.params.emplace_back("host", JoinNames(hosts, ","));
  if (any_port) out.params.emplace_back("port", JoinNames(ports, ","));
  if (!dbname.empty()) {
    TUNE_ASSIGN_OR_RETURN(dbname, PercentDecode(out.display, dbname));
    out.params.emplace_back("dbname", dbname);
  }
  for (const auto& [raw_key, raw_value] : SplitUrlQuery(query)) {
    TUNE_ASSIGN_OR_RETURN(std::string key, PercentDecode(out.display, raw_key));
    TUNE_ASSIGN_OR_RETURN(std::string value, PercentDecode(out.display, raw_value));
    if (key == "schema") {
      TUNE_RETURN_IF_ERROR(internal::rdb::CheckSchemaOption(out.display, value));
      out.options.schema_revision = value;
    } else if (key.empty()) {
      return InvalidArgumentError(
          fmt::format("storage '{}': empty query key; {}", out.display, usage));
    } else {
      // libpq's keyword (sslmode, connect_timeout, options, ...); checked when connecting.
      out.params.emplace_back(key, value);
    }
  }
  return out;
}

}  // namespace tune
