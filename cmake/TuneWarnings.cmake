# tune_set_warnings(<target>): the project's warning set, errors in CI builds only.
function(tune_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local
                         -Wno-missing-field-initializers)
  if(TUNE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
