#include "storages/postgres/postgres_connection.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <optional>

namespace tune::internal::postgres {
namespace {

// SQLSTATEs worth retrying the whole transaction for.
bool Retryable(const std::string& state) {
  return state == "40001"                // serialization_failure
         || state == "40P01"             // deadlock_detected
         || state == "55P03"             // lock_not_available
         || state.rfind("08", 0) == 0    // connection exceptions
         || state.rfind("57P", 0) == 0;  // admin/crash shutdown, cannot connect now
}

// libpq messages end with newlines and indent their hints with tabs: one line.
std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  std::string out;
  for (char c : text) {
    if (c == ' ' && !out.empty() && out.back() == ' ') continue;
    out += c;
  }
  return out;
}

// `?` -> $1, $2, ... (the shared SQL has no `?` inside literals); returns the count.
std::string Numbered(const std::string& sql, int* n_params) {
  std::string out;
  int n = 0;
  for (char c : sql) {
    if (c == '?') {
      out += "$" + std::to_string(++n);
    } else {
      out += c;
    }
  }
  *n_params = n;
  return out;
}

}  // namespace

class PgStatement : public rdb::Statement {
 public:
  PgStatement(PgConnection* conn, std::string name, std::string sql, int n_params)
      : conn_(conn),
        name_(std::move(name)),
        sql_(std::move(sql)),
        n_params_(n_params),
        values_(static_cast<size_t>(n_params)) {}
  ~PgStatement() override { PQclear(result_); }
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;

  void BindNull(int index) override { Set(index, std::nullopt); }
  void BindInt(int index, int64_t value) override { Set(index, std::to_string(value)); }
  // Shortest text that parses back to the same double; float8 reads Infinity/NaN too.
  void BindDouble(int index, double value) override {
    if (std::isnan(value)) {
      Set(index, "NaN");
    } else if (std::isinf(value)) {
      Set(index, value > 0 ? "Infinity" : "-Infinity");
    } else {
      Set(index, fmt::format("{}", value));
    }
  }
  void BindText(int index, std::string_view value) override { Set(index, std::string(value)); }

  Result<bool> Step() override {
    if (!executed_) {
      if (bad_index_) {
        return InternalError(fmt::format("{}: binding parameter {} of '{}': no such parameter",
                                         conn_->name(), *bad_index_, sql_));
      }
      std::vector<const char*> values;
      for (const auto& v : values_) values.push_back(v ? v->c_str() : nullptr);
      TUNE_RETURN_IF_ERROR(conn_->ExecPrepared(name_, sql_, n_params_, values, &result_));
      executed_ = true;
      row_ = 0;
    } else {
      ++row_;
    }
    return row_ < PQntuples(result_);
  }

  bool IsNull(int column) const override { return PQgetisnull(result_, row_, column) != 0; }
  int64_t Int(int column) const override {
    return std::strtoll(PQgetvalue(result_, row_, column), nullptr, 10);
  }
  double Double(int column) const override {
    return std::strtod(PQgetvalue(result_, row_, column), nullptr);
  }
  std::string Text(int column) const override {
    return std::string(PQgetvalue(result_, row_, column),
                       static_cast<size_t>(PQgetlength(result_, row_, column)));
  }

  void Reset() override {
    PQclear(result_);
    result_ = nullptr;
    executed_ = false;
    row_ = 0;
    bad_index_.reset();
    for (auto& v : values_) v.reset();
  }

 private:
  void Set(int index, std::optional<std::string> value) {
    if (index < 1 || index > n_params_) {
      if (!bad_index_) bad_index_ = index;
      return;
    }
    values_[static_cast<size_t>(index - 1)] = std::move(value);
  }

  PgConnection* conn_;
  const std::string name_;  // server-side prepared statement name
  const std::string sql_;   // with $n placeholders
  const int n_params_;
  std::vector<std::optional<std::string>> values_;
  std::optional<int> bad_index_;
  PGresult* result_ = nullptr;
  bool executed_ = false;
  int row_ = 0;
};

Result<std::unique_ptr<PgConnection>> PgConnection::Open(
    const std::vector<std::pair<std::string, std::string>>& params, const std::string& name,
    const OpenOptions& options) {
  // Defaults first: libpq keeps the last value of a repeated keyword, so the URL's win.
  std::vector<std::pair<std::string, std::string>> all = {
      {"connect_timeout", std::to_string(options.connect_timeout_seconds)},
      {"application_name", "tune"},
  };
  all.insert(all.end(), params.begin(), params.end());
  all.emplace_back("client_encoding", "UTF8");  // the codec reads and writes UTF-8
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : all) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/0);
  if (!conn) return InternalError(fmt::format("{}: out of memory connecting", name));
  std::unique_ptr<PgConnection> out(new PgConnection(conn, name, options));
  // Server notices (warnings) go to the debug log, not straight to stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char* message) { spdlog::debug("PostgreSQL: {}", OneLine(message)); },
      nullptr);
  if (PQstatus(conn) != CONNECTION_OK) {
    return InvalidArgumentError(fmt::format("cannot connect to PostgreSQL {} ({}): {}",
                                            out->Where(), name, OneLine(PQerrorMessage(conn))));
  }
  if (PQserverVersion(conn) < 90500) {
    return FailedPreconditionError(fmt::format(
        "{}: the PostgreSQL storage needs server version >= 9.5 (ON CONFLICT, SKIP LOCKED); "
        "this is {}",
        name, PQparameterStatus(conn, "server_version")));
  }
  TUNE_RETURN_IF_ERROR(out->ConfigureSession());
  return out;
}

PgConnection::PgConnection(PGconn* conn, std::string name, OpenOptions options)
    : conn_(conn), name_(std::move(name)), options_(options) {}

PgConnection::~PgConnection() {
  statements_.clear();
  PQfinish(conn_);
}

std::string PgConnection::Where() const {
  const char* db = PQdb(conn_);
  const char* host = PQhost(conn_);
  const char* port = PQport(conn_);
  const char* user = PQuser(conn_);
  std::string h = host && *host ? host : "localhost";
  if (!h.empty() && h[0] == '/') h = "socket " + h;
  return fmt::format("database '{}' on {}:{} as user '{}'", db ? db : "", h,
                     port && *port ? port : "5432", user ? user : "");
}

Status PgConnection::ConfigureSession() {
  // ISO dates ("YYYY-MM-DD HH:MM:SS.ffffff") whatever the server's default; float8 text that
  // parses back to the same double (the default on >= 12; 17 digits before).
  std::string sql = "SET DateStyle = 'ISO, YMD'; SET extra_float_digits = 3";
  if (options_.read_only) sql += "; SET default_transaction_read_only = on";
  return ExecScript(sql);
}

Status PgConnection::Reconnect() {
  PQreset(conn_);
  prepared_.clear();
  changes_ = 0;
  if (PQstatus(conn_) != CONNECTION_OK) {
    return UnavailableError(fmt::format("{}: lost the connection to {} and cannot reconnect: {}",
                                        name_, Where(), OneLine(PQerrorMessage(conn_))));
  }
  return ConfigureSession();
}

Status PgConnection::Error(const PGresult* result, const std::string& what) {
  const char* state_field = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string state = state_field ? state_field : "";
  std::string message;
  if (const char* primary =
          result ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr) {
    message = primary;
    if (const char* detail = PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL)) {
      message += fmt::format(" ({})", detail);
    }
  } else {
    message = PQerrorMessage(conn_);
  }
  std::string text = fmt::format("{}: {}: {}", name_, what, OneLine(message));
  if (PQstatus(conn_) != CONNECTION_OK) {
    return UnavailableError(fmt::format("{}: {}: lost the connection to {}: {}", name_, what,
                                        Where(), OneLine(message)));
  }
  if (Retryable(state)) return UnavailableError(text);
  if (state == "23505") return AlreadyExistsError(text);       // unique_violation
  if (state == "25006") return FailedPreconditionError(text);  // read_only_sql_transaction
  return InternalError(text + (state.empty() ? "" : " [SQLSTATE " + state + "]"));
}

Result<rdb::Statement*> PgConnection::Prepare(const std::string& sql) {
  if (auto it = statements_.find(sql); it != statements_.end()) return it->second.get();
  int n_params = 0;
  std::string numbered = Numbered(sql, &n_params);
  auto owned = std::make_unique<PgStatement>(this, "tune_" + std::to_string(statements_.size() + 1),
                                             std::move(numbered), n_params);
  rdb::Statement* raw = owned.get();
  statements_.emplace(sql, std::move(owned));
  return raw;
}

Status PgConnection::ExecPrepared(const std::string& statement_name, const std::string& sql,
                                  int n_params, const std::vector<const char*>& values,
                                  PGresult** result) {
  auto what = [&] {
    return fmt::format("'{}'", sql.size() > 200 ? sql.substr(0, 200) + "..." : sql);
  };
  if (!prepared_.count(statement_name)) {
    PGresult* prepared =
        PQprepare(conn_, statement_name.c_str(), sql.c_str(), n_params, /*paramTypes=*/nullptr);
    if (PQresultStatus(prepared) != PGRES_COMMAND_OK) {
      Status s = Error(prepared, "preparing " + what());
      PQclear(prepared);
      return s;
    }
    PQclear(prepared);
    prepared_.insert(statement_name);
  }
  PGresult* res = PQexecPrepared(conn_, statement_name.c_str(), n_params, values.data(),
                                 /*paramLengths=*/nullptr, /*paramFormats=*/nullptr,
                                 /*resultFormat=*/0);
  const ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    Status s = Error(res, what());
    PQclear(res);
    return s;
  }
  const char* tuples = PQcmdTuples(res);
  changes_ = tuples && *tuples ? std::strtoll(tuples, nullptr, 10) : 0;
  PQclear(*result);
  *result = res;
  return Status::Ok();
}

Status PgConnection::ExecScript(const std::string& sql) {
  PGresult* res = PQexec(conn_, sql.c_str());
  const ExecStatusType st = PQresultStatus(res);
  Status s;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    s = Error(res, fmt::format("'{}'", sql.size() > 80 ? sql.substr(0, 80) + "..." : sql));
  } else if (std::string(PQcmdStatus(res)) == "ROLLBACK" && sql == "COMMIT") {
    // COMMIT of a failed transaction "succeeds" by rolling back.
    s = UnavailableError(fmt::format("{}: the transaction was rolled back", name_));
  }
  PQclear(res);
  return s;
}

Status PgConnection::Begin(rdb::TxKind kind) {
  if (PQstatus(conn_) != CONNECTION_OK) TUNE_RETURN_IF_ERROR(Reconnect());
  if (PQtransactionStatus(conn_) != PQTRANS_IDLE) Rollback();
  // Reads: one snapshot for all their SELECTs. Writes: READ COMMITTED, so a statement after a
  // row lock sees everything committed by the lock's previous holder.
  return ExecScript(kind == rdb::TxKind::kWrite
                        ? "BEGIN ISOLATION LEVEL READ COMMITTED"
                        : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
}

Status PgConnection::Commit() { return ExecScript("COMMIT"); }

void PgConnection::Rollback() {
  const PGTransactionStatusType st = PQtransactionStatus(conn_);
  if (st == PQTRANS_INTRANS || st == PQTRANS_INERROR) (void)ExecScript("ROLLBACK");
}

int64_t PgConnection::Changes() { return changes_; }

Result<std::optional<int64_t>> PgConnection::DataVersion() { return std::optional<int64_t>(); }

}  // namespace tune::internal::postgres
