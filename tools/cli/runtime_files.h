// Where the depthgrad program finds the files it ships and reads at run time (today one:
// torch_reference.py, for bench --compare-torch). Installed, they sit in <prefix>/share/depthgrad/,
// found from the program's own path (/proc/self/exe); the program in the build folder it was built
// in reads the source tree's tools/ folder, recorded at configure time. Never the working
// directory, and never a guess among several candidates. Not the user's files (data, runs, caches).
#pragma once
#include <string>

namespace dg::cli {

// The folder holding this program's run-time files (it need not exist).
std::string runtime_files_dir();

// runtime_files_dir()/name; a std::runtime_error naming that path and `instead` (what to do
// without it) when the file is not there.
std::string runtime_file(const std::string& name, const std::string& instead);

}  // namespace dg::cli
