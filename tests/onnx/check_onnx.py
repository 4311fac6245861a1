#!/usr/bin/env python3
"""The onnx package's checker over ONNX files: onnx.checker.check_model(model, full_check=True)
(the graph's structure, every node against its operator schema at the model's opset, and strict
shape inference) on each model of a manifest of test cases (tests/onnx/onnx_cases.h) or on the
files given. A second client beside ONNX Runtime: optional, never needed to build, test or run
depthgrad. It only reads.

  python3 tests/onnx/check_onnx.py MANIFEST.json | MODEL.onnx ...

Prints one line per model (PASS or FAIL, its name, the checker's first line when it refuses),
then "N passed, M failed". Exit: 0 when every model passes, 1 when one fails, 2 for a bad
command line or manifest, 77 when the onnx module is missing (Debian: apt-get install
python3-onnx).
"""
import json
import os
import sys

SKIP = 77


def refuse(message):
    """A bad command line or manifest: one line on stderr, exit 2."""
    print(f"check_onnx: {message}", file=sys.stderr)
    sys.exit(2)


def models_of(arguments):
    """(name, path) of every model: a manifest's cases' models, or the .onnx files themselves."""
    models = []
    for argument in arguments:
        if not argument.endswith(".json"):
            models.append((argument, argument))
            continue
        try:
            with open(argument, encoding="utf-8") as f:
                manifest = json.load(f)
        except (OSError, ValueError) as e:
            refuse(f"{argument}: {e}")
        if not isinstance(manifest, dict) or manifest.get("format") != "depthgrad-onnx-cases" or not isinstance(
                manifest.get("cases"), list):
            refuse(f"{argument}: not a manifest of ONNX cases")
        folder = os.path.dirname(argument)
        for i, case in enumerate(manifest["cases"]):
            if not isinstance(case, dict) or not all(
                    isinstance(case.get(key), str) and case[key] for key in ("name", "model")):
                refuse(f"{argument}: case {i}: needs a \"name\" and a \"model\" file name")
            models.append((case["name"], os.path.join(folder, case["model"])))
    return models


def check(onnx, path):
    """None when the checker accepts the file, else the first line of its complaint."""
    try:
        onnx.checker.check_model(path, full_check=True)
        return None
    except Exception as e:  # the checker raises ValidationError, InferenceError, OSError...
        lines = str(e).strip().splitlines() or [type(e).__name__]
        return f"{type(e).__name__}: {lines[0]}"


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 2 if len(sys.argv) < 2 else 0
    models = models_of(sys.argv[1:])
    try:
        import onnx
        import onnx.checker
    except ImportError as e:
        print(f"SKIPPED: the onnx module is missing ({e}); on Debian: apt-get install python3-onnx")
        return SKIP
    passed = failed = 0
    width = max([len(name) for name, _ in models] + [4])
    for name, path in models:
        complaint = check(onnx, path)
        print(f"{'FAIL' if complaint else 'PASS'}  {name.ljust(width)}  {path}")
        if complaint:
            print(f"      {complaint}")
            failed += 1
        else:
            passed += 1
    print(f"onnx {onnx.__version__} checker (full_check)")
    print(f"check_onnx: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
