// Running a command on every MPI rank (train, reproduce, bench): errors every rank raises alike
// are printed once, by rank 0, and the job ends cleanly; an error only one rank saw is printed
// with the rank's number and ends the whole job at once (MPI_Abort) instead of leaving the other
// ranks waiting in a collective. Also train's --global-batch (--accum and
// --zero are run-config settings: tools/cli/run_config_flags.h).
// It does not start MPI (train/dist/world.h does) nor decide what ranks compute (train/trainer.h).
#pragma once
#include <functional>
#include <vector>

#include "tools/cli/flags.h"
#include "train/dist/world.h"
#include "train/lm/run_config.h"
#include "train/trainer.h"

namespace dg::cli {

// body(agreed) runs the command; it sets `agreed` once every rank is known to run the same
// settings (from then on a UsageError is one every rank raises alike).
int run_on_every_rank(World& world, const char* command,
                      const std::function<int(bool& agreed)>& body);

// Refuses (CollectiveError naming the setting and the rank) unless every rank runs the same
// `extra` (a JSON object of settings that must agree, e.g. the run config read from each rank's
// --config; may be null) and was given the same value of every flag. Called by every rank.
void check_same_flags(World& world, const Flags& f, const json::Value& extra = json::Value());

// --global-batch G (train).
Flags& add_layout_flags(Flags& f);
// --global-batch sets run.training.batch to G / (ranks x accum); then validates the run. Refuses an
// impossible layout with a UsageError before any work.
void apply_layout_flags(const Flags& f, int ranks, RunConfig& run);
// "N rank(s) x accum K x batch b = global batch G windows per step"; over several ranks also the
// ZeRO stage, when the sum over ranks runs (while backward runs or after it), what each rank
// holds of the training state (weights, gradients, the optimiser's per-element state, in MiB)
// and the start-up parameter checksum (check_same_parameters: called by every rank, refuses ranks
// whose parameters differ).
std::string layout_line(World& world, Trainer& trainer);
// This process's peak resident memory so far (VmHWM, KiB); then the peak restarts from the
// current size (Linux: "5" written to /proc/self/clear_refs), so the next reading covers only
// what follows: train calls it before the first step.
int64_t restart_peak_resident();
// "peak resident memory per rank (MiB): start-up 3547, 3547; training 2402, 2390; after the last
// step 1500, 1490": the start-up peaks restart_peak_resident returned, each rank's peak since, and
// what each holds now (gathered). Called by every rank.
std::string peak_memory_line(World& world, int64_t startup_kib);

}  // namespace dg::cli
