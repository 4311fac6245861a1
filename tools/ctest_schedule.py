#!/usr/bin/env python3
"""Estimates the wall time of `ctest -j N` from each entry's time in an earlier run.

`make test` runs ctest on a clean clone: no cost data, so ctest starts the entries in the order
they were declared, each when the cores it claims (PROCESSORS) are free, a RUN_SERIAL entry alone.
This replays that list schedule (ctest 3.25's StartNextTests: the entries sorted by COST,
descending, stable over declaration order; the first ones that fit start) with the times of an
earlier run, so a change of PROCESSORS, COST or of one entry's time can be weighed without running
the whole suite. Replayed against the run the times came from, it gives that run's wall time
within a second (276 s for the gcc pass, 102 s for the clang pass of `make test`).

Usage:
    cd build && ctest --show-only=json-v1 > tests.json   # (ctest then rewrites Testing/Temporary/LastTest.log)
    python3 tools/ctest_schedule.py build/tests.json build/Testing/Temporary/CTestCostData.txt
    python3 tools/ctest_schedule.py tests.json CTestCostData.txt --jobs 2 \\
        --one-core cli_usage,run_scales_carry --time mpi_train=40 --cost mpi_train=100 --show 10

CTestCostData.txt is what ctest writes after a run (name, runs, mean seconds); entries of
tests.json missing from it are left out (ctest -E / -R runs), so each pass of `make test` is
estimated from its own build's file. --one-core, --time and --cost say "what if": an entry
claiming one core, taking other seconds, or carrying a COST. --show N prints the N longest
entries with their start times.
"""
import argparse
import heapq
import json
import sys


def read_entries(tests_json, cost_data):
    """The entries of tests_json (declaration order) that have a time in cost_data."""
    seconds = {}
    with open(cost_data) as f:
        for line in f:
            if line.strip() == "---":
                break
            parts = line.split()
            if len(parts) == 3:
                seconds[parts[0]] = float(parts[2])
    with open(tests_json) as f:
        tests = json.load(f)["tests"]
    entries = []
    for test in tests:
        properties = {p["name"]: p["value"] for p in test.get("properties", [])}
        if test["name"] in seconds:
            entries.append({"name": test["name"], "time": seconds[test["name"]],
                            "processors": int(properties.get("PROCESSORS", 1)),
                            "serial": bool(properties.get("RUN_SERIAL", False)),
                            "cost": float(properties.get("COST", 0))})
    return entries


def simulate(entries, jobs):
    """Replays ctest's start rule; returns (wall seconds, [(start, entry)] in start order)."""
    pending = sorted(entries, key=lambda e: -e["cost"])  # stable: declaration order otherwise
    running = []  # heap of (end time, sequence number, entry)
    now, used, serial, started = 0.0, 0, False, []

    def start_next():
        nonlocal used, serial
        free = jobs - used
        for entry in list(pending):
            if serial or free == 0:
                break
            if entry["serial"] and used > 0:
                continue
            need = min(entry["processors"], jobs)
            if need <= free:
                pending.remove(entry)
                heapq.heappush(running, (now + entry["time"], len(started), entry))
                started.append((now, entry))
                used, free = used + need, free - need
                serial = entry["serial"]

    start_next()
    while running:
        now, _, entry = heapq.heappop(running)
        used -= min(entry["processors"], jobs)
        serial = False if entry["serial"] else serial
        start_next()
    if pending:
        raise RuntimeError(f"ctest_schedule: {pending[0]['name']} never started")
    return now, started


def name_values(text, flag):
    """'a=1,b=2' -> {'a': 1.0, 'b': 2.0}, with an error naming the flag and the bad item."""
    values = {}
    for item in filter(None, (text or "").split(",")):
        name, sep, value = item.partition("=")
        try:
            values[name] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SystemExit(f"ctest_schedule: {flag} '{item}': expected NAME=SECONDS")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tests_json")
    parser.add_argument("cost_data")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--one-core", default="")
    parser.add_argument("--time", default="")
    parser.add_argument("--cost", default="")
    parser.add_argument("--show", type=int, default=0)
    args = parser.parse_args()
    entries = read_entries(args.tests_json, args.cost_data)
    names = {e["name"] for e in entries}
    one_core = set(filter(None, args.one_core.split(",")))
    times, costs = name_values(args.time, "--time"), name_values(args.cost, "--cost")
    for name in one_core | set(times) | set(costs):
        if name not in names:
            raise SystemExit(f"ctest_schedule: no entry named '{name}' has a time")
    for entry in entries:
        entry["processors"] = 1 if entry["name"] in one_core else entry["processors"]
        entry["time"] = times.get(entry["name"], entry["time"])
        entry["cost"] = costs.get(entry["name"], entry["cost"])
    wall, started = simulate(entries, args.jobs)
    total = sum(e["time"] for e in entries)
    print(f"{len(entries)} entries, {total:.1f} s in all: about {wall:.1f} s at -j {args.jobs}")
    longest = sorted(started, key=lambda s: -s[1]["time"])[: args.show]
    for start, entry in longest:
        print(f"  {entry['name']:<32} {entry['time']:7.1f} s, {entry['processors']} core(s),"
              f" starts at {start:6.1f} s")


if __name__ == "__main__":
    sys.exit(main())
