# Third-party packages, all from Debian 12 (scripts/install-deps.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(CLI11 REQUIRED)
find_package(Threads REQUIRED)
if(TUNE_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
