#include "tune/trial.h"

#include <fmt/format.h>

#include <cctype>
#include <ctime>

namespace tune {

const char* TrialStateName(TrialState s) {
  switch (s) {
    case TrialState::kRunning:
      return "RUNNING";
    case TrialState::kComplete:
      return "COMPLETE";
    case TrialState::kPruned:
      return "PRUNED";
    case TrialState::kFail:
      return "FAIL";
    case TrialState::kWaiting:
      return "WAITING";
  }
  return "UNKNOWN";
}

namespace {
std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

Result<TrialState> ParseTrialState(std::string_view name) {
  const std::string u = Upper(name);
  for (TrialState s : {TrialState::kRunning, TrialState::kComplete, TrialState::kPruned,
                       TrialState::kFail, TrialState::kWaiting}) {
    if (u == TrialStateName(s)) return s;
  }
  return InvalidArgumentError(fmt::format(
      "unknown trial state '{}' (valid: RUNNING, COMPLETE, PRUNED, FAIL, WAITING)", name));
}

const char* StudyDirectionName(StudyDirection d) {
  switch (d) {
    case StudyDirection::kNotSet:
      return "NOT_SET";
    case StudyDirection::kMinimize:
      return "MINIMIZE";
    case StudyDirection::kMaximize:
      return "MAXIMIZE";
  }
  return "NOT_SET";
}

std::string StudyDirectionsText(const std::vector<StudyDirection>& d) {
  std::string out;
  for (StudyDirection x : d) out += (out.empty() ? "" : ", ") + std::string(StudyDirectionName(x));
  return out;
}

Result<StudyDirection> ParseStudyDirection(std::string_view name) {
  const std::string u = Upper(name);
  if (u == "MINIMIZE") return StudyDirection::kMinimize;
  if (u == "MAXIMIZE") return StudyDirection::kMaximize;
  if (u == "NOT_SET") return StudyDirection::kNotSet;
  return InvalidArgumentError(
      fmt::format("unknown direction '{}' (valid: minimize, maximize)", name));
}

Json FrozenTrial::param(const std::string& name) const {
  return ToExternal(distributions.at(name), params.at(name));
}

Json FrozenTrial::ExternalParams() const {
  Json out = Json::object();
  for (const auto& [name, v] : params) out[name] = ToExternal(distributions.at(name), v);
  return out;
}

std::optional<double> FrozenTrial::duration_seconds() const {
  if (!datetime_start || !datetime_complete) return std::nullopt;
  return std::chrono::duration<double>(*datetime_complete - *datetime_start).count();
}

namespace {

// "YYYY-MM-DD HH:MM:SS.ffffff" in local time or UTC.
std::string FormatTimePoint(TimePoint t, bool utc) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(us / 1000000);
  long frac = static_cast<long>(us % 1000000);
  if (frac < 0) {
    frac += 1000000;
    --secs;
  }
  std::tm tm{};
  if (utc) {
    gmtime_r(&secs, &tm);
  } else {
    localtime_r(&secs, &tm);
  }
  return fmt::format("{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}.{:06d}", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, frac);
}

Result<TimePoint> ParseTimePoint(std::string_view text, bool utc);

}  // namespace

std::string FormatDatetime(TimePoint t) { return FormatTimePoint(t, /*utc=*/false); }

std::string FormatDatetimeUtc(TimePoint t) { return FormatTimePoint(t, /*utc=*/true); }

Result<TimePoint> ParseDatetime(std::string_view text) { return ParseTimePoint(text, false); }

Result<TimePoint> ParseDatetimeUtc(std::string_view text) { return ParseTimePoint(text, true); }

namespace {

Result<TimePoint> ParseTimePoint(std::string_view text, bool utc) {
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  char sep = 0;
  int consumed = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &year, &mon, &day, &sep, &hour, &min,
                  &sec, &consumed) != 7 ||
      (sep != ' ' && sep != 'T')) {
    return InvalidArgumentError("cannot parse datetime '" + s + "'");
  }
  long micros = 0;
  if (static_cast<size_t>(consumed) < s.size() && s[consumed] == '.') {
    std::string frac = s.substr(consumed + 1, 6);
    while (frac.size() < 6) frac += '0';
    for (char c : frac) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        return InvalidArgumentError("cannot parse datetime '" + s + "'");
      }
    }
    micros = std::stol(frac);
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  tm.tm_isdst = -1;
  std::time_t t = utc ? timegm(&tm) : std::mktime(&tm);
  return Clock::from_time_t(t) + std::chrono::microseconds(micros);
}

}  // namespace

}  // namespace tune
