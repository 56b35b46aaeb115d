# LibTorch from a Python's pip or conda `torch`, read from its include and library directories
# instead of its CMake package: TUNE_TORCH_PYTHON=/path/to/python (scripts/build-with-torch.sh
# sets it).
#
# Why not torch's CMake package: a CUDA torch's package calls enable_language(CUDA) and
# find_package(CUDAToolkit) and stops unless an nvcc of torch's CUDA version is installed, although
# tune compiles no CUDA source; it only calls c10_cuda and the CUDA runtime, which the wheels ship
# (site-packages/nvidia/*: the runtime's headers and libcudart.so). Here nothing needs nvcc.
#
# Defines what find_package(Torch) would for tune: the imported targets torch, torch_cpu, c10 and,
# with CUDA, torch_cuda, c10_cuda and CUDA::cudart (the wheel's runtime); the variables
# Torch_FOUND, Torch_VERSION, TORCH_INCLUDE_DIRS, TORCH_INSTALL_PREFIX, TORCH_CXX_FLAGS,
# TUNE_TORCH_CUDA_VERSION (empty for a CPU torch) and TUNE_TORCH_CXX11_ABI (0 or 1).
set(Torch_FOUND FALSE)
execute_process(
  COMMAND "${TUNE_TORCH_PYTHON}" -c [[
import os, sys
import torch
root = os.path.dirname(torch.__file__)
print(torch.__version__.split("+")[0])
print(torch.version.cuda or "")
print(int(bool(torch._C._GLIBCXX_USE_CXX11_ABI)))
print(root)
print(sys.prefix)
]]
  RESULT_VARIABLE _tp_rc OUTPUT_VARIABLE _tp_out ERROR_VARIABLE _tp_err
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _tp_rc EQUAL 0)
  string(REGEX REPLACE ".*\n([^\n]+)\n?$" "\\1" _tp_last "\n${_tp_err}")
  message(FATAL_ERROR "TUNE_TORCH_PYTHON=${TUNE_TORCH_PYTHON} cannot import torch (${_tp_last}). "
                      "Install PyTorch into that Python (pip install torch), or point "
                      "TUNE_TORCH_PYTHON at the Python that has it.")
endif()
string(REPLACE "\n" ";" _tp_lines "${_tp_out}")
list(GET _tp_lines 0 Torch_VERSION)
list(GET _tp_lines 1 TUNE_TORCH_CUDA_VERSION)
list(GET _tp_lines 2 TUNE_TORCH_CXX11_ABI)
list(GET _tp_lines 3 _tp_root)
list(GET _tp_lines 4 _tp_sys_prefix)
set(TORCH_INSTALL_PREFIX "${_tp_root}")
set(TORCH_INCLUDE_DIRS "${_tp_root}/include" "${_tp_root}/include/torch/csrc/api/include")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=${TUNE_TORCH_CXX11_ABI}")
if(NOT EXISTS "${_tp_root}/include/torch/torch.h" AND
   NOT EXISTS "${_tp_root}/include/torch/csrc/api/include/torch/torch.h")
  message(FATAL_ERROR "torch ${Torch_VERSION} in ${TUNE_TORCH_PYTHON} has no C++ headers "
                      "(${_tp_root}/include): use a pip or conda torch (Debian's python3-torch has "
                      "them only with libtorch-dev)")
endif()

function(_tune_torch_library target file)
  if(NOT EXISTS "${_tp_root}/lib/${file}")
    message(FATAL_ERROR "torch ${Torch_VERSION} in ${TUNE_TORCH_PYTHON}: ${_tp_root}/lib/${file} "
                        "is missing")
  endif()
  add_library(${target} SHARED IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${_tp_root}/lib/${file}")
endfunction()

_tune_torch_library(c10 libc10.so)
_tune_torch_library(torch_cpu libtorch_cpu.so)
_tune_torch_library(torch libtorch.so)
set_target_properties(torch_cpu PROPERTIES INTERFACE_LINK_LIBRARIES c10)
set(_tp_torch_links torch_cpu c10)

if(TUNE_TORCH_CUDA_VERSION)
  # The CUDA runtime's headers and library: a pip torch's nvidia-* wheels (CUDA 13:
  # nvidia/cu13; CUDA 12: nvidia/cuda_runtime), else a conda environment's own (cuda-cudart).
  get_filename_component(_tp_site "${_tp_root}/.." ABSOLUTE)
  file(GLOB _tp_cuda_dirs LIST_DIRECTORIES true "${_tp_site}/nvidia/*")
  set(_tp_cuda_include "")
  set(_tp_cudart "")
  string(REGEX MATCH "^[0-9]+" _tp_cuda_major "${TUNE_TORCH_CUDA_VERSION}")
  foreach(_dir IN LISTS _tp_cuda_dirs ITEMS "${_tp_sys_prefix}"
          "${_tp_sys_prefix}/targets/x86_64-linux" "${_tp_sys_prefix}/targets/sbsa-linux")
    if(NOT _tp_cuda_include AND EXISTS "${_dir}/include/cuda_runtime_api.h")
      set(_tp_cuda_include "${_dir}/include")
    endif()
    if(NOT _tp_cudart AND EXISTS "${_dir}/lib/libcudart.so.${_tp_cuda_major}")
      set(_tp_cudart "${_dir}/lib/libcudart.so.${_tp_cuda_major}")
    endif()
  endforeach()
  if(NOT _tp_cuda_include OR NOT _tp_cudart)
    message(FATAL_ERROR
      "torch ${Torch_VERSION} in ${TUNE_TORCH_PYTHON} is built with CUDA "
      "${TUNE_TORCH_CUDA_VERSION}, but its CUDA runtime was not found beside it (looked for "
      "include/cuda_runtime_api.h and lib/libcudart.so.${_tp_cuda_major} in ${_tp_site}/nvidia/* "
      "and ${_tp_sys_prefix}): found headers '${_tp_cuda_include}', library '${_tp_cudart}'. "
      "pip: the nvidia-cuda-runtime wheel torch depends on; conda: the cuda-cudart-dev package.")
  endif()
  # The runtime wheels' headers include two sets they do not ship: crt/host_defines.h (from
  # cuda_runtime_api.h), left to the CUDA compiler's packages (CUDA 13: nvidia-cuda-crt, 133 KB of
  # headers; CUDA 12: nvidia-cuda-nvcc-cu12), and CCCL's nv/target (from cuda_fp16.h, which
  # ATen's CUDA headers include: nvidia-cuda-cccl, or nvidia-cuda-cccl-cu12; torch 2.15's wheels
  # bring it, 2.14's do not). Each is taken from beside torch when installed there; else that
  # package of torch's CUDA version is installed into the build tree (cuda-headers/PACKAGE, pip
  # --target, once; headers only, no compiler runs), as FetchContent downloads sources.
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _tp_cuda_minor "${TUNE_TORCH_CUDA_VERSION}")
  macro(_tp_find_header header out)  # out: the first include directory with `header`, or ""
    file(GLOB _tp_more LIST_DIRECTORIES true "${_tp_site}/nvidia/*/include"
         "${CMAKE_BINARY_DIR}/cuda-crt/nvidia/*/include"
         "${CMAKE_BINARY_DIR}/cuda-headers/*/nvidia/*/include")
    set(${out} "")
    foreach(_dir IN ITEMS ${_tp_cuda_include} ${_tp_more} "${_tp_sys_prefix}/include")
      if(NOT ${out} AND EXISTS "${_dir}/${header}")
        set(${out} "${_dir}")
      endif()
    endforeach()
  endmacro()
  set(_tp_extra_includes "")
  foreach(_tp_header IN ITEMS crt/host_defines.h nv/target)
    _tp_find_header("${_tp_header}" _tp_found)
    if(NOT _tp_found)
      if(_tp_header STREQUAL "nv/target")
        set(_tp_package "nvidia-cuda-cccl")
      elseif(_tp_cuda_major VERSION_GREATER_EQUAL 13)
        set(_tp_package "nvidia-cuda-crt")
      else()
        set(_tp_package "nvidia-cuda-nvcc")
      endif()
      if(_tp_cuda_major VERSION_LESS 13)
        string(APPEND _tp_package "-cu${_tp_cuda_major}")
      endif()
      # One directory per package: pip --target does not merge into an existing nvidia/.
      set(_tp_target "${CMAKE_BINARY_DIR}/cuda-headers/${_tp_package}")
      string(APPEND _tp_package "==${_tp_cuda_minor}.*")
      message(STATUS "The CUDA runtime's headers beside torch lack ${_tp_header}: installing "
                     "${_tp_package} into ${_tp_target} (pip, headers only)")
      execute_process(
        COMMAND "${TUNE_TORCH_PYTHON}" -m pip install --quiet --no-deps --disable-pip-version-check
                --target "${_tp_target}" "${_tp_package}"
        RESULT_VARIABLE _tp_pip_rc ERROR_VARIABLE _tp_pip_err)
      _tp_find_header("${_tp_header}" _tp_found)
      if(NOT _tp_found)
        string(REGEX REPLACE ".*\n([^\n]+)\n?$" "\\1" _tp_pip_last "\n${_tp_pip_err}")
        message(FATAL_ERROR
          "torch's CUDA runtime headers (${_tp_cuda_include}) need ${_tp_header}, which is in "
          "${_tp_package}; installing it failed (${_tp_pip_last}). Install it into that Python "
          "(${TUNE_TORCH_PYTHON} -m pip install '${_tp_package}') and configure again.")
      endif()
    endif()
    list(APPEND _tp_extra_includes "${_tp_found}")
  endforeach()
  list(REMOVE_DUPLICATES _tp_extra_includes)
  _tune_torch_library(c10_cuda libc10_cuda.so)
  _tune_torch_library(torch_cuda libtorch_cuda.so)
  if(NOT TARGET CUDA::cudart)
    add_library(CUDA::cudart SHARED IMPORTED GLOBAL)
  endif()
  set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION "${_tp_cudart}"
                        INTERFACE_INCLUDE_DIRECTORIES "${_tp_cuda_include};${_tp_extra_includes}")
  set_target_properties(c10_cuda PROPERTIES INTERFACE_LINK_LIBRARIES "c10;CUDA::cudart")
  set_target_properties(torch_cuda PROPERTIES INTERFACE_LINK_LIBRARIES "c10_cuda;torch_cpu")
  list(PREPEND _tp_torch_links torch_cuda c10_cuda)
  set(TUNE_WHEEL_CUDART "${_tp_cudart}" CACHE FILEPATH "The CUDA runtime of torch's wheels" FORCE)
endif()
set_target_properties(torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=${TUNE_TORCH_CXX11_ABI}"
  INTERFACE_LINK_LIBRARIES "${_tp_torch_links}")
# Include directories of an imported target are system directories (-isystem), as with the
# CMake package: LibTorch's headers do not trip tune's warnings.
set(Torch_FOUND TRUE)
if(TUNE_TORCH_CUDA_VERSION)
  set(_tp_label "CUDA ${TUNE_TORCH_CUDA_VERSION}, runtime ${_tp_cudart}")
else()
  set(_tp_label "CPU only")
endif()
message(STATUS "LibTorch from ${TUNE_TORCH_PYTHON}: torch ${Torch_VERSION} (${_tp_label}) in "
               "${_tp_root}, without its CMake package (no CUDA compiler needed)")
