// The rule of every command that writes into a folder or a file the user named (train's
// --output-dir, reproduce --combine's --output-dir, tokenize's --output, bench --write-check,
// import's --to, export's --output): what an earlier run left there is not replaced without
// --overwrite; the refusal is one line naming the folder and the ways on. Commands that create a
// fresh timestamped folder (reproduce, evolve) need no guard. It does not decide which files a
// command writes: the command lists them.
#pragma once
#include <string>
#include <vector>

#include "tools/cli/flags.h"

namespace dg::cli {

// --overwrite: `what` says what it replaces, for --help.
Flags& add_overwrite_flag(Flags& f, const std::string& what);

// The names among `files` that exist in `dir` (as anything: a file, a folder, a link), in order.
std::vector<std::string> files_present(const std::string& dir,
                                       const std::vector<std::string>& files);

// Empty when none of `files` is in `dir`; else "<dir> holds <what> (<the files present>): <ways>".
std::string replace_refusal(const std::string& dir, const std::vector<std::string>& files,
                            const std::string& what, const std::string& ways);

// --overwrite: removes those of `files` that are in `dir` before anything new is written, so no
// file of the old run survives beside the new one's; other files in `dir` stay.
void remove_files(const std::string& dir, const std::vector<std::string>& files);

}  // namespace dg::cli
