// tune_postgres in a build without libpq (CMake found no PostgreSQL client library): URLs still
// parse, opening says how to get the backend.
#include <fmt/format.h>

#include "tune/storages/postgres.h"

namespace tune {

bool PostgresAvailable() { return false; }

Result<std::unique_ptr<Storage>> OpenPostgresStorage(const PostgresUrl& url) {
  return InvalidArgumentError(fmt::format(
      "storage '{}': this tune was built without PostgreSQL support (libpq was not found); "
      "install libpq-dev (scripts/install-deps.sh) and rebuild, or use sqlite:///PATH",
      url.display));
}

Result<std::unique_ptr<Storage>> OpenPostgresStorage(const std::string& url) {
  TUNE_ASSIGN_OR_RETURN(PostgresUrl parsed, ParsePostgresUrl(url));
  return OpenPostgresStorage(parsed);
}

}  // namespace tune
