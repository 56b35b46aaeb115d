#!/usr/bin/env bash
# Checks that every tracked C++ and CUDA file (*.h, *.cpp, *.cu) is formatted as `make format`
# leaves it (.clang-format: Google style, 100 columns), with Debian 12's clang-format 14. Lists
# each file that is not and exits 1; `make format` fixes them.
#
# Another major version of clang-format lays some constructs out differently, so where the
# installed one is not version 14 (Debian 13 has 19) or there is none, the check is skipped:
# it says why and exits 0. CLANG_FORMAT names another binary (say clang-format-14).
set -euo pipefail
cd "$(dirname "$0")/.."
want=14
bin=${CLANG_FORMAT:-clang-format}
if ! command -v "$bin" >/dev/null 2>&1; then
  echo "check-format: SKIPPED: $bin not found (Debian 12: apt install clang-format)"
  exit 0
fi
version=$("$bin" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -n 1)
if [ "$version" != "$want" ]; then
  echo "check-format: SKIPPED: $bin is version ${version:-unknown}, the tree is formatted with" \
       "Debian 12's clang-format $want (other versions differ in places)"
  exit 0
fi
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu')
bad=()
for f in "${files[@]}"; do
  "$bin" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'check-format: not formatted: %s\n' "${bad[@]}"
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from clang-format $want's layout;" \
       "run 'make format'"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted (clang-format $version)"
