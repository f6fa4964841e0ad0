# Helpers that every chapter's CMakeLists.txt uses, so each of those stays one call.

# ft_chapter(<program> KERNELS <.cu...> MAIN <main.cu> [ARCHITECTURES <list>]
#            [GPU_TESTS <.cu...>] [CPU_TESTS <.cpp/.cu...>])
#   KERNELS        the chapter's own target, ft_chNN (an object library), linked into the
#                  shared library flashtut; the kernels register themselves there
#                  (common/harness/registry.hpp), so the C API, the tour and Python find them
#   ARCHITECTURES  the GPU architectures the chapter compiles for (CMAKE_CUDA_ARCHITECTURES's
#                  form, e.g. 90a for Hopper's wgmma and setmaxnreg); default: the project's
#   MAIN           the chapter's program, built as <program> (e.g. ch01_naive)
#   GPU_TESTS      GoogleTest sources labelled "gpu" (they skip with a message without a GPU)
#   CPU_TESTS      GoogleTest sources labelled "cpu"
# It also adds the target chNN (e.g. ch04): the program and the chapter's tests, together.
# A chapter's CMakeLists.txt is this one call (chapter 09's also adds the sm90 building blocks'
# tests to ch09); nothing outside the chapter's folder names it.
function(ft_chapter program)
  cmake_parse_arguments(FT "" "MAIN" "KERNELS;ARCHITECTURES;GPU_TESTS;CPU_TESTS" ${ARGN})
  string(REGEX MATCH "^ch[0-9][0-9]" chapter ${program})
  set(kernels ft_${chapter})
  add_library(${kernels} OBJECT ${FT_KERNELS})
  target_link_libraries(${kernels} PUBLIC ft_headers)
  set_target_properties(${kernels} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # ptxas's report of every kernel (registers, spills) kept beside each object, for the
  # test that holds the READMEs' claims about spills to it (scripts/check_spills.py).
  target_compile_options(${kernels} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
  set_target_properties(${kernels} PROPERTIES
    CUDA_COMPILER_LAUNCHER ${PROJECT_SOURCE_DIR}/cmake/ptxas_report.sh)
  target_sources(flashtut PRIVATE $<TARGET_OBJECTS:${kernels}>)
  add_executable(${program} ${FT_MAIN})
  target_link_libraries(${program} PRIVATE flashtut)
  set(targets ${kernels} ${program})
  # The chapter itself (ch04, ...): its program and its test executables, what a chapter's
  # "Run it" builds before ctest (ctest lists a GoogleTest executable's tests only once it is built).
  add_custom_target(${chapter})
  add_dependencies(${chapter} ${program})
  if(FT_BUILD_TESTS)
    foreach(kind GPU CPU)
      if(FT_${kind}_TESTS)
        string(TOLOWER ${kind} label)
        set(test_exe test_${program}_${label})
        add_executable(${test_exe} ${FT_${kind}_TESTS})
        target_link_libraries(${test_exe} PRIVATE flashtut ft_testing)
        ft_discover(${test_exe} ${label})
        list(APPEND targets ${test_exe})
        add_dependencies(${chapter} ${test_exe})
      endif()
    endforeach()
  endif()
  if(FT_ARCHITECTURES)
    set_target_properties(${targets} PROPERTIES CUDA_ARCHITECTURES "${FT_ARCHITECTURES}")
  endif()
endfunction()

# Registers a GoogleTest executable with ctest under a label ("cpu" or "gpu"). A test that
# calls GTEST_SKIP() is reported by ctest as skipped, not as passed (gtest_discover_tests
# sets that up itself). Every test name starts with a prefix named after the executable,
# so that one chapter's tests are one filter (`ctest --test-dir build -R '^ch02\.'`):
#   test_ch02_tiled_gpu, test_ch02_tiled_cpu -> ch02.   test_common -> common.
#   test_capi_cpu, test_capi_gpu -> capi.   test_tour_cpu -> tour.
# (e.g. "ch02.TiledMatmulStrides.NonSquare"; scripts/check_readme_commands.py checks that
# every filter the Markdown files show selects tests).
function(ft_discover test_exe label)
  string(REGEX REPLACE "^test_" "" prefix ${test_exe})
  string(REGEX REPLACE "_(cpu|gpu)$" "" prefix ${prefix})
  string(REGEX REPLACE "^(ch[0-9][0-9])_.*$" "\\1" prefix ${prefix})
  gtest_discover_tests(${test_exe}
    TEST_PREFIX "${prefix}."
    DISCOVERY_MODE PRE_TEST
    DISCOVERY_TIMEOUT 60
    # The float64 reference (and the unfused baseline) of each test shape is computed once
    # and shared by every test process through this folder (common/harness/testing.cu). (The test
    # preset also limits each process's OpenMP threads: CMakePresets.json.)
    PROPERTIES LABELS ${label} ENVIRONMENT "FT_REFERENCE_CACHE=${CMAKE_BINARY_DIR}/reference_cache")
endfunction()

# FT_PYTHON_ENV: the environment of every Python test and generator the build runs. The
# tree's Python folders are importable by name (python/ holds the flashtut package; scripts/,
# plots/ and docs/ hold the tools, which import one another), so no file edits sys.path.
# By hand, the same: PYTHONPATH=python (python/README.md), or `pip install .`.
set(FT_PYTHONPATH "${PROJECT_SOURCE_DIR}/python:${PROJECT_SOURCE_DIR}/scripts:${PROJECT_SOURCE_DIR}/plots:${PROJECT_SOURCE_DIR}/docs")
set(FT_PYTHON_ENV "PYTHONDONTWRITEBYTECODE=1;PYTHONPATH=${FT_PYTHONPATH}")
