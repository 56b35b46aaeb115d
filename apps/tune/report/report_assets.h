// The page of `tune report`: its template, style and script (report.html, report.css,
// report.js beside this file), compiled into the binary by cmake/ReportAssets.cmake.
#pragma once

namespace tune::internal {
const char* ReportHTML();
const char* ReportCSS();
const char* ReportJS();
}  // namespace tune::internal
