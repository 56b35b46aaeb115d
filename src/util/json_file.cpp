// Reading JSON files (json_file.h).
#include "util/json_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "util/text.h"

namespace tune {

Result<Json> ParseJsonText(std::string_view text, const std::string& where) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    const TextPosition at = LineColumnAt(text, e.byte);
    return InvalidArgumentError(fmt::format("{}:{}:{}: invalid JSON: {}", where, at.line, at.column,
                                            JsonSyntaxMessage(e.what())));
  } catch (const Json::exception& e) {  // a number past double's range (1e400): out_of_range.406
    return InvalidArgumentError(
        fmt::format("{}: invalid JSON: {}", where, JsonSyntaxMessage(e.what())));
  }
}

Result<std::string> ReadTextFile(const std::string& path) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError(fmt::format("{}: cannot read ({})", path,
                                     errno != 0 ? std::strerror(errno) : "unknown error"));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InternalError(fmt::format("{}: cannot read", path));
  return text;
}

Result<Json> ReadJsonFile(const std::string& path) {
  TUNE_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseJsonText(text, path);
}

Result<Json> ReadJsonObjectFile(const std::string& path) {
  TUNE_ASSIGN_OR_RETURN(Json doc, ReadJsonFile(path));
  if (!doc.is_object()) return InvalidArgumentError(fmt::format("{}: not a JSON object", path));
  return doc;
}

}  // namespace tune
