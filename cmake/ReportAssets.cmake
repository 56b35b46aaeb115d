# `tune report`: the page's template, style and script (apps/tune/report/) are compiled into the
# binary (cmake/EmbedFile.cmake; report_assets.h declares them), and the page inlines Chart.js
# from Debian's libjs-chart.js, read at run time from TUNE_CHARTJS.
set(TUNE_CHARTJS "/usr/share/javascript/chart.js/chart.min.js" CACHE FILEPATH
    "Chart.js (UMD build, 3.x) that tune report inlines in its pages (Debian: libjs-chart.js)")
if(NOT EXISTS "${TUNE_CHARTJS}")
  message(WARNING "Chart.js not found at ${TUNE_CHARTJS}: tune report will fail until it is "
                  "installed (apt install libjs-chart.js) or -DTUNE_CHARTJS=PATH names it")
endif()
target_compile_definitions(tune PRIVATE TUNE_CHARTJS="${TUNE_CHARTJS}")

foreach(_asset html css js)
  set(_in ${PROJECT_SOURCE_DIR}/apps/tune/report/report.${_asset})
  set(_out ${CMAKE_CURRENT_BINARY_DIR}/generated/report_${_asset}.cpp)
  string(TOUPPER "${_asset}" _upper)
  add_custom_command(
    OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -DIN=${_in} -DOUT=${_out} -DSYMBOL=Report${_upper}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
    DEPENDS ${_in} ${PROJECT_SOURCE_DIR}/cmake/EmbedFile.cmake
    COMMENT "Embedding apps/tune/report/report.${_asset}")
  target_sources(tune PRIVATE ${_out})
endforeach()
