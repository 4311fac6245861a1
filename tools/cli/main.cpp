// depthgrad: the command-line program. Dispatches to one subcommand; turns every error into one
// line on stderr and a non-zero exit (2 for usage mistakes, 1 for everything else). Runs OpenMP
// with passive waiting unless OMP_WAIT_POLICY says otherwise (see wait_passively_by_default).
#include <fmt/core.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "tensor/threads.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "train/io/run_record.h"

namespace {
// OpenMP threads that spin while they wait make a busy machine 5-10x slower at 2 threads
// (tools/README.md, "Threads on a busy machine"); waiting passively costs little on an idle one.
// libgomp reads OMP_WAIT_POLICY when it is loaded, before main, so the program sets it and runs
// itself again, once; a policy the user set is kept.
void wait_passively_by_default(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (::setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure: run on with libgomp's default
}

const char* kUsage =
    "usage: depthgrad <command> [flags]\n\n"
    "commands:\n"
    "  reproduce   run a paper reproduction (Block AttnRes vs RD-AttnRes): parity or paired "
    "protocol\n"
    "  evolve      evolutionary search over micro-LM genomes\n"
    "  train       train a micro-LM (flags or a JSON config), with checkpoints and resume\n"
    "  eval        evaluate a checkpoint on a split\n"
    "  generate    continue a prompt with a trained or imported model (streams text; K/V-cached\n"
    "              decoding)\n"
    "  tokenize    train or apply a byte-level BPE tokenizer\n"
    "  import      read a Hugging Face GPT-2 or Llama folder as a depthgrad model\n"
    "  finetune    train LoRA adapters over a frozen Hugging Face GPT-2 or Llama on your text;\n"
    "              writes the adapter in PEFT's layout and the merged model\n"
    "  export      write a depthgrad model as a Hugging Face folder (--to hf), a GGUF file for\n"
    "              llama.cpp (--to gguf) or an ONNX model (--to onnx)\n"
    "  onnx-check  print an ONNX file's inputs, outputs, opset, producer and op counts\n"
    "  gradcheck   run the op gradient-check suite and print a table\n"
    "  bench       training speed (optionally against PyTorch and MPI ranks); --generate times\n"
    "              generation\n"
    "  list        list the paper keys reproduce knows\n\n"
    "`depthgrad <command> --help` shows each command's flags and defaults.\n";
}  // namespace

int main(int argc, char** argv) {
  wait_passively_by_default(argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    fmt::print("depthgrad {} ({})\n", dg::build_version(), dg::build_commit());
    return 0;
  }
  try {
    if (!dg::blas_is_openmp_build())
      fmt::print(stderr, "depthgrad: warning: the linked OpenBLAS runs its threads with {}\n",
                 dg::blas_parallel_mode());
    using namespace dg::cli;
    if (command == "list") return cmd_list(argc, argv, 2);
    if (command == "reproduce") return cmd_reproduce(argc, argv, 2);
    if (command == "gradcheck") return cmd_gradcheck(argc, argv, 2);
    if (command == "evolve") return cmd_evolve(argc, argv, 2);
    if (command == "train") return cmd_train(argc, argv, 2);
    if (command == "eval") return cmd_eval(argc, argv, 2);
    if (command == "generate") return cmd_generate(argc, argv, 2);
    if (command == "tokenize") return cmd_tokenize(argc, argv, 2);
    if (command == "bench") return cmd_bench(argc, argv, 2);
    if (command == "import") return cmd_import(argc, argv, 2);
    if (command == "finetune") return cmd_finetune(argc, argv, 2);
    if (command == "export") return cmd_export(argc, argv, 2);
    if (command == "onnx-check") return cmd_onnx_check(argc, argv, 2);
    fmt::print(stderr, "depthgrad: unknown command '{}' (see depthgrad --help)\n", command);
    return 2;
  } catch (const dg::cli::UsageError& e) {
    fmt::print(stderr, "depthgrad {}: error: {}\n", command, e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Sizes are checked against the machine's memory before models are built; this is what
    // escaped that estimate (or another program took the memory meanwhile).
    fmt::print(stderr,
               "depthgrad {}: error: out of memory: an allocation failed (std::bad_alloc); use "
               "smaller sizes (dim, layers, seq-len, batch, vocab) or free memory\n",
               command);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "depthgrad {}: error: {}\n", command, e.what());
    return 1;
  }
}
