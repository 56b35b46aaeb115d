# tune_set_warnings(<target>): the project's warning set, errors in CI builds only.
function(tune_set_warnings target)
  # GCC's -Wshadow=local (a local hiding a local) has no Clang spelling; Clang's -Wshadow would
  # warn about more (globals, parameters hiding members), so Clang builds go without it.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic
                         $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local> -Wno-missing-field-initializers)
  if(TUNE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
