#include "storages/rdb/codec.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <limits>

#include "util/py_json.h"

namespace tune::internal::rdb {
namespace {

// Python's non-standard number tokens become these strings for nlohmann's parser, and numbers
// again afterwards. The leading \x01 keeps them apart from any real string.
constexpr std::string_view kNanMark = "\x01tune:NaN";
constexpr std::string_view kInfMark = "\x01tune:Infinity";
constexpr std::string_view kNegInfMark = "\x01tune:-Infinity";

void RestoreNonFinite(Json& j) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == kNanMark) {
      j = std::numeric_limits<double>::quiet_NaN();
    } else if (s == kInfMark) {
      j = std::numeric_limits<double>::infinity();
    } else if (s == kNegInfMark) {
      j = -std::numeric_limits<double>::infinity();
    }
  } else if (j.is_structured()) {
    for (auto& item : j) RestoreNonFinite(item);
  }
}

}  // namespace

std::string FormatUtcTimestamp(TimePoint t) { return FormatDatetimeUtc(t); }

Result<TimePoint> ParseUtcTimestamp(std::string_view text) {
  auto fail = [&] {
    return InvalidArgumentError(fmt::format("cannot parse timestamp '{}'", text));
  };
  size_t pos = 0;
  auto number = [&](size_t digits) -> int {
    int v = 0;
    for (size_t i = 0; i < digits; ++i, ++pos) {
      if (pos >= text.size() || text[pos] < '0' || text[pos] > '9') return -1;
      v = v * 10 + (text[pos] - '0');
    }
    return v;
  };
  auto expect = [&](std::string_view chars) {
    if (pos >= text.size() || chars.find(text[pos]) == std::string_view::npos) return false;
    ++pos;
    return true;
  };
  std::tm tm{};
  const int year = number(4);
  if (year < 0 || !expect("-")) return fail();
  const int month = number(2);
  if (month < 1 || month > 12 || !expect("-")) return fail();
  const int day = number(2);
  if (day < 1 || day > 31 || !expect(" T")) return fail();
  const int hour = number(2);
  if (hour < 0 || hour > 23 || !expect(":")) return fail();
  const int minute = number(2);
  if (minute < 0 || minute > 59 || !expect(":")) return fail();
  const int second = number(2);
  if (second < 0 || second > 60) return fail();
  int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = 100000;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return fail();
  }
  int64_t offset_seconds = 0;
  if (pos < text.size() && text[pos] == 'Z') {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    const int oh = number(2);
    if (oh < 0) return fail();
    int om = 0;
    if (pos < text.size()) {
      expect(":");
      om = number(2);
      if (om < 0) return fail();
    }
    offset_seconds = sign * (oh * 3600 + om * 60);
  }
  if (pos != text.size()) return fail();
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t t = timegm(&tm);
  return Clock::from_time_t(t) - std::chrono::seconds(offset_seconds) +
         std::chrono::microseconds(micros);
}

Result<StoredNumber> EncodeTrialValue(double v) {
  if (std::isnan(v)) {
    return InvalidArgumentError(
        "a trial value cannot be NaN (Optuna's schema has no NaN value type); fail the trial "
        "instead");
  }
  if (std::isinf(v)) return StoredNumber{std::nullopt, v > 0 ? "INF_POS" : "INF_NEG"};
  return StoredNumber{v, "FINITE"};
}

StoredNumber EncodeIntermediateValue(double v) {
  if (std::isnan(v)) return {std::nullopt, "NAN"};
  if (std::isinf(v)) return {std::nullopt, v > 0 ? "INF_POS" : "INF_NEG"};
  return {v, "FINITE"};
}

Result<double> DecodeNumber(const std::optional<double>& value, std::string_view type) {
  if (type == "FINITE") {
    if (!value) return InvalidArgumentError("a FINITE value is NULL");
    return *value;
  }
  if (type == "INF_POS") return std::numeric_limits<double>::infinity();
  if (type == "INF_NEG") return -std::numeric_limits<double>::infinity();
  if (type == "NAN") return std::numeric_limits<double>::quiet_NaN();
  return InvalidArgumentError(fmt::format("unknown value type '{}'", type));
}

std::string EncodeJson(const Json& value) { return PyJsonDumps(value); }

Result<Json> DecodeJson(std::string_view text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Python's json.dumps writes NaN, Infinity and -Infinity: mark them outside strings.
  std::string marked;
  marked.reserve(text.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      marked += c;
      if (c == '\\' && i + 1 < text.size()) {
        marked += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    auto token = [&](std::string_view word, std::string_view mark) {
      if (text.substr(i, word.size()) != word) return false;
      marked += Json(std::string(mark)).dump();
      i += word.size() - 1;
      return true;
    };
    if (c == '"') {
      in_string = true;
      marked += c;
    } else if (!token("NaN", kNanMark) && !token("Infinity", kInfMark) &&
               !token("-Infinity", kNegInfMark)) {
      marked += c;
    }
  }
  j = Json::parse(marked, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError(fmt::format("invalid JSON '{}'", text.substr(0, 200)));
  }
  RestoreNonFinite(j);
  return j;
}

Result<Distribution> DistributionCache::Get(const std::string& json) {
  if (auto it = parsed_.find(json); it != parsed_.end()) return it->second;
  TUNE_ASSIGN_OR_RETURN(Distribution d, DistributionFromJson(json));
  if (parsed_.size() > 4096) parsed_.clear();  // bounded; a study has few distinct texts
  parsed_.emplace(json, d);
  return d;
}

}  // namespace tune::internal::rdb
