#!/usr/bin/env python3
"""Checks that every ctest filter the Markdown files show selects at least one test.

  python3 scripts/check_readme_commands.py --build-dir build [--ctest CTEST] [FILE.md ...]

Without FILE arguments it reads every *.md file of the repository (build folders, hidden
folders and tests/fixtures/ folders left out). In each it finds the ctest commands shown as
code: a line of a fenced code block (a trailing '\\' joins the next line), or an inline
`code span` that starts with ctest. A command that selects tests (-R, -E, -L, -LE, or
their long forms) is run again, as the shell would split it, with only its selection
options (once for each distinct selection), as

  ctest --test-dir BUILD_DIR --show-only=json-v1 <its -R/-E/-L/-LE/-U options>

(--show-only implies -N: nothing runs). A command whose selection lists no test fails the
check, named by file and line. Other options of the command (-j, --output-on-failure,
--test-dir, ...) do not change which tests are selected and are left out.

Test names come from gtest_discover_tests in PRE_TEST mode (cmake/flashtut.cmake), so ctest
lists the GoogleTest tests only by running each test executable with --gtest_list_tests
when it reads the build folder. The check therefore
  - lists the build folder once without a filter first and fails if that listing failed
    (a test executable that could not be run, e.g. one being relinked at that moment: it
    retries a few times first) or holds no test at all;
  - exits 77 (ctest: skipped) instead of failing when a filter selects nothing while the
    listing holds "<exe>_NOT_BUILT" placeholders (the executables are not built yet, so
    an empty selection says nothing about the filter).

Exit codes: 0 every filter selects tests; 1 one does not, or the listing failed; 2 bad
usage; 77 could not be judged (test executables not built).
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = 77
# ctest's options that select tests and take a value; the first four make a command one
# this script checks.
SELECTING = {"-R", "--tests-regex", "-E", "--exclude-regex", "-L", "--label-regex",
             "-LE", "--label-exclude"}
WITH_VALUE = SELECTING | {"-I", "--tests-information", "-FA", "--fixture-exclude-any",
                          "-FS", "--fixture-exclude-setup", "-FC", "--fixture-exclude-cleanup"}
FLAGS = {"-U", "--union"}
# Where a shell command ends.
ENDS = {";", "&&", "||", "|", "&", "(", ")"}
FENCE = re.compile(r"^\s*(```|~~~)")
CTEST = re.compile(r"(?:(?<=^)|(?<=[\s`(;&|]))ctest(?=\s)")


class Command:
    """One ctest invocation shown in a Markdown file."""

    def __init__(self, path, line, text):
        # The text as shown, less a trailing shell comment (one without quotes in it).
        self.path, self.line = path, line
        self.text = re.sub(r"\s+#[^'\"]*$", "", text.strip())
        self.selection, self.error = [], None
        try:
            lexer = shlex.shlex(self.text, posix=True, punctuation_chars=";&|()")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as e:  # an unclosed quote
            self.error = f"cannot split it as a shell would: {e}"
            return
        tokens = tokens[1:]  # 'ctest' itself
        for i, t in enumerate(tokens):
            if t in ENDS:
                tokens = tokens[:i]
                break
        i = 0
        while i < len(tokens):
            t = tokens[i]
            if t in WITH_VALUE:
                if i + 1 >= len(tokens):
                    self.error = f"'{t}' has no value"
                    return
                self.selection += [t, tokens[i + 1]]
                i += 2
                continue
            if t in FLAGS:
                self.selection.append(t)
            i += 1

    @property
    def selects(self):
        """Whether the command filters the tests (the commands this script checks)."""
        return self.error is not None or any(t in SELECTING for t in self.selection)

    def where(self):
        return f"{self.path}:{self.line}"


def commands_in(path, text):
    """Every ctest command shown as code in one Markdown text."""
    out, fence = [], None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number, line = i + 1, lines[i]
        i += 1
        m = FENCE.match(line)
        if m:
            fence = None if fence and line.strip().startswith(fence) else (fence or m.group(1))
            continue
        if fence:
            while line.endswith("\\") and i < len(lines):  # a continued shell line
                line = line[:-1] + " " + lines[i]
                i += 1
        for m in CTEST.finditer(line):
            before = line[:m.start()]
            if fence:
                out.append(Command(path, number, line[m.start():]))
            elif before.count("`") % 2 == 1 and before.endswith("`"):
                # An inline code span that starts with ctest: up to its closing backtick.
                end = line.find("`", m.end())
                out.append(Command(path, number, line[m.start():end if end >= 0 else None]))
    return out


def markdown_files(root):
    """The repository's Markdown files, build, hidden and fixture folders left out."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and not os.path.isfile(os.path.join(folder, d, "CMakeCache.txt"))
                         and not (d == "fixtures" and os.path.basename(folder) == "tests"))
        found += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".md")]
    return found


class Listing:
    """Runs ctest --show-only=json-v1 against a build folder."""

    def __init__(self, ctest, build_dir, attempts=3, pause=2.0):
        self.ctest, self.build_dir = ctest, build_dir
        self.attempts, self.pause = attempts, pause

    def names(self, selection):
        """The names of the selected tests; RuntimeError when ctest could not list them."""
        argv = [self.ctest, "--test-dir", self.build_dir, "--show-only=json-v1"] + selection
        problem = ""
        for attempt in range(self.attempts):
            if attempt:
                time.sleep(self.pause)
            try:
                run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise RuntimeError(f"{shlex.join(argv)}: {e}") from None
            # A test executable that cannot be listed makes ctest print a CMake error and
            # leave that executable's tests out: never trust such a listing.
            if run.returncode == 0 and "CMake Error" not in run.stderr:
                try:
                    return [t["name"] for t in json.loads(run.stdout)["tests"]]
                except (ValueError, KeyError, TypeError) as e:
                    problem = f"unreadable output ({e}): {run.stdout[:300]}"
                    continue
            problem = f"exit code {run.returncode}: {(run.stderr or run.stdout).strip()[:2000]}"
        raise RuntimeError(f"{shlex.join(argv)} failed {self.attempts} times; last: {problem}")


def check(commands, listing, out=None):
    """Exit code of the check of `commands` (Command objects), messages to `out` (stdout)."""
    out = out or sys.stdout
    todo = [c for c in commands if c.selects]
    if not todo:
        print("check_readme_commands: error: no ctest command with -R/-E/-L/-LE found "
              "(nothing to check: is the extractor broken?)", file=out)
        return 1
    try:
        everything = listing.names([])
    except RuntimeError as e:
        print(f"check_readme_commands: error: listing the tests failed: {e}", file=out)
        return 1
    if not everything:
        print(f"check_readme_commands: error: ctest lists no test at all in "
              f"{listing.build_dir} (is it a configured build folder?)", file=out)
        return 1
    not_built = sorted(n[:-len("_NOT_BUILT")] for n in everything if n.endswith("_NOT_BUILT"))
    empty, bad = [], []
    # Each listing runs every test executable (PRE_TEST discovery), so a selection the
    # Markdown files show several times (the same -R in a README and a docs page) is listed
    # once: the same ctest command gives the same answer.
    listed = {}
    for c in todo:
        if c.error:
            bad.append(f"{c.where()}: `{c.text}`: {c.error}")
            continue
        key = tuple(c.selection)
        try:
            if key not in listed:
                listed[key] = listing.names(c.selection)
            names = listed[key]
        except RuntimeError as e:
            bad.append(f"{c.where()}: `{c.text}`: {e}")
            continue
        names = [n for n in names if not n.endswith("_NOT_BUILT")]
        shown = " ".join(shlex.quote(t) for t in c.selection)
        if names:
            print(f"ok   {c.where()}: {shown} selects {len(names)} tests (e.g. {names[0]})", file=out)
        else:
            empty.append(f"{c.where()}: `{c.text}` selects no test ({shown})")
    for line in bad + empty:
        print(f"FAIL {line}", file=out)
    if bad or (empty and not not_built):
        print(f"check_readme_commands: {len(bad) + len(empty)} of {len(todo)} ctest commands "
              f"in the Markdown files select no test or cannot run", file=out)
        return 1
    if empty:
        print(f"check_readme_commands: skipped: {len(empty)} filters select nothing, but these "
              f"test executables are not built, so that proves nothing: {', '.join(not_built)}",
              file=out)
        return SKIP
    print(f"check_readme_commands: all {len(todo)} ctest filters select tests "
          f"({len(everything)} tests in {listing.build_dir})", file=out)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", required=True, help="a configured build folder")
    ap.add_argument("--ctest", default="ctest", help="the ctest executable (default: ctest)")
    ap.add_argument("--root", default=ROOT, help="the repository (default: this script's)")
    ap.add_argument("files", nargs="*", help="Markdown files (default: all of the repository's)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.build_dir):
        ap.error(f"--build-dir {args.build_dir}: not a folder")
    commands = []
    for path in args.files or markdown_files(args.root):
        with open(path, encoding="utf-8") as fh:
            rel = os.path.relpath(path, args.root)
            commands += commands_in(rel if not rel.startswith("..") else path, fh.read())
    return check(commands, Listing(args.ctest, os.path.abspath(args.build_dir)))


if __name__ == "__main__":
    sys.exit(main())
