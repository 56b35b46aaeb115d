// Fuzz targets of the text readers: a study's config file through the whole config loader
// (src/config/), JSONL, CSV and TSV training data (src/train/text_data.h), the lines a command
// objective's program prints (src/objectives/report_reader.h), and storage URLs.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include "config/config.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_targets.h"
#include "objectives/report_reader.h"
#include "train/text_data.h"
#include "tune/pruners/percentile.h"
#include "tune/samplers/random.h"
#include "tune/storages/in_memory.h"
#include "tune/storages/postgres.h"
#include "tune/storages/sqlite.h"
#include "tune/study.h"

namespace tune::fuzz {

int FuzzConfig(std::string_view bytes) {
  // Relative paths in the config resolve inside the scratch folder.
  (void)ParseStudyConfigText(std::string(bytes), ScratchDir() / "config" / "study.json");
  return 0;
}

namespace {

void FuzzData(std::string_view bytes, const char* format) {
  Result<DataTable> table = ParseDataTable(std::string(bytes), "fuzz.data", format);
  if (!table.ok()) return;
  for (const DataRow& row : table->rows) {
    for (const auto& [column, value] : row.fields.items()) (void)FieldNumber(value);
  }
}

}  // namespace

int FuzzDataJsonl(std::string_view bytes) {
  FuzzData(bytes, "jsonl");
  return 0;
}
int FuzzDataCsv(std::string_view bytes) {
  FuzzData(bytes, "csv");
  return 0;
}
int FuzzDataTsv(std::string_view bytes) {
  FuzzData(bytes, "tsv");
  return 0;
}

int FuzzCommandLines(std::string_view bytes) {
  // A real trial of a fresh in-memory study with a median pruner: reports reach the trial and
  // its pruner as they do in a run.
  Result<std::unique_ptr<Study>> study =
      Study::CreateOrLoad(NewInMemoryStorage(), "fuzz", {StudyDirection::kMinimize},
                          std::make_unique<RandomSampler>(), std::make_unique<MedianPruner>(), 1);
  if (!study.ok()) return 0;
  Result<std::unique_ptr<Trial>> trial = (*study)->Ask();
  if (!trial.ok()) return 0;
  std::set<int64_t> earlier;
  ReportReader reader(**trial, ScratchDir() / "pruner.jsonl", earlier);
  size_t begin = 0;
  while (begin <= bytes.size()) {
    const size_t end = std::min(bytes.find('\n', begin), bytes.size());
    if (!reader.OnStdoutLine(std::string(bytes.substr(begin, end - begin))).ok()) break;
    begin = end + 1;
  }
  // The same bytes as the result file ($TUNE_RESULT_FILE).
  (void)reader.ReadResultFile(WriteScratchFile("result.json", bytes));
  return 0;
}

int FuzzStorageUrl(std::string_view bytes) {
  const std::string url(bytes);
  (void)ParsePostgresUrl(url);
  (void)ParseSqliteUrl(url);
  return 0;
}

}  // namespace tune::fuzz
