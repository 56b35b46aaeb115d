#include "storages/rdb/open_schema.h"

#include <fmt/format.h>

#include <algorithm>

#include "util/text.h"

namespace tune::internal::rdb {

Result<std::vector<std::string>> QueryTexts(Connection& conn, const std::string& sql) {
  std::vector<std::string> out;
  TUNE_ASSIGN_OR_RETURN(ScopedQuery q, ScopedQuery::Make(conn, sql));
  while (true) {
    TUNE_ASSIGN_OR_RETURN(bool row, q.Next());
    if (!row) break;
    out.push_back(q->Text(0));
  }
  return out;
}

std::vector<std::string> MissingTables(const std::vector<std::string>& tables) {
  std::vector<std::string> missing;
  for (const std::string& t : SchemaTables()) {
    if (std::find(tables.begin(), tables.end(), t) == tables.end()) missing.push_back(t);
  }
  return missing;
}

Result<std::string> CheckedRevision(Connection& conn, const DatabaseNaming& naming) {
  TUNE_ASSIGN_OR_RETURN(std::vector<std::string> revisions,
                        QueryTexts(conn, "SELECT version_num FROM alembic_version"));
  if (revisions.size() != 1) {
    return InvalidArgumentError(fmt::format(
        "{} records {} schema revisions in alembic_version ({}); tune needs exactly one of: {}",
        naming.where, revisions.size(), revisions.empty() ? "none" : JoinNames(revisions),
        SupportedRevisionsText()));
  }
  const std::string& revision = revisions[0];
  if (!IsSupportedRevision(revision)) {
    return InvalidArgumentError(fmt::format(
        "{} has Optuna schema revision '{}', which tune does not support; supported: {}. {}",
        naming.where, revision, SupportedRevisionsText(),
        IsOlderOptunaRevision(revision) ? naming.upgrade_hint : naming.newer_hint));
  }
  return revision;
}

Status CreateSchemaIfEmpty(Connection& conn, Dialect dialect, const std::string& revision,
                           int max_attempts, const std::string& where,
                           const std::function<Status()>& lock,
                           const std::function<Result<Inspection>()>& inspect) {
  Status last;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    Status s = conn.Begin(TxKind::kWrite);
    if (s.ok() && lock) s = lock();
    Result<Inspection> now = s.ok() ? inspect() : Result<Inspection>(s);
    s = now.status();
    if (s.ok() && now->empty) {
      for (const std::string& sql : CreateSchemaStatements(dialect, revision)) {
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
  return UnavailableError(fmt::format("creating the schema in {}: {}", where, last.message()));
}

}  // namespace tune::internal::rdb
