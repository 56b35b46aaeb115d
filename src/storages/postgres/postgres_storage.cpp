// OpenPostgresStorage: connects, checks that the database holds an Optuna schema tune knows (or
// creates one in an empty database), and hands the connection to the shared RDB storage with
// row locks on.
#include <algorithm>

#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include "storages/postgres/postgres_connection.h"
#include "storages/rdb/rdb_storage.h"
#include "storages/rdb/schema.h"
#include "tune/storages/postgres.h"
#include "tune/text.h"

namespace tune {
namespace {

using internal::postgres::PgConnection;
using internal::rdb::ScopedQuery;

// Key of the transaction-level advisory lock that serialises schema creation between
// processes opening the same empty database at once ("tune" in ASCII).
constexpr int64_t kSchemaLockKey = 0x74756e65;

// The URL's keys that libpq does not know, with the valid ones for the message.
Status CheckKeywords(const PostgresUrl& url) {
  std::vector<std::string> known;
  if (PQconninfoOption* defaults = PQconndefaults()) {
    for (PQconninfoOption* o = defaults; o->keyword; ++o) known.push_back(o->keyword);
    PQconninfoFree(defaults);
  }
  if (known.empty()) return Status::Ok();  // let libpq judge
  for (const auto& [key, value] : url.params) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::vector<std::string> candidates = known;
    candidates.push_back("schema");
    return InvalidArgumentError(fmt::format(
        "storage '{}': unknown option '{}'{}; valid: schema (tune's) and libpq's connection "
        "keywords ({})",
        url.display, key, DidYouMean(key, candidates), JoinNames(known)));
  }
  return Status::Ok();
}

struct Inspection {
  bool empty = false;    // none of Optuna's tables: a new storage
  std::string revision;  // set when !empty
};

// What the database's current schema (search_path) holds. Reads only.
Result<Inspection> Inspect(PgConnection& conn) {
  std::vector<std::string> tables;
  {
    TUNE_ASSIGN_OR_RETURN(
        ScopedQuery q,
        ScopedQuery::Make(conn,
                          "SELECT c.relname FROM pg_catalog.pg_class c JOIN "
                          "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                          "n.nspname = current_schema() AND c.relkind IN ('r', 'p')"));
    while (true) {
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (!row) break;
      tables.push_back(q->Text(0));
    }
  }
  std::vector<std::string> missing;
  for (const std::string& t : internal::rdb::SchemaTables()) {
    if (std::find(tables.begin(), tables.end(), t) == tables.end()) missing.push_back(t);
  }
  Inspection out;
  if (missing.size() == internal::rdb::SchemaTables().size()) {
    // Other applications' tables may share the database; Optuna adds its own beside them.
    out.empty = true;
    return out;
  }
  if (!missing.empty()) {
    return InvalidArgumentError(fmt::format(
        "{} holds only part of an Optuna/tune storage (missing tables: {}); nothing was changed",
        conn.Where(), JoinNames(missing)));
  }
  std::vector<std::string> revisions;
  {
    TUNE_ASSIGN_OR_RETURN(ScopedQuery q,
                          ScopedQuery::Make(conn, "SELECT version_num FROM alembic_version"));
    while (true) {
      TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
      if (!row) break;
      revisions.push_back(q->Text(0));
    }
  }
  if (revisions.size() != 1) {
    return InvalidArgumentError(fmt::format(
        "{} records {} schema revisions in alembic_version ({}); tune needs exactly one of: {}",
        conn.Where(), revisions.size(), revisions.empty() ? "none" : JoinNames(revisions),
        internal::rdb::SupportedRevisionsText()));
  }
  out.revision = revisions[0];
  if (!internal::rdb::IsSupportedRevision(out.revision)) {
    return InvalidArgumentError(fmt::format(
        "{} has Optuna schema revision '{}', which tune does not support; supported: {}{}",
        conn.Where(), out.revision, internal::rdb::SupportedRevisionsText(),
        internal::rdb::IsOlderOptunaRevision(out.revision)
            ? fmt::format(". Upgrade it first: optuna storage upgrade --storage {}", conn.name())
            : ". The database was written by a newer Optuna"));
  }
  return out;
}

// Inspect in a read transaction.
Result<Inspection> InspectInTransaction(PgConnection& conn) {
  TUNE_RETURN_IF_ERROR(conn.Begin(internal::rdb::TxKind::kRead));
  Result<Inspection> found = Inspect(conn);
  conn.Rollback();
  return found;
}

// Creates the schema in an empty database unless another process does it first: the advisory
// lock makes the others wait, and they then find the schema. DDL is transactional, so nobody
// sees half a schema.
Status CreateSchema(PgConnection& conn, const std::string& revision, int max_attempts) {
  Status last;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    TUNE_RETURN_IF_ERROR(conn.Begin(internal::rdb::TxKind::kWrite));
    Status s = conn.ExecScript(fmt::format("SELECT pg_advisory_xact_lock({})", kSchemaLockKey));
    Result<Inspection> now = s.ok() ? Inspect(conn) : Result<Inspection>(s);
    s = now.status();
    if (s.ok() && now->empty) {
      for (const std::string& sql :
           internal::rdb::CreateSchemaStatements(internal::rdb::Dialect::kPostgres, revision)) {
        s = conn.ExecScript(sql);
        if (!s.ok()) break;
      }
    }
    if (s.ok()) s = conn.Commit();
    if (s.ok()) return s;
    conn.Rollback();
    if (s.code() != StatusCode::kUnavailable) return s;
    last = s;
  }
  return UnavailableError(fmt::format("creating the schema: {}", last.message()));
}

}  // namespace

bool PostgresAvailable() { return true; }

Result<std::unique_ptr<Storage>> OpenPostgresStorage(const PostgresUrl& url) {
  const PostgresOptions& options = url.options;
  if (options.schema_revision && !internal::rdb::IsSupportedRevision(*options.schema_revision)) {
    return InvalidArgumentError(
        fmt::format("unknown schema revision '{}'{}; supported: {}", *options.schema_revision,
                    DidYouMean(*options.schema_revision, internal::rdb::SupportedRevisions()),
                    internal::rdb::SupportedRevisionsText()));
  }
  TUNE_RETURN_IF_ERROR(CheckKeywords(url));
  PgConnection::OpenOptions open;
  open.read_only = options.read_only;
  open.connect_timeout_seconds = options.connect_timeout_seconds;
  TUNE_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn,
                        PgConnection::Open(url.params, url.display, open));

  TUNE_ASSIGN_OR_RETURN(Inspection found, InspectInTransaction(*conn));
  if (found.empty && (options.read_only || !options.create_if_missing)) {
    return NotFoundError(fmt::format(
        "{} holds no Optuna/tune storage (no studies); run a study on it first", conn->Where()));
  }
  if (!found.empty && options.schema_revision && *options.schema_revision != found.revision) {
    return InvalidArgumentError(fmt::format(
        "{} has schema revision {}, but {} was asked for; the revision is chosen when the schema "
        "is created and tune never migrates one (drop the schema option to use it as it is)",
        conn->Where(), found.revision, *options.schema_revision));
  }
  if (found.empty) {
    const std::string revision = options.schema_revision.value_or(kDefaultPostgresSchemaRevision);
    TUNE_RETURN_IF_ERROR(CreateSchema(*conn, revision, options.max_attempts));
    TUNE_ASSIGN_OR_RETURN(found, InspectInTransaction(*conn));
    if (found.empty)
      return InternalError(fmt::format("{}: the schema was not created", url.display));
    if (options.schema_revision && *options.schema_revision != found.revision) {
      return InvalidArgumentError(fmt::format(
          "{} was just given schema revision {} by another process, but {} was asked for",
          conn->Where(), found.revision, *options.schema_revision));
    }
    spdlog::debug("created the Optuna schema {} in {}", found.revision, conn->Where());
  }
  internal::rdb::RdbStorageOptions rdb_options;
  rdb_options.url = url.display;
  rdb_options.max_attempts = options.max_attempts;
  rdb_options.row_locks = true;
  return internal::rdb::NewRdbStorage(std::move(conn), std::move(rdb_options));
}

Result<std::unique_ptr<Storage>> OpenPostgresStorage(const std::string& url) {
  TUNE_ASSIGN_OR_RETURN(PostgresUrl parsed, ParsePostgresUrl(url));
  return OpenPostgresStorage(parsed);
}

}  // namespace tune
