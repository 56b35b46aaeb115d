// OpenPostgresStorage: connects, checks that the database holds an Optuna schema tune knows (or
// creates one in an empty database), and hands the connection to the shared RDB storage with
// row locks on.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "storages/postgres/postgres_connection.h"
#include "storages/rdb/open_schema.h"
#include "storages/rdb/rdb_storage.h"
#include "storages/rdb/schema.h"
#include "tune/storages/postgres.h"
#include "util/text.h"

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

using internal::rdb::Inspection;

// What the database's current schema (search_path) holds. Reads only.
Result<Inspection> Inspect(PgConnection& conn) {
  TUNE_ASSIGN_OR_RETURN(
      std::vector<std::string> tables,
      internal::rdb::QueryTexts(conn,
                                "SELECT c.relname FROM pg_catalog.pg_class c JOIN "
                                "pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE "
                                "n.nspname = current_schema() AND c.relkind IN ('r', 'p')"));
  const std::vector<std::string> missing = internal::rdb::MissingTables(tables);
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
  const internal::rdb::DatabaseNaming naming{
      conn.Where(),
      fmt::format("Upgrade it first: optuna storage upgrade --storage {}", conn.name()),
      "The database was written by a newer Optuna"};
  TUNE_ASSIGN_OR_RETURN(out.revision, internal::rdb::CheckedRevision(conn, naming));
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
  return internal::rdb::CreateSchemaIfEmpty(
      conn, internal::rdb::Dialect::kPostgres, revision, max_attempts, conn.Where(),
      [&] {
        return conn.ExecScript(fmt::format("SELECT pg_advisory_xact_lock({})", kSchemaLockKey));
      },
      [&] { return Inspect(conn); });
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
  rdb_options.dialect = internal::rdb::Dialect::kPostgres;
  rdb_options.row_locks = true;
  return internal::rdb::NewRdbStorage(std::move(conn), std::move(rdb_options));
}

Result<std::unique_ptr<Storage>> OpenPostgresStorage(const std::string& url) {
  TUNE_ASSIGN_OR_RETURN(PostgresUrl parsed, ParsePostgresUrl(url));
  return OpenPostgresStorage(parsed);
}

}  // namespace tune
