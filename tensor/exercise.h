// DG_EXERCISE marks a library function that the learner's path (tools/learn/README.md) asks a
// learner to write again. The library's definition is weak: a program that links its own
// definition of the same function (a learner's file, or the chapter's stubs) uses that one
// everywhere the library calls it, and every other program uses the library's. Nothing else
// changes: no indirection, no flag; the one cost is that the compiler does not inline it.
//
// Put it on the definition in the .cpp only, never on the declaration in a header: a header's
// attribute would make the learner's definition weak too. An exercise is a plain function (not
// inline, not a template), declared in a header the stub file can include.
// This file does not choose which functions are exercises: each chapter does
// (tools/learn/checks/).
#pragma once

#define DG_EXERCISE __attribute__((weak))
