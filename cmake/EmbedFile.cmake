# Turns a text file into a C++ source defining `const char* <symbol>()` (used to embed the
# model catalog and src/train/tune_classifier.py into the binary). Run in script mode:
# cmake -DIN=.. -DOUT=.. -DSYMBOL=.. -P
file(READ "${IN}" content)
set(delim "tune_embed")
file(WRITE "${OUT}.tmp"
  "// Generated from ${IN}; do not edit.\n"
  "namespace tune::internal {\n"
  "const char* ${SYMBOL}() {\n  return R\"${delim}(${content})${delim}\";\n}\n"
  "}  // namespace tune::internal\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
