# The learner's path (tools/learn/README.md). For each chapter NN with checks/chNN.cpp:
#   learn_chNN_solutions  its checks against the library's own definitions (ctest: all pass)
#   learn_chNN_stubs      the same checks with stubs/chNN.cpp linked in (ctest: every exercise fails)
#   learn_wrong_<name>    the checks with one wrong answer, tools/learn/wrong/<name>.cpp (a file
#                         named chNN_<what>.cpp whose first line is "// Wrong answer to <function>:
#                         ..."); ctest runs its exercise's checks and requires one to fail
#   learn_chNN            the checks with the learner's file, DG_LEARN_DIR/chNN.cpp, when it exists
#                         (`make learn CHAPTER=N` copies the stubs there first)
# The exercise functions are weak in the library (tensor/exercise.h): a definition in a program's
# own objects replaces the library's, so no library is built twice.
set(DG_LEARN_DIR ${PROJECT_SOURCE_DIR}/tools/learn/mine CACHE PATH
  "where the learner's exercise files (chNN.cpp) are")
# The grader, the checks and the exercise files compile at -O1 in a Release build (the library they
# link keeps -O3): they call the library and compare, and there are many of them.
set(DG_LEARN_OPT $<$<CONFIG:Release>:-O1>)
add_library(dg_learn_grade OBJECT ${PROJECT_SOURCE_DIR}/tools/learn/grade.cpp)
target_compile_options(dg_learn_grade PRIVATE ${DG_LEARN_OPT})
target_link_libraries(dg_learn_grade PUBLIC dg_core)
file(GLOB DG_LEARN_CHECKS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/learn/checks/ch*.cpp)
foreach(checks ${DG_LEARN_CHECKS})
  get_filename_component(ch ${checks} NAME_WE)
  # What the chapter's programs link: the framework; chapter 9 also the language model, chapter 10
  # also the AttnRes statistics. A learner's first `make learn` compiles no more than that.
  if(ch STREQUAL "ch10")
    set(library dg_attnres)
  elseif(ch STREQUAL "ch09")
    set(library dg_lm)
  else()
    set(library dg_core)
  endif()
  add_library(dg_learn_${ch}_checks OBJECT ${checks})
  target_compile_options(dg_learn_${ch}_checks PRIVATE ${DG_LEARN_OPT})
  target_link_libraries(dg_learn_${ch}_checks PUBLIC ${library})
  set(objects $<TARGET_OBJECTS:dg_learn_grade> $<TARGET_OBJECTS:dg_learn_${ch}_checks>)
  add_executable(learn_${ch}_solutions ${objects})
  add_executable(learn_${ch}_stubs ${objects} ${PROJECT_SOURCE_DIR}/tools/learn/stubs/${ch}.cpp)
  set(programs learn_${ch}_solutions learn_${ch}_stubs)
  if(EXISTS ${DG_LEARN_DIR}/${ch}.cpp)
    add_executable(learn_${ch} ${objects} ${DG_LEARN_DIR}/${ch}.cpp)
    list(APPEND programs learn_${ch})
  endif()
  foreach(program ${programs})
    target_link_libraries(${program} PRIVATE ${library})
    target_compile_options(${program} PRIVATE ${DG_LEARN_OPT})
  endforeach()
  file(GLOB wrong_answers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tools/learn/wrong/${ch}_*.cpp)
  foreach(wrong ${wrong_answers})
    get_filename_component(name ${wrong} NAME_WE)
    file(STRINGS ${wrong} first_line LIMIT_COUNT 1)
    if(NOT first_line MATCHES "^// Wrong answer to ([A-Za-z_:]+):")
      message(FATAL_ERROR "${wrong}: the first line must be \"// Wrong answer to <function>: <how>\"")
    endif()
    add_executable(learn_wrong_${name} ${objects} ${wrong})
    target_link_libraries(learn_wrong_${name} PRIVATE ${library})
    target_compile_options(learn_wrong_${name} PRIVATE ${DG_LEARN_OPT})
    add_test(NAME learn_wrong_${name}_fails COMMAND learn_wrong_${name} --expect-wrong ${CMAKE_MATCH_1})
    set_tests_properties(learn_wrong_${name}_fails PROPERTIES ENVIRONMENT DEPTHGRAD_THREADS=1 LABELS learn)
  endforeach()
  add_test(NAME learn_${ch}_solutions_pass COMMAND learn_${ch}_solutions)
  add_test(NAME learn_${ch}_stubs_fail COMMAND learn_${ch}_stubs --expect-fail)
  set_tests_properties(learn_${ch}_solutions_pass learn_${ch}_stubs_fail PROPERTIES
    ENVIRONMENT DEPTHGRAD_THREADS=1 LABELS learn)
endforeach()
