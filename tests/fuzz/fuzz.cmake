# The fuzz targets, tests/fuzz/fuzz_<name>.cpp, each one LLVMFuzzerTestOneInput, built two ways:
#  - always: compiled into dg_tests with the entry point renamed dg_fuzz_<name>, where
#    tests/test_fuzz_replay.cpp replays every file of tests/fuzz/corpus/<name>/ through it (no
#    libFuzzer, any compiler), so the corpus and its crash regressions run under ctest;
#  - with DG_FUZZ (clang): as libFuzzer programs fuzz_<name>, all built by the target
#    `fuzz_targets` (tests/fuzz/run_fuzzers.sh runs them; `make fuzz` does both).
file(GLOB DG_FUZZ_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_*.cpp)
set(DG_FUZZ_TABLE "")
foreach(src ${DG_FUZZ_SOURCES})
  get_filename_component(file_name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${file_name})
  string(APPEND DG_FUZZ_TABLE "DG_FUZZ_TARGET(${name})\n")
  # A one-line wrapper per target renames the entry point for dg_tests only.
  set(wrapper ${PROJECT_BINARY_DIR}/generated/replay_${file_name}.cpp)
  file(CONFIGURE OUTPUT ${wrapper} CONTENT
    "#define LLVMFuzzerTestOneInput dg_fuzz_${name}\n#include \"tests/fuzz/${file_name}.cpp\"\n")
  target_sources(dg_tests PRIVATE ${wrapper})
  list(APPEND DG_FUZZ_REPLAY_WRAPPERS ${wrapper})  # also for dg_sanitize_ci_tests (CMakeLists.txt)
  if(DG_FUZZ)
    add_executable(${file_name} ${src})
    target_link_libraries(${file_name} PRIVATE dg_core)
    target_compile_definitions(${file_name} PRIVATE DG_FUZZ_LIBFUZZER)
    target_link_options(${file_name} PRIVATE -fsanitize=fuzzer)
    list(APPEND DG_FUZZ_PROGRAMS ${file_name})
  endif()
endforeach()
# One DG_FUZZ_TARGET(name) line per target, for the replay test's table.
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/generated/dg_fuzz_targets.inc CONTENT "${DG_FUZZ_TABLE}")
target_include_directories(dg_tests PRIVATE ${PROJECT_BINARY_DIR}/generated)
if(DG_FUZZ)
  add_custom_target(fuzz_targets DEPENDS ${DG_FUZZ_PROGRAMS})
endif()

# The seed corpus writer (tests/fuzz/make_corpus.cpp), built on demand by `make fuzz-corpus`.
add_executable(dg_fuzz_make_corpus EXCLUDE_FROM_ALL ${PROJECT_SOURCE_DIR}/tests/fuzz/make_corpus.cpp)
target_link_libraries(dg_fuzz_make_corpus PRIVATE dg_lm dg_core)
