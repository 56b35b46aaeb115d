// A fixture for CLI tests of one study file: a fresh directory, an SQLite storage in it, and Run(),
// which runs tune there with --storage added.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/temp_dir.h"
#include "testing/tune_process.h"

namespace tune::testing {

class SqliteCliTest : public ::testing::Test {
 protected:
  ProcessRun Run(std::vector<std::string> args) {
    args.insert(args.end(), {"--storage", url_});
    return Tune(args, dir_.path().string());
  }

  TempDir dir_;
  const std::string url_ = "sqlite:///" + (dir_.path() / "s.db").string();
};

}  // namespace tune::testing
