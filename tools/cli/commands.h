// The depthgrad subcommands. Each takes the full argv and the index of its first flag, returns
// the process exit code, and throws UsageError (exit 2) or another exception (exit 1) on errors.
#pragma once

namespace dg::cli {

int cmd_list(int argc, char** argv, int start);
int cmd_reproduce(int argc, char** argv, int start);
int cmd_gradcheck(int argc, char** argv, int start);
int cmd_evolve(int argc, char** argv, int start);
int cmd_train(int argc, char** argv, int start);
int cmd_eval(int argc, char** argv, int start);
int cmd_tokenize(int argc, char** argv, int start);
int cmd_generate(int argc, char** argv, int start);
int cmd_bench(int argc, char** argv, int start);
int cmd_import(int argc, char** argv, int start);
int cmd_finetune(int argc, char** argv, int start);
int cmd_export(int argc, char** argv, int start);
int cmd_onnx_check(int argc, char** argv, int start);

}  // namespace dg::cli
