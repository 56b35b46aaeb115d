# What `cmake --install` (and `make install`, `cpack -G DEB`) puts where Debian puts it:
#   bin/tune                                  the command
#   lib/tune/                                 its private libraries and plugins (libtune_core,
#                                             libtune_train, libtune_torch, libtune_spm), found
#                                             through RPATH $ORIGIN/../lib/tune and the loaders'
#                                             <bin>/../lib/tune (apps/tune/torch_loader.cpp)
#   share/tune/python/tune_trial.py           the module for training scripts (tune python-path)
#   share/tune/configs/                       the example study configs
#   share/man/man1/tune.1                     the man page, written by `tune man` from the
#                                             command table
#   share/bash-completion/completions/tune    written by `tune completion bash`
#   share/doc/tune/                           README, LICENSE and docs/
include(GNUInstallDirs)
set(TUNE_INSTALL_PRIVATE_LIBDIR lib/tune)

# The module beside libtune_core.so in the build tree, where PythonModuleDir finds it.
set(TUNE_PYTHON_MODULE ${PROJECT_SOURCE_DIR}/apps/python/tune_trial.py)
add_custom_command(
  OUTPUT ${CMAKE_BINARY_DIR}/python/tune_trial.py
  COMMAND ${CMAKE_COMMAND} -E copy ${TUNE_PYTHON_MODULE} ${CMAKE_BINARY_DIR}/python/tune_trial.py
  DEPENDS ${TUNE_PYTHON_MODULE}
  COMMENT "Copying tune_trial.py beside libtune_core.so")
add_custom_target(tune_python_module ALL DEPENDS ${CMAKE_BINARY_DIR}/python/tune_trial.py)

# The man page and the bash completion, from the built binary's command table.
set(TUNE_MAN_PAGE ${CMAKE_BINARY_DIR}/share/tune.1)
set(TUNE_BASH_COMPLETION ${CMAKE_BINARY_DIR}/share/tune.bash)
add_custom_command(
  OUTPUT ${TUNE_MAN_PAGE} ${TUNE_BASH_COMPLETION}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/share
  COMMAND sh -c "\"$1\" man > \"$2\" && \"$1\" completion bash > \"$3\"" tune
          $<TARGET_FILE:tune> ${TUNE_MAN_PAGE} ${TUNE_BASH_COMPLETION}
  DEPENDS tune
  COMMENT "Writing tune.1 and the bash completion from tune's command table"
  VERBATIM)
add_custom_target(tune_shell_docs ALL DEPENDS ${TUNE_MAN_PAGE} ${TUNE_BASH_COMPLETION})

set_target_properties(tune PROPERTIES INSTALL_RPATH "$ORIGIN/../${TUNE_INSTALL_PRIVATE_LIBDIR}")
install(TARGETS tune RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS tune_core tune_train tune_spm LIBRARY DESTINATION ${TUNE_INSTALL_PRIVATE_LIBDIR})
if(TUNE_WITH_TORCH)
  # A LibTorch outside the system's directories (a pip torch) stays on the installed plugin's
  # RPATH, and so does a wheel's CUDA runtime, which the plugin links itself (TUNE_WHEEL_CUDART,
  # cmake/TuneDependencies.cmake); the wheel's other CUDA libraries are found by libtorch_cuda's
  # own RUNPATH. Named here rather than taken from the link path, which a wheel's CMake package
  # fills with directories that do not exist (/lib/intel64, ...).
  set(_plugin_rpath "$ORIGIN")
  # Where the linked LibTorch is: its imported c10 target (TORCH_LIBRARY may name another
  # LibTorch on the machine, e.g. Debian's, which the link does not use).
  set(_torch_libdir "")
  if(TARGET c10)
    get_target_property(_c10_file c10 LOCATION)
    get_filename_component(_torch_libdir "${_c10_file}" DIRECTORY)
  endif()
  if(_torch_libdir AND NOT _torch_libdir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    list(APPEND _plugin_rpath "${_torch_libdir}")
  endif()
  if(TUNE_WHEEL_CUDART)
    get_filename_component(_cudart_dir "${TUNE_WHEEL_CUDART}" DIRECTORY)
    list(APPEND _plugin_rpath "${_cudart_dir}")
  endif()
  set_target_properties(tune_torch PROPERTIES INSTALL_RPATH "${_plugin_rpath}")
  install(TARGETS tune_torch LIBRARY DESTINATION ${TUNE_INSTALL_PRIVATE_LIBDIR})
endif()
install(FILES ${TUNE_PYTHON_MODULE} DESTINATION ${CMAKE_INSTALL_DATADIR}/tune/python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tune/configs)
install(FILES ${TUNE_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${TUNE_BASH_COMPLETION} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME tune)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/LICENSE
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# cpack -G DEB: a Debian package of the above under /usr. Its Depends are what dpkg-shlibdeps
# finds tune and its libraries link (libtorch, libsqlite3, libpq, SentencePiece, libstdc++,
# ...), plus what tune reads at run time without linking it: Chart.js for `tune report`.
set(CPACK_PACKAGE_NAME tune)
set(CPACK_PACKAGE_VENDOR "tune")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "hyperparameter studies with an in-process GPU memory guard")
set(CPACK_PACKAGE_DESCRIPTION "tune runs Optuna-compatible hyperparameter studies (TPE, \
NSGA-II, pruners; SQLite and PostgreSQL storages in Optuna's schema) for fine-tuning transformer \
classifiers, with a memory estimator that admits, shrinks or rejects each trial before it runs \
and trials trained in process with LibTorch.")
set(CPACK_PACKAGE_CONTACT "tune developers <tune@localhost>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# tune's own libraries are private (lib/tune): dpkg-shlibdeps finds them in the build tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libjs-chart.js")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, postgresql")
include(CPack)
