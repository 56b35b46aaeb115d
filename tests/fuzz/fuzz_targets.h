// The fuzz targets: each hands one input to one of tune's readers of untrusted bytes, through the
// reader's own entry point, and returns 0 (libFuzzer's contract). An input may be refused with an
// error; it may not crash, hang, leak or do anything undefined. docs/overview.md ("Fuzzing and
// sanitizers") lists what each covers.
//
// Two programs call them: fuzz_<name> (libfuzzer_main.cpp, TUNE_FUZZ builds with clang, `make
// fuzz`), and tune_fuzz_replay_tests (fuzz_replay_test.cpp, every build), which runs each file of
// tests/fuzz/corpus/<name>/ once so that the targets keep building and every finding stays fixed.
#pragma once

#include <string_view>

namespace tune::fuzz {

int FuzzPickle(std::string_view bytes);         // Unpickle, a run of pickles
int FuzzPytorchBin(std::string_view bytes);     // ReadPytorchCheckpoint + every tensor's floats
int FuzzSafetensors(std::string_view bytes);    // SafetensorsFile::Open + ReadFloats
int FuzzShardIndex(std::string_view bytes);     // CheckpointWeights::Open(*.index.json)
int FuzzTokenizerJson(std::string_view bytes);  // tokenizer.json, then encoding text with it
int FuzzVocabTxt(std::string_view bytes);       // vocab.txt, then encoding text with it
int FuzzBpeFiles(std::string_view bytes);       // vocab.json NUL merges.txt, then encoding
int FuzzConfig(std::string_view bytes);         // ParseStudyConfigText: the whole config loader
int FuzzDataJsonl(std::string_view bytes);      // ParseDataTable(jsonl)
int FuzzDataCsv(std::string_view bytes);        // ParseDataTable(csv)
int FuzzDataTsv(std::string_view bytes);        // ParseDataTable(tsv)
int FuzzCommandLines(std::string_view bytes);   // a command objective's stdout, line by line
int FuzzStorageUrl(std::string_view bytes);     // ParsePostgresUrl and ParseSqliteUrl

struct FuzzTarget {
  const char* name;  // fuzz_<name>; its seeds are tests/fuzz/corpus/<name>/
  int (*run)(std::string_view bytes);
};

// pytorch_zip and pytorch_legacy are the same reader with the two formats' seeds.
inline constexpr FuzzTarget kFuzzTargets[] = {
    {"pickle", FuzzPickle},
    {"pytorch_zip", FuzzPytorchBin},
    {"pytorch_legacy", FuzzPytorchBin},
    {"safetensors", FuzzSafetensors},
    {"shard_index", FuzzShardIndex},
    {"tokenizer_json", FuzzTokenizerJson},
    {"vocab_txt", FuzzVocabTxt},
    {"bpe", FuzzBpeFiles},
    {"config", FuzzConfig},
    {"data_jsonl", FuzzDataJsonl},
    {"data_csv", FuzzDataCsv},
    {"data_tsv", FuzzDataTsv},
    {"command_lines", FuzzCommandLines},
    {"storage_url", FuzzStorageUrl},
};

}  // namespace tune::fuzz
