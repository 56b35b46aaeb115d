// Reading JSON documents from files and texts, with errors that name the file and, for a syntax
// error, the line and column: "c.json:3:14: invalid JSON: syntax error while parsing object ...".
#pragma once

#include <string>
#include <string_view>

#include "tune/json.h"
#include "tune/status.h"

namespace tune {

// The JSON document `text` read from `where`; InvalidArgument "WHERE:LINE:COLUMN: invalid JSON:
// ..." when it is not one.
Result<Json> ParseJsonText(std::string_view text, const std::string& where);

// The text of the file at `path`; NotFound "PATH: cannot read (REASON)" when it cannot be read.
Result<std::string> ReadTextFile(const std::string& path);

// ReadTextFile, then ParseJsonText.
Result<Json> ReadJsonFile(const std::string& path);

// ReadJsonFile, and InvalidArgument "PATH: not a JSON object" unless the document is an object.
Result<Json> ReadJsonObjectFile(const std::string& path);

}  // namespace tune
