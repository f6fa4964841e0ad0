#!/usr/bin/env python3
"""Checks the arrows of docs/architecture.md: no file under common/ includes a chapter's file
or names a chapter's namespace (ch01::, ..., ch99::), and every layer includes only itself
and the layers under it. And a chapter reads in a few steps: no header of a chapter includes
its own chapter's headers more than MAX_CHAPTER_DEPTH deep (a > b > c > d is 3).

  python3 scripts/check_layers.py [--root DIR]      (exit 0: clean; 1: each violation printed)
"""
import argparse
import os
import re
import sys

# Each layer and the layers it may include (docs/architecture.md's table, read upward).
ALLOWED = {
    "core": {"core"},
    "device": {"core", "device"},
    "cuda_core": {"core", "cuda_core"},
    "sm80": {"core", "sm80"},
    "sm90": {"core", "sm80", "sm90"},
    "schedule": {"core", "sm80", "schedule"},
    "reference": {"core", "reference"},
    "harness": {"core", "device", "cuda_core", "sm80", "sm90", "schedule", "reference", "harness", "api"},
    "api": {"core", "device", "reference", "harness", "api"},
    "tests": {"core", "device", "cuda_core", "sm80", "sm90", "schedule", "reference", "harness", "api", "tests"},
}
# A reader follows a chapter's kernel through at most this many of its own headers.
MAX_CHAPTER_DEPTH = 3
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CHAPTER_NS = re.compile(r"\bch\d\d::")


def violations(root):
    common = os.path.join(root, "common")
    for folder, _, files in os.walk(common):
        layer = os.path.relpath(folder, common).split(os.sep)[0]
        for name in files:
            if not name.endswith((".h", ".hpp", ".cuh", ".cu", ".cpp")):
                continue
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            for inc in INCLUDE.findall(text):
                top = inc.split("/")[0]
                if re.match(r"\d\d_", top) or top == "tour":
                    yield f"{rel}: includes a chapter's file, {inc}"
                elif "/" in inc and layer in ALLOWED and top not in ALLOWED[layer]:
                    yield f"{rel}: layer {layer}/ includes {inc}, from a layer above it"
            code = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
            for m in CHAPTER_NS.finditer(code):
                yield f"{rel}: names a chapter's namespace, {m.group(0)}"


def chapter_chains(root):
    """Each chapter header's longest chain of includes of its own chapter's headers."""
    chapters = os.path.join(root, "chapters")
    includes = {}  # "08_x/a.cuh" -> the same chapter's headers it includes
    for folder in sorted(os.listdir(chapters)) if os.path.isdir(chapters) else []:
        if not re.match(r"\d\d_", folder):
            continue
        for name in os.listdir(os.path.join(chapters, folder)):
            if name.endswith((".h", ".hpp", ".cuh")):
                with open(os.path.join(chapters, folder, name), encoding="utf-8") as fh:
                    found = INCLUDE.findall(fh.read())
                includes[f"{folder}/{name}"] = [i for i in found if i.startswith(folder + "/")]
    memo = {}

    def longest(header, seen=()):
        if header not in memo:
            tails = [longest(i, seen + (header,)) for i in includes.get(header, []) if i not in seen]
            memo[header] = [header] + max(tails, key=len, default=[])
        return memo[header]
    return {h: longest(h) for h in includes}


def depth_violations(root):
    for header, chain in sorted(chapter_chains(root).items()):
        if len(chain) - 1 > MAX_CHAPTER_DEPTH:
            yield (f"chapters/{header}: includes its chapter's headers {len(chain) - 1} deep "
                   f"({' > '.join(os.path.basename(c) for c in chain)}); at most {MAX_CHAPTER_DEPTH}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = ap.parse_args(argv)
    found = list(violations(args.root)) + list(depth_violations(args.root))
    for v in found:
        print(v)
    print(f"check_layers: {len(found)} violation(s)" if found else "check_layers: clean")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
