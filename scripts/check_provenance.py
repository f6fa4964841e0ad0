#!/usr/bin/env python3
"""Checks that every file in a results folder (plots/results/<gpu>/ and its subfolders) is
named in that folder's env.txt, the page that says which command on which machine produced
it. A file that env.txt never names is a measurement nobody can repeat.

A file counts as named when env.txt writes its name (with or without its folder), a shell
brace list that expands to it (profile_ch08_{async,dq_pass}_d{64,128}.txt) or a wildcard
that matches it (training_*.log).

Usage: python3 scripts/check_provenance.py [RESULTS_FOLDER...]
(default: every folder under plots/results/). Exit 0 when every file is named, 1 with the
list of the others, 2 when a folder has no env.txt.
"""
import fnmatch
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots", "results"))
# A word of env.txt that may name a file: letters, digits, _ . / - and the * { } , of
# wildcards and brace lists.
WORD = re.compile(r"[\w./*{},-]+")


def expand_braces(word):
    """profile_{a,b}_d{64,128}.txt -> its four names, as the shell expands it."""
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    head, tail = word[:m.start()], word[m.end():]
    return [name for alt in m.group(1).split(",") for name in expand_braces(head + alt + tail)]


def names_in(text):
    """The file names (last path component) and wildcards that a text writes."""
    names = set()
    for word in WORD.findall(text):
        for name in expand_braces(word.strip(",.")):
            names.add(name.rstrip(",.").split("/")[-1])
    return names


def unnamed(folder):
    """The files below folder (relative paths) that its env.txt does not name."""
    with open(os.path.join(folder, "env.txt"), encoding="utf-8") as fh:
        names = names_in(fh.read())
    wildcards = [n for n in names if "*" in n]
    missing = []
    for dirpath, _, files in os.walk(folder):
        for f in sorted(files):
            if f == "env.txt" or f in names or any(fnmatch.fnmatchcase(f, w) for w in wildcards):
                continue
            missing.append(os.path.relpath(os.path.join(dirpath, f), folder))
    return sorted(missing)


def main(argv):
    folders = argv or sorted(os.path.join(ROOT, d) for d in os.listdir(ROOT)
                             if os.path.isdir(os.path.join(ROOT, d)))
    status = 0
    for folder in folders:
        if not os.path.isfile(os.path.join(folder, "env.txt")):
            print(f"check_provenance: {folder} has no env.txt: write one that says how its files "
                  f"were produced", file=sys.stderr)
            return 2
        missing = unnamed(folder)
        for rel in missing:
            print(f"check_provenance: {os.path.join(folder, rel)} is not named in its env.txt: "
                  f"add the command that produced it")
        print(f"check_provenance: {folder}: {len(missing)} of its files not named in env.txt")
        status = status or (1 if missing else 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
