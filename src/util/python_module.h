// Where tune's Python module for training scripts (tune_trial.py, apps/python/) is: next to
// libtune_core.so in a build tree (<build>/python), or <prefix>/share/tune/python when
// installed (libtune_core.so in <prefix>/lib/tune).
#pragma once

#include <optional>
#include <string>

namespace tune {

inline constexpr const char* kPythonModuleFile = "tune_trial.py";

// The directory that holds tune_trial.py, or nullopt (with the places looked at in `*looked`).
std::optional<std::string> PythonModuleDir(std::string* looked = nullptr);

}  // namespace tune
