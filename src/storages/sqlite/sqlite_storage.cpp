// OpenSqliteStorage: opens or creates the file, checks that it holds an Optuna schema tune
// knows, and hands the connection to the shared RDB storage.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "storages/rdb/open_schema.h"
#include "storages/rdb/rdb_storage.h"
#include "storages/rdb/schema.h"
#include "storages/sqlite/sqlite_connection.h"
#include "tune/storages/sqlite.h"
#include "util/text.h"

namespace tune {
namespace {

namespace fs = std::filesystem;
using internal::rdb::ScopedQuery;
using internal::sqlite::SqliteConnection;

using internal::rdb::Inspection;

// What the file holds. Errors for anything but an empty database or a complete Optuna schema.
// Reads only.
Result<Inspection> Inspect(SqliteConnection& conn, const std::string& path) {
  auto unreadable = [&](const Status& s) {
    if (s.code() == StatusCode::kUnavailable) return s;  // locked by another process
    // A database deleted without its write-ahead log: SQLite's "disk I/O error" on the new file
    // comes from the old file's -wal and -shm beside it.
    std::error_code ec;
    const bool stale_wal = fs::exists(path + "-wal", ec) || fs::exists(path + "-shm", ec);
    return InvalidArgumentError(fmt::format(
        "'{}' is not a readable SQLite database ({}); nothing was changed{}", path,
        s.message().substr(
            s.message().rfind(": ") == std::string::npos ? 0 : s.message().rfind(": ") + 2),
        stale_wal ? fmt::format(". '{0}-wal' or '{0}-shm' is beside it: if '{0}' was deleted or "
                                "replaced, those two files belong to the old one; delete them too",
                                path)
                  : std::string()));
  };
  auto tables =
      internal::rdb::QueryTexts(conn, "SELECT name FROM sqlite_master WHERE type = 'table'");
  if (!tables.ok()) return unreadable(tables.status());
  // Page-level damage shows up only when the pages are read: check them all (cheap next to a
  // study: one pass over the file).
  auto checked = internal::rdb::QueryTexts(conn, "PRAGMA quick_check(5)");
  if (!checked.ok()) return unreadable(checked.status());
  std::vector<std::string> problems;
  for (const std::string& line : *checked) {
    if (line != "ok") problems.push_back(line);
  }
  if (!problems.empty()) {
    return InvalidArgumentError(
        fmt::format("'{}' is a corrupt SQLite database ({}); nothing was changed", path,
                    JoinNames(problems, "; ")));
  }
  Inspection out;
  out.empty = tables->empty();
  if (out.empty) return out;
  const std::vector<std::string> missing = internal::rdb::MissingTables(*tables);
  if (!missing.empty()) {
    return InvalidArgumentError(fmt::format(
        "'{}' is a SQLite database but not an Optuna/tune storage (missing tables: {}); nothing "
        "was changed",
        path, JoinNames(missing)));
  }
  const internal::rdb::DatabaseNaming naming{
      fmt::format("'{}'", path),
      fmt::format("Upgrade the file first: optuna storage upgrade --storage sqlite:///{}", path),
      "The file was written by a newer Optuna"};
  Result<std::string> revision = internal::rdb::CheckedRevision(conn, naming);
  if (!revision.ok()) {
    return revision.status().code() == StatusCode::kInvalidArgument ? revision.status()
                                                                    : unreadable(revision.status());
  }
  out.revision = *revision;
  return out;
}

// Creates the schema in an empty database, unless another process did it first.
Status CreateSchema(SqliteConnection& conn, const std::string& path, const std::string& revision,
                    int max_attempts) {
  return internal::rdb::CreateSchemaIfEmpty(conn, internal::rdb::Dialect::kSqlite, revision,
                                            max_attempts, fmt::format("'{}'", path), nullptr,
                                            [&] { return Inspect(conn, path); });
}

// Puts the file in WAL mode. The switch needs the file to itself for a moment, and SQLite
// reports busy at once, without its busy handler, while another process opens or switches the
// same new file: retry with a short backoff for up to the busy timeout.
Status EnableWal(SqliteConnection& conn, int busy_timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(busy_timeout_ms, 1000));
  std::minstd_rand rng(std::random_device{}());
  for (int attempt = 0;; ++attempt) {
    std::string mode;
    Status s = [&]() -> Status {
      TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(conn, "PRAGMA journal_mode=WAL"));
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (row) mode = q->Text(0);
      return Status::Ok();
    }();
    if (s.ok() && mode == "wal") return s;
    if (s.ok()) {
      s = UnavailableError(fmt::format("{}: the file stayed in journal mode '{}' instead of WAL",
                                       conn.name(), mode));
    }
    if (s.code() != StatusCode::kUnavailable || std::chrono::steady_clock::now() > deadline) {
      return s;
    }
    const int max_ms = std::min(5 << std::min(attempt, 5), 100);
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + static_cast<int>(rng() % max_ms)));
  }
}

}  // namespace

const std::vector<std::string>& SqliteSchemaRevisions() {
  return internal::rdb::SupportedRevisions();
}

Result<std::unique_ptr<Storage>> OpenSqliteStorage(const std::string& path,
                                                   const SqliteOptions& options) {
  if (options.schema_revision && !internal::rdb::IsSupportedRevision(*options.schema_revision)) {
    return InvalidArgumentError(fmt::format(
        "unknown SQLite schema revision '{}'{}; supported: {}", *options.schema_revision,
        DidYouMean(*options.schema_revision, internal::rdb::SupportedRevisions()),
        internal::rdb::SupportedRevisionsText()));
  }
  if (path.empty()) return InvalidArgumentError("the SQLite storage needs a file path");
  if (auto problem = internal::sqlite::SqliteLibraryProblem()) {
    return FailedPreconditionError(*problem);
  }
  std::error_code ec;
  const bool exists = fs::exists(path, ec);
  if (exists && fs::is_directory(path, ec)) {
    return InvalidArgumentError(fmt::format("'{}' is a directory, not a SQLite file", path));
  }
  if (!exists && (!options.create_if_missing || options.read_only)) {
    return NotFoundError(fmt::format("SQLite storage '{}' does not exist", path));
  }
  const std::string url = "sqlite:///" + path;
  SqliteConnection::OpenOptions open;
  open.read_only = options.read_only;
  open.create = !exists;
  open.busy_timeout_ms = options.busy_timeout_ms;
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<SqliteConnection> conn,
                        SqliteConnection::Open(path, url, open));

  TUNE_ASSIGN_OR_RETURN(Inspection found, Inspect(*conn, path));
  if (found.empty && options.read_only) {
    return InvalidArgumentError(
        fmt::format("'{}' is an empty SQLite database (no Optuna schema, no studies)", path));
  }
  if (!found.empty && options.schema_revision && *options.schema_revision != found.revision) {
    return InvalidArgumentError(fmt::format(
        "'{}' has schema revision {}, but {} was asked for; the revision is chosen when a file "
        "is created and tune never migrates one (drop the schema option to use the file as it "
        "is)",
        path, found.revision, *options.schema_revision));
  }
  if (!options.read_only) {
    // WAL: readers (a dashboard) never block the writer; NORMAL sync: a commit survives a crash
    // of the process (not a power loss before the next checkpoint).
    TUNE_RETURN_IF_ERROR(EnableWal(*conn, options.busy_timeout_ms));
    TUNE_RETURN_IF_ERROR(conn->ExecScript("PRAGMA synchronous=NORMAL"));
  }
  if (found.empty) {
    const std::string revision = options.schema_revision.value_or(kDefaultSqliteSchemaRevision);
    TUNE_RETURN_IF_ERROR(CreateSchema(*conn, path, revision, options.max_attempts));
    TUNE_ASSIGN_OR_RETURN(found, Inspect(*conn, path));
    if (found.empty) return InternalError(fmt::format("'{}': the schema was not created", path));
    if (options.schema_revision && *options.schema_revision != found.revision) {
      return InvalidArgumentError(fmt::format(
          "'{}' was just created by another process with schema revision {}, but {} was asked "
          "for",
          path, found.revision, *options.schema_revision));
    }
    spdlog::debug("created SQLite storage '{}' (schema {})", path, found.revision);
  }
  internal::rdb::RdbStorageOptions rdb_options;
  rdb_options.url = url;
  rdb_options.max_attempts = options.max_attempts;
  rdb_options.dialect = internal::rdb::Dialect::kSqlite;
  // Heartbeats at millisecond resolution (CURRENT_TIMESTAMP has whole seconds); UTC.
  rdb_options.current_timestamp_sql = "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')";
  return internal::rdb::NewRdbStorage(std::move(conn), std::move(rdb_options));
}

namespace {

Result<std::string> PercentDecode(const std::string& url, const std::string& text) {
  std::optional<std::string> decoded = tune::PercentDecode(text);
  if (!decoded) {
    return InvalidArgumentError(fmt::format("storage '{}': bad %-escape in the path", url));
  }
  return *std::move(decoded);
}

}  // namespace

Result<SqliteUrl> ParseSqliteUrl(const std::string& url) {
  const std::string prefix = "sqlite:///";
  if (url.rfind(prefix, 0) != 0) {
    return InvalidArgumentError(fmt::format(
        "storage '{}': a SQLite URL is sqlite:///RELATIVE/PATH or sqlite:////ABSOLUTE/PATH", url));
  }
  std::string rest = url.substr(prefix.size());
  std::string query;
  if (size_t q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  SqliteUrl out;
  TUNE_ASSIGN_OR_RETURN(out.path, PercentDecode(url, rest));
  if (out.path.empty()) {
    return InvalidArgumentError(fmt::format(
        "storage '{}' names no file (e.g. sqlite:///tune.db, sqlite:////tmp/tune.db)", url));
  }
  const std::vector<std::string> keys = {"schema", "timeout"};
  for (const auto& [key, value] : SplitUrlQuery(query)) {
    if (key == "schema") {
      TUNE_RETURN_IF_ERROR(internal::rdb::CheckSchemaOption(url, value));
      out.options.schema_revision = value;
    } else if (key == "timeout") {
      double seconds = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
      if (ec != std::errc() || ptr != value.data() + value.size() || !(seconds >= 0) ||
          seconds > 86400) {
        return InvalidArgumentError(
            fmt::format("storage '{}': timeout must be a number of seconds (0 to 86400), got '{}'",
                        url, value));
      }
      out.options.busy_timeout_ms = static_cast<int>(seconds * 1000.0);
    } else {
      return InvalidArgumentError(fmt::format("storage '{}': unknown option '{}'{}; valid: {}", url,
                                              key, DidYouMean(key, keys), JoinNames(keys)));
    }
  }
  return out;
}

}  // namespace tune
