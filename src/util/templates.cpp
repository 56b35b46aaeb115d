#include "util/templates.h"

#include <fmt/format.h>

#include "util/py_json.h"
#include "util/text.h"

namespace tune {

Result<std::vector<std::string>> TemplateNames(const std::string& text) {
  std::vector<std::string> names;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      if (i + 1 < text.size() && text[i + 1] == '{') {
        ++i;
        continue;
      }
      size_t end = text.find('}', i);
      if (end == std::string::npos) {
        return InvalidArgumentError(
            fmt::format("unbalanced '{{' in \"{}\" (write '{{{{' for a "
                        "literal brace)",
                        text));
      }
      names.push_back(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (text[i] == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        ++i;
        continue;
      }
      return InvalidArgumentError(
          fmt::format("unbalanced '}}' in \"{}\" (write '}}}}' for a literal brace)", text));
    }
  }
  return names;
}

std::string TemplateValueText(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return PyFloatRepr(v.get<double>());
  return v.dump();
}

std::optional<std::string> SingleParam(const std::string& text) {
  if (text.size() < 3 || text.front() != '{' || text.back() != '}' ||
      text.find_first_of("{}", 1) != text.size() - 1) {
    return std::nullopt;
  }
  return text.substr(1, text.size() - 2);
}

std::optional<std::string> ExpandTemplate(const std::string& text,
                                          const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
    } else if (c == '{' && text.find('}', i) != std::string::npos) {
      size_t end = text.find('}', i);
      auto it = values.find(text.substr(i + 1, end - i - 1));
      if (it == values.end()) return std::nullopt;
      out += it->second;
      i = end;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace tune
