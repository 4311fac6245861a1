// `depthgrad evolve`: an evolutionary search over micro-LM genomes, steered by a research
// direction. This header is the entry point the CLI and the tests include; the search lives in
// tools/attnres/evolve/, one file per concern:
//   genome.h      the nine genes, their canonical text, the model a genome describes
//   directions.h  the direction rules (one table: keywords in English and Chinese -> effects on
//                 the search space) and the keyword matcher
//   proposals.h   mutation, crossover and the proposals of a generation (deterministic RNG)
//   trials.h      a trial on one seed, the trainer hook, the real trainer (train_and_evaluate),
//                 the score over seeds
//   search.h      the search loop: selection, the ablation, resume, the test split, result.json
//   ablation.h    which of the champion's changes made its gain (single-gene variants, verdict)
//   records.h     the search's records as result.json holds them (internal)
//   render.h      report.md and index.html from result.json
#pragma once

#include "tools/attnres/evolve/ablation.h"
#include "tools/attnres/evolve/directions.h"
#include "tools/attnres/evolve/genome.h"
#include "tools/attnres/evolve/proposals.h"
#include "tools/attnres/evolve/render.h"
#include "tools/attnres/evolve/search.h"
#include "tools/attnres/evolve/trials.h"
