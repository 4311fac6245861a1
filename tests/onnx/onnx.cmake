# The ONNX files' real clients under ctest (tests/onnx/onnx_runtime.sh): onnx_export_cases
# (tests/onnx/export_cases.cpp) writes the cases into the build folder (onnx_cases/), ONNX Runtime
# under node runs them (tests/onnx/run_onnxruntime.js, the npm package in DG_ONNXRUNTIME_DIR)
# and the onnx checker checks them (tests/onnx/check_onnx.py, when a python3 has the onnx module).
# Skipped (77) without node or the package: `make test` installs both (tools/install-deps.sh,
# tools/onnx/install_onnxruntime.sh).
set(DG_ONNXRUNTIME_DIR "${PROJECT_BINARY_DIR}/onnxruntime-node" CACHE PATH
  "folder holding node_modules/onnxruntime-node for the ONNX tests (tools/onnx/install_onnxruntime.sh DIR)")
add_executable(onnx_export_cases ${PROJECT_SOURCE_DIR}/tests/onnx/export_cases.cpp
  ${PROJECT_SOURCE_DIR}/tests/onnx/exported_examples.cpp)
target_link_libraries(onnx_export_cases PRIVATE dg_lm)
# At -O1 in a Release build, as dg_tests: it builds small models and writes files (the library it
# calls keeps -O3); its two files' compile 20.2 -> 12.4 CPU seconds (g++ 12).
target_compile_options(onnx_export_cases PRIVATE $<$<CONFIG:Release>:-O1>)
add_test(NAME onnx_runtime COMMAND bash ${PROJECT_SOURCE_DIR}/tests/onnx/onnx_runtime.sh
  $<TARGET_FILE:onnx_export_cases> ${DG_ONNXRUNTIME_DIR} ${PROJECT_BINARY_DIR}/onnx_cases)
set_tests_properties(onnx_runtime PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  ENVIRONMENT "DEPTHGRAD_THREADS=1")

# `depthgrad onnx-check` end to end (tests/cli_onnx.sh): a torch.onnx.export file described, files
# that are not ONNX models or are miswired refused in one line.
if(TARGET depthgrad)
  add_test(NAME cli_onnx COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli_onnx.sh $<TARGET_FILE:depthgrad>)
  set_tests_properties(cli_onnx PROPERTIES TIMEOUT 120 ENVIRONMENT "DEPTHGRAD_THREADS=1")
endif()
