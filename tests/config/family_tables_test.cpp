// The family tables (samplers, pruners, objective types): every row is reachable by name, its
// defaults are what parsing an empty options object gives, and docs/config.md names every key.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/config.h"
#include "tune/pruners/percentile.h"
#include "tune/samplers/tpe.h"

namespace tune {
namespace {

std::string ConfigDoc() {
  std::ifstream in(std::string(TUNE_SOURCE_DIR) + "/docs/config.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FamilyTables, EveryNamedSamplerAndPrunerIsMadeFromItsDefaults) {
  for (const std::string& name : SamplerNames()) {
    SamplerConfig c;
    c.name = name;
    for (const auto& [key, value] : SamplerOptionKeys(name)) c.options[key] = value;
    auto sampler = MakeSampler(c);
    ASSERT_TRUE(sampler.ok()) << name << ": " << sampler.status().ToString();
    EXPECT_EQ((*sampler)->name(), name);
  }
  for (const std::string& name : PrunerNames()) {
    PrunerConfig c;
    c.name = name;
    for (const auto& [key, value] : PrunerOptionKeys(name)) {
      if (!value.is_null()) c.options[key] = value;  // null: required or off
    }
    if (name == "percentile") c.options["percentile"] = 25.0;
    if (name == "threshold") c.options["upper"] = 1.0;
    if (name == "patient") c.options["patience"] = 2;
    auto pruner = MakePruner(c);
    ASSERT_TRUE(pruner.ok()) << name << ": " << pruner.status().ToString();
  }
}

// The defaults in the tables are the options structs' (one source).
TEST(FamilyTables, DefaultsComeFromTheOptionsStructs) {
  Json tpe = Json::object();
  for (const auto& [key, value] : SamplerOptionKeys("tpe")) tpe[key] = value;
  EXPECT_EQ(tpe["n_startup_trials"], TpeOptions{}.n_startup_trials);
  EXPECT_EQ(tpe["n_ei_candidates"], TpeOptions{}.n_ei_candidates);
  EXPECT_EQ(tpe["oom_feasibility"], TpeOptions{}.oom_feasibility);
  Json median = Json::object();
  for (const auto& [key, value] : PrunerOptionKeys("median")) median[key] = value;
  EXPECT_EQ(median["n_startup_trials"], PercentileOptions{}.n_startup_trials);
  EXPECT_FALSE(median.contains("percentile"));
  EXPECT_TRUE(SamplerOptionKeys("no-such-sampler").empty());
}

TEST(FamilyTables, ObjectiveTypesRoundTripTheirNames) {
  const std::vector<std::string> names = ObjectiveTypeNames();
  ASSERT_EQ(names, (std::vector<std::string>{"function", "command", "train"}));
  for (ObjectiveType t :
       {ObjectiveType::kFunction, ObjectiveType::kCommand, ObjectiveType::kTrain}) {
    EXPECT_FALSE(ObjectiveOptionKeys(t).empty()) << ObjectiveTypeName(t);
  }
  EXPECT_EQ(ObjectiveTypeName(ObjectiveType::kTrain), std::string("train"));
}

// docs/config.md documents every key of every row (as `key`).
TEST(FamilyTables, ConfigDocNamesEveryKeyOfEveryRow) {
  const std::string doc = ConfigDoc();
  ASSERT_FALSE(doc.empty());
  auto expect_documented = [&](const std::string& family, const std::string& row,
                               const std::string& key) {
    EXPECT_NE(doc.find("`" + key + "`"), std::string::npos)
        << "docs/config.md does not name " << family << " '" << row << "' key '" << key << "'";
  };
  for (const std::string& name : SamplerNames()) {
    expect_documented("sampler", name, name);
    for (const auto& [key, value] : SamplerOptionKeys(name))
      expect_documented("sampler", name, key);
  }
  for (const std::string& name : PrunerNames()) {
    for (const auto& [key, value] : PrunerOptionKeys(name)) expect_documented("pruner", name, key);
  }
  for (ObjectiveType t :
       {ObjectiveType::kFunction, ObjectiveType::kCommand, ObjectiveType::kTrain}) {
    for (const auto& [key, value] : ObjectiveOptionKeys(t)) {
      expect_documented("objective", ObjectiveTypeName(t), key);
    }
  }
}

}  // namespace
}  // namespace tune
