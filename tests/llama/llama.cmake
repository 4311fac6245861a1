# llama.cpp as the GGUF files' real client under ctest (tests/llama/llama_cpp_client.sh):
# llama_lora_cases (tests/llama/lora_cases.cpp) trains the tiny imported Llama and GPT-2 a little
# and a LoRA adapter over each, `depthgrad export --to gguf` writes the base, adapter, merged f16
# and merged q8_0 files, and llama.cpp (the npm package @fugood/llama.node in
# DG_LLAMA_NODE_DIR, run by tests/llama/run_llama.js) must continue a prompt greedily as
# `depthgrad generate` does. Skipped (77) without node or the package: `make test` installs both
# (tools/install-deps.sh, tools/llama/install_llama_node.sh).
set(DG_LLAMA_NODE_DIR "${PROJECT_BINARY_DIR}/llama-node" CACHE PATH
  "folder holding node_modules/@fugood/llama.node for the llama.cpp tests (tools/llama/install_llama_node.sh DIR)")
add_executable(llama_lora_cases ${PROJECT_SOURCE_DIR}/tests/llama/lora_cases.cpp)
target_link_libraries(llama_lora_cases PRIVATE dg_lm)
# At -O1 in a Release build, as dg_tests (the library it calls keeps -O3): 3.0 -> 2.2 CPU s.
target_compile_options(llama_lora_cases PRIVATE $<$<CONFIG:Release>:-O1>)
if(TARGET depthgrad)
  add_test(NAME llama_cpp_client COMMAND bash ${PROJECT_SOURCE_DIR}/tests/llama/llama_cpp_client.sh
    $<TARGET_FILE:depthgrad> $<TARGET_FILE:llama_lora_cases> ${PROJECT_SOURCE_DIR}/tests/data/hf
    ${DG_LLAMA_NODE_DIR} ${PROJECT_BINARY_DIR}/llama_cases)
  set_tests_properties(llama_cpp_client PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
    ENVIRONMENT "DEPTHGRAD_THREADS=1")
endif()
