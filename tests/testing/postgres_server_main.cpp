// tune_test_postgres_server: starts and stops the one PostgreSQL server of a ctest run (fixture
// postgres_server in tests/CMakeLists.txt), so test processes need not start their own.
//
//   tune_test_postgres_server start STATE   initdb + pg_ctl start; writes STATE (key=value lines:
//                                           url, port, dir, ...) or, when the server cannot
//                                           start, error=REASON (the tests then skip, saying so)
//   tune_test_postgres_server stop STATE    stops the server of STATE and deletes its files
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "testing/postgres_server.h"

namespace {

int Start(const std::string& state_path) {
  namespace fs = std::filesystem;
  using tune::testing::PostgresServer;
  // A server left over by an interrupted run.
  if (fs::exists(state_path)) {
    auto old = tune::testing::ReadState(state_path);
    if (old.count("dir") && !old["dir"].empty()) PostgresServer::Describe(old)->Stop();
    fs::remove(state_path);
  }
  std::string error;
  std::unique_ptr<PostgresServer> server = PostgresServer::Start(&error);
  const std::string tmp = state_path + ".tmp";
  {
    std::ofstream out(tmp);
    if (server) {
      out << server->State();
    } else {
      out << "error=" << error << "\n";
    }
  }
  fs::rename(tmp, state_path);
  if (!server) {
    std::cout << "\n"
              << "************************************************************************\n"
              << "*** PostgreSQL test server could NOT start: the PostgreSQL tests will\n"
              << "*** be reported as SKIPPED. Reason: " << error << "\n"
              << "************************************************************************\n";
    return 77;  // ctest: SKIP_RETURN_CODE
  }
  std::cout << "PostgreSQL test server: " << server->AdminUrl() << " (files in " << server->dir()
            << ")\n";
  server->Detach();  // it outlives this process; `stop` ends it
  return 0;
}

int Stop(const std::string& state_path) {
  namespace fs = std::filesystem;
  if (!fs::exists(state_path)) return 0;
  auto state = tune::testing::ReadState(state_path);
  if (state.count("dir") && !state["dir"].empty()) {
    tune::testing::PostgresServer::Describe(state)->Stop();
    std::cout << "stopped the PostgreSQL test server in " << state["dir"] << "\n";
  }
  fs::remove(state_path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: tune_test_postgres_server start|stop STATE_FILE";
  if (argc != 3) {
    std::cerr << usage << "\n";
    return 2;
  }
  const std::string command = argv[1];
  if (command == "start") return Start(argv[2]);
  if (command == "stop") return Stop(argv[2]);
  std::cerr << usage << "\n";
  return 2;
}
