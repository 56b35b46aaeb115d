// JsonReader: typed, strict reading of a JSON config with errors that name the file, the JSON
// path and the closest valid key. Private to tune (header-only).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tune/json.h"
#include "tune/status.h"
#include "util/text.h"

namespace tune::internal {

class JsonReader {
 public:
  JsonReader(const Json& json, std::string file, std::string path = "")
      : json_(json), file_(std::move(file)), path_(std::move(path)) {}

  const Json& json() const { return json_; }
  const std::string& file() const { return file_; }
  // JSON pointer of this node ("" for the root, shown as "/").
  const std::string& path() const { return path_; }
  std::string where() const { return fmt::format("{}: {}", file_, path_.empty() ? "/" : path_); }

  JsonReader Child(const std::string& key) const {
    return JsonReader(json_.at(key), file_, path_ + "/" + key);
  }
  JsonReader Index(size_t i) const {
    return JsonReader(json_.at(i), file_, path_ + "/" + std::to_string(i));
  }
  bool Has(const std::string& key) const { return json_.is_object() && json_.contains(key); }

  Status Error(const std::string& message) const {
    return InvalidArgumentError(fmt::format("{}: {}", where(), message));
  }
  Status ChildError(const std::string& key, const std::string& message) const {
    return InvalidArgumentError(fmt::format("{}: {}/{}: {}", file_, path_, key, message));
  }

  Status ExpectObject() const {
    if (!json_.is_object()) return Error("expected an object, got " + TypeName(json_));
    return Status::Ok();
  }

  // Unknown keys are errors naming the closest allowed key.
  Status CheckKeys(const std::vector<std::string>& allowed) const {
    TUNE_RETURN_IF_ERROR(ExpectObject());
    for (const auto& [key, value] : json_.items()) {
      bool known = false;
      for (const auto& a : allowed) known = known || a == key;
      if (!known) {
        return ChildError(key, fmt::format("unknown key '{}'{}; valid keys: {}", key,
                                           DidYouMean(key, allowed), JoinNames(allowed)));
      }
    }
    return Status::Ok();
  }

  Result<std::optional<std::string>> OptString(const std::string& key) const {
    if (!Has(key) || json_.at(key).is_null()) return std::optional<std::string>();
    const Json& v = json_.at(key);
    if (!v.is_string()) return ChildError(key, "expected a string, got " + Describe(v));
    return std::optional<std::string>(v.get<std::string>());
  }
  Result<std::string> String(const std::string& key, const std::string& fallback) const {
    TUNE_ASSIGN_OR_RETURN(auto v, OptString(key));
    return v.value_or(fallback);
  }
  Result<std::string> RequiredString(const std::string& key) const {
    if (!Has(key)) return Error(fmt::format("missing required key '{}'", key));
    TUNE_ASSIGN_OR_RETURN(auto v, OptString(key));
    if (!v) return ChildError(key, "expected a string, got null");
    return *v;
  }

  Result<std::optional<double>> OptNumber(const std::string& key) const {
    if (!Has(key) || json_.at(key).is_null()) return std::optional<double>();
    const Json& v = json_.at(key);
    if (!v.is_number()) return ChildError(key, "expected a number, got " + Describe(v));
    return std::optional<double>(v.get<double>());
  }
  // An integer; a float that is a whole number (1e3) counts. Either must fit int64_t: casting a
  // double past its range is undefined, and an unsigned past it would wrap.
  Result<std::optional<int64_t>> OptInt(const std::string& key) const {
    if (!Has(key) || json_.at(key).is_null()) return std::optional<int64_t>();
    const Json& v = json_.at(key);
    const char* const kRange = "expected an integer from -2^63 to 2^63 - 1, got ";
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return ChildError(key, kRange + Describe(v));
      return std::optional<int64_t>(v.get<int64_t>());
    }
    if (v.is_number_integer()) return std::optional<int64_t>(v.get<int64_t>());
    if (!v.is_number_float() || v.get<double>() != std::trunc(v.get<double>())) {
      return ChildError(key, "expected an integer, got " + Describe(v));
    }
    const double d = v.get<double>();
    if (!(d >= -0x1p63 && d < 0x1p63)) return ChildError(key, kRange + Describe(v));
    return std::optional<int64_t>(static_cast<int64_t>(d));
  }
  // An array of strings; empty when the key is absent.
  Result<std::vector<std::string>> StringArray(const std::string& key) const {
    std::vector<std::string> out;
    if (!Has(key)) return out;
    const Json& a = json_.at(key);
    if (!a.is_array()) return ChildError(key, "expected an array of strings, got " + Describe(a));
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].is_string()) {
        return ChildError(fmt::format("{}/{}", key, i), "expected a string, got " + Describe(a[i]));
      }
      out.push_back(a[i].get<std::string>());
    }
    return out;
  }

  Result<bool> Bool(const std::string& key, bool fallback) const {
    if (!Has(key) || json_.at(key).is_null()) return fallback;
    const Json& v = json_.at(key);
    if (!v.is_boolean()) return ChildError(key, "expected true or false, got " + Describe(v));
    return v.get<bool>();
  }

  static std::string TypeName(const Json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_integer()) return "an integer";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
  }
  static std::string Describe(const Json& v) {
    std::string text = v.dump();
    text = Abbreviate(text, 60);
    return TypeName(v) + " (" + text + ")";
  }

 private:
  const Json& json_;
  std::string file_;
  std::string path_;
};

}  // namespace tune::internal
