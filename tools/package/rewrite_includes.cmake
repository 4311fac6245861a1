# Run by `cmake --install` after the headers are copied (CMakeLists.txt, "Install"): rewrites the
# installed headers' project includes from the source tree's short form, #include "nn/layers.h",
# to #include "depthgrad/nn/layers.h", so that only <prefix>/include needs to be on a consumer's
# include path and a consumer's own nn/layers.h cannot take the place of ours. The source tree is
# not touched. Input: DG_INSTALLED_HEADERS, the installed include/depthgrad directory.
file(GLOB_RECURSE dg_headers "${DG_INSTALLED_HEADERS}/*.h")
foreach(header ${dg_headers})
  file(READ "${header}" text)
  string(REGEX REPLACE "#include \"(tensor|autograd|nn|train)/" "#include \"depthgrad/\\1/" text "${text}")
  file(WRITE "${header}" "${text}")
endforeach()
