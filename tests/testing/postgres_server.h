// A throwaway PostgreSQL server for the tests, and each test process's way to it.
//
// PostgresServer::Start runs Debian's initdb (or TUNE_TEST_POSTGRES_BINDIR's) in a new temp dir and
// `pg_ctl start` on a free 127.0.0.1 port (trust authentication, fsync off, the unix socket in the
// temp dir). As root it runs the server as the `postgres` system user (else `nobody`), since initdb
// refuses root.
//
// TestPostgres::Get() is the server of this test process, in this order:
//   1. TUNE_TEST_POSTGRES_URL: an existing server (an admin URL that may CREATE DATABASE);
//   2. TUNE_TEST_POSTGRES_STATE: the file `tune_test_postgres_server start` wrote for the whole
//      ctest run (tests/CMakeLists.txt: fixture postgres_server), holding the URL or the reason
//      the server could not start;
//   3. otherwise a server started now and stopped when the process exits.
// When there is no server, skip_reason() says why: tests call TUNE_SKIP_WITHOUT_POSTGRES()
// and are reported as skipped, with the reason, never as passed.
#pragma once

#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace tune::testing {

// Runs argv (no shell) with stdout and stderr appended to `log`; as `run_as` (via runuser)
// when set. Returns the exit status, or -1 if it could not run or died of a signal.
inline int RunProgram(std::vector<std::string> argv, const std::string& log,
                      const std::string& run_as = "") {
  if (!run_as.empty()) argv.insert(argv.begin(), {"runuser", "-u", run_as, "--"});
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The last `n` lines of a log, for error messages.
inline std::string Tail(const std::string& text, int n = 6) {
  size_t pos = text.size();
  for (int i = 0; i <= n && pos != std::string::npos && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos ? text : text.substr(pos + 1);
}

// TUNE_TEST_POSTGRES_BINDIR if set, else Debian's newest /usr/lib/postgresql/N/bin with initdb,
// else the directory of `initdb` on PATH; "" if none.
inline std::string FindPostgresBinDir() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("TUNE_TEST_POSTGRES_BINDIR"); dir && *dir) return dir;
  int best = -1;
  std::string out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = e.path().filename().string();
    int version = std::atoi(name.c_str());
    if (version > best && fs::exists(e.path() / "bin" / "initdb", ec)) {
      best = version;
      out = (e.path() / "bin").string();
    }
  }
  if (!out.empty()) return out;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (!dir.empty() && access((fs::path(dir) / "initdb").c_str(), X_OK) == 0) return dir;
    }
  }
  return "";
}

// A TCP port on 127.0.0.1 that nobody listened on a moment ago.
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

class PostgresServer {
 public:
  // nullptr with *error on failure (which program failed, and the end of its log).
  static std::unique_ptr<PostgresServer> Start(std::string* error) {
    namespace fs = std::filesystem;
    auto server = std::unique_ptr<PostgresServer>(new PostgresServer());
    server->bindir_ = FindPostgresBinDir();
    if (server->bindir_.empty()) {
      *error =
          "no initdb found (Debian: apt-get install postgresql; looked in "
          "/usr/lib/postgresql/*/bin and PATH)";
      return nullptr;
    }
    // As root the server runs as another user, who may not reach $TMPDIR (say under /root).
    const fs::path tmp = geteuid() == 0 ? fs::path("/tmp") : fs::temp_directory_path();
    std::string templ = (tmp / "tune-pg-XXXXXX").string();
    if (!mkdtemp(templ.data())) {
      *error = "cannot create a temp dir for the server";
      return nullptr;
    }
    server->dir_ = templ;
    server->owns_files_ = true;  // removed by the destructor if anything below fails
    if (geteuid() == 0) {
      // initdb refuses to run as root.
      const passwd* pw = getpwnam("postgres");
      if (!pw) pw = getpwnam("nobody");
      if (!pw) {
        *error = "running as root and there is no 'postgres' or 'nobody' user to run the server";
        return nullptr;
      }
      server->run_as_ = pw->pw_name;
      if (chown(server->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        *error = "cannot chown " + server->dir_ + " to " + server->run_as_;
        return nullptr;
      }
    }
    const std::string data = server->dir_ + "/data";
    const std::string log = server->dir_ + "/setup.log";
    const int initdb = RunProgram({server->bindir_ + "/initdb", "-D", data, "-U", "postgres", "-A",
                                   "trust", "-E", "UTF8", "--no-locale", "--no-sync"},
                                  log, server->run_as_);
    if (initdb != 0) {
      *error = "initdb failed (exit " + std::to_string(initdb) + "): " + Tail(ReadFile(log));
      return nullptr;
    }
    // A port found free may be taken before the server binds it: try a few.
    for (int attempt = 0; attempt < 3; ++attempt) {
      server->port_ = FreePort();
      const std::string options = "-p " + std::to_string(server->port_) + " -k " + server->dir_ +
                                  " -c listen_addresses=127.0.0.1 -c fsync=off"
                                  " -c full_page_writes=off -c synchronous_commit=off";
      const int started =
          RunProgram({server->bindir_ + "/pg_ctl", "-D", data, "-l", server->dir_ + "/server.log",
                      "-w", "-t", "60", "-o", options, "start"},
                     log, server->run_as_);
      if (started == 0) return server;
      *error = "pg_ctl start failed (exit " + std::to_string(started) +
               "): " + Tail(ReadFile(server->dir_ + "/server.log"));
    }
    return nullptr;
  }

  // A server described by the fixture's state file (see State()), not owned: this object never
  // stops it on its own (Stop() does).
  static std::unique_ptr<PostgresServer> Describe(const std::map<std::string, std::string>& state) {
    auto server = std::unique_ptr<PostgresServer>(new PostgresServer());
    server->port_ = std::atoi(state.count("port") ? state.at("port").c_str() : "0");
    server->dir_ = state.count("dir") ? state.at("dir") : "";
    server->bindir_ = state.count("bindir") ? state.at("bindir") : "";
    server->run_as_ = state.count("run_as") ? state.at("run_as") : "";
    return server;
  }

  ~PostgresServer() {
    if (owns_files_) Stop();
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Stops the server (immediate mode: it is thrown away) and deletes its files.
  void Stop() {
    if (!dir_.empty() && std::filesystem::exists(dir_ + "/data/postmaster.pid")) {
      RunProgram({bindir_ + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"},
                 "/dev/null", run_as_);
    }
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
    owns_files_ = false;
  }

  // Hands the server over to whoever keeps State(): the destructor leaves it running.
  void Detach() { owns_files_ = false; }

  // key=value lines for the fixture's state file.
  std::string State() const {
    return "url=" + AdminUrl() + "\nport=" + std::to_string(port_) + "\ndir=" + dir_ +
           "\nbindir=" + bindir_ + "\nrun_as=" + run_as_ + "\n";
  }

  // The superuser's URL on the maintenance database.
  std::string AdminUrl() const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
  }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

 private:
  PostgresServer() = default;

  std::string bindir_;
  std::string dir_;
  std::string run_as_;  // empty: this process's user
  int port_ = 0;
  bool owns_files_ = false;  // Start()ed here, not Describe()d
};

inline std::map<std::string, std::string> ReadState(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

// `url` (postgresql://...[/db][?query]) with the database replaced by `db`.
inline std::string WithDatabase(const std::string& url, const std::string& db) {
  const size_t authority = url.find("://");
  const size_t start = authority == std::string::npos ? 0 : authority + 3;
  const size_t query = url.find('?', start);
  const size_t slash = url.find('/', start);
  const size_t end = query == std::string::npos ? url.size() : query;
  const size_t path = slash == std::string::npos || slash > end ? end : slash;
  return url.substr(0, path) + "/" + db + url.substr(end);
}

// Runs `sql` on the database at `url` (plain libpq, outside tune). Rows as text, "NULL" for
// null; *error set (and no rows) on failure.
inline std::vector<std::vector<std::string>> PgQuery(const std::string& url, const std::string& sql,
                                                     std::string* error = nullptr) {
  std::vector<std::vector<std::string>> rows;
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    if (error) *error = PQerrorMessage(conn);
    PQfinish(conn);
    return rows;
  }
  PGresult* res = PQexec(conn, sql.c_str());
  const ExecStatusType st = PQresultStatus(res);
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    if (error) *error = PQresultErrorMessage(res);
  } else {
    if (error) error->clear();
    for (int r = 0; r < PQntuples(res); ++r) {
      rows.emplace_back();
      for (int c = 0; c < PQnfields(res); ++c) {
        rows.back().push_back(PQgetisnull(res, r, c) ? "NULL" : PQgetvalue(res, r, c));
      }
    }
  }
  PQclear(res);
  PQfinish(conn);
  return rows;
}

class TestPostgres {
 public:
  static TestPostgres& Get() {
    static TestPostgres instance;
    return instance;
  }

  // Empty when a server is there; else why not.
  const std::string& skip_reason() const { return skip_reason_; }
  // The admin URL (superuser, maintenance database).
  const std::string& admin_url() const { return admin_url_; }

  // A new empty database named after `hint` (unique per process and call); its URL, or "" with
  // *error.
  std::string NewDatabase(const std::string& hint, std::string* error) {
    std::lock_guard lock(mu_);
    std::string name = "tune_";
    for (char c : hint) {
      name += std::isalnum(static_cast<unsigned char>(c))
                  ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                  : '_';
    }
    name = name.substr(0, 40) + "_" + std::to_string(getpid()) + "_" + std::to_string(++counter_);
    PgQuery(admin_url_, "CREATE DATABASE " + name, error);
    if (!error->empty()) return "";
    created_.push_back(name);
    return WithDatabase(admin_url_, name);
  }

  ~TestPostgres() {
    // Only on a server that outlives the tests; the others are deleted whole.
    if (external_) {
      for (const std::string& db : created_) {
        PgQuery(admin_url_, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
      }
    }
  }

 private:
  TestPostgres() {
    if (const char* url = std::getenv("TUNE_TEST_POSTGRES_URL"); url && *url) {
      admin_url_ = url;
      external_ = true;
    } else if (const char* state = std::getenv("TUNE_TEST_POSTGRES_STATE");
               state && *state && std::filesystem::exists(state)) {
      auto values = ReadState(state);
      if (values.count("error")) {
        skip_reason_ = "the test server could not start: " + values["error"];
      } else {
        admin_url_ = values["url"];
      }
    } else {
      std::string error;
      own_ = PostgresServer::Start(&error);
      if (own_) {
        admin_url_ = own_->AdminUrl();
      } else {
        skip_reason_ = "could not start a throwaway PostgreSQL server: " + error;
      }
    }
    if (skip_reason_.empty()) {
      std::string error;
      PgQuery(admin_url_, "SELECT 1", &error);
      if (!error.empty())
        skip_reason_ = "cannot reach the test server " + admin_url_ + ": " + error;
    }
    if (!skip_reason_.empty()) {
      std::cerr << "\n*** PostgreSQL tests are SKIPPED: " << skip_reason_ << " ***\n\n";
    }
  }

  std::mutex mu_;
  std::unique_ptr<PostgresServer> own_;  // started by this process; stopped at exit
  std::string admin_url_;
  std::string skip_reason_;
  bool external_ = false;
  int counter_ = 0;
  std::vector<std::string> created_;
};

}  // namespace tune::testing

// Skips the test (reported as skipped, with the reason) when there is no PostgreSQL server.
#define TUNE_SKIP_WITHOUT_POSTGRES()                                                        \
  do {                                                                                      \
    if (!::tune::testing::TestPostgres::Get().skip_reason().empty()) {                      \
      GTEST_SKIP() << "PostgreSQL: " << ::tune::testing::TestPostgres::Get().skip_reason(); \
    }                                                                                       \
  } while (0)
