#!/usr/bin/env python3
"""Everything this project measures on a GPU, in one call: the environment, every GPU test,
compute-sanitizer on every chapter, the tour at the FlashAttention papers' sizes, the
chapter programs' own benchmarks, PyTorch's attention backends for comparison, a small
training run, and Nsight Compute's DRAM bytes per kernel and profile sections of the main
kernels.

  python3 scripts/gpu_run.py OUT_DIR [--build BUILD_DIR] [--steps a,b,c] [options]
  python3 scripts/gpu_run.py --list                    # the steps, one line each
  python3 scripts/gpu_run.py OUT_DIR --dry-run ...     # the commands, without running them

e.g. python3 scripts/gpu_run.py /tmp/ft_out --build build --steps tour --sizes 4096 --dims 64

How it runs:
  - The steps (the table STEPS below; --list prints it) run in the table's order, whatever
    the order --steps names them in; the default is every step but `ctest`, which repeats
    `tests` through ctest.
  - Before the steps that run programs, BUILD_DIR (default build/) is configured and built
    with Ninja if it holds no tour binary (with --build-targets: those targets, always); the
    steps that need only the library build just that when it is missing. A BUILD_DIR that
    scripts/pack_build.py packed elsewhere (it holds PACKED.txt) is never built: its
    gzipped library is unpacked, the ctest step refuses, and only the steps whose programs
    it holds can pass (name them with --steps).
  - Every command's output goes to its own log in OUT_DIR/logs/ (e.g. logs/tour_d64_n1024.log),
    and each step prints what the log says in a line or two, to the screen and to
    OUT_DIR/summary.txt. logs/gpu_run.log lists every command run, its exit status and
    its time. At the end logs/ is packed into OUT_DIR/logs.tar.gz (the device tool returns
    at most 8 files, no more than 2 folders down: call it with a few steps at a time).
  - While the steps run, nvidia-smi samples the GPU's clocks, temperature and power once a
    second into logs/clocks.csv, and summary.txt ends with what the busy samples say (a card
    that slowed its clocks under load makes timings that are not comparable with others).
  - A step fails when one of its commands exits with an unexpected status (a test or a
    check fails, a tool is missing, a program runs past its time limit) or when the step
    itself raises. The run goes on with the next step; summary.txt ends with the failed
    steps' names and the exit status is 1. (scripts/gpu_run.sh, which this replaces,
    exited 0 whatever failed.)
  - Child processes find the tree's Python packages through PYTHONPATH (python/, scripts/,
    plots/, docs/, as cmake/flashtut.cmake's FT_PYTHON_ENV gives the tests), except the
    README's commands, which run in the environment a reader has. Python children run under
    the interpreter that runs this script. Lists take spaces or commas (--sizes 1024 4096
    or --sizes 1024,4096); put OUT_DIR before them.

Steps that need PyTorch with CUDA (anchors, vs_pytorch, train) say so and are skipped where
`import torch` fails. scripts/measure_traffic.sh (the traffic step) still reads its own
FT_TRAFFIC_* variables from the environment.
"""
import argparse
import concurrent.futures
import csv
import datetime
import glob
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import traceback

import pack_build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tree's Python folders, importable by name in every child (python/ holds the flashtut
# package; scripts/, plots/ and docs/ hold tools that import one another): the same list as
# FT_PYTHONPATH in cmake/flashtut.cmake (the library and test code leave sys.path alone).
PYTHONPATH = os.pathsep.join(os.path.join(ROOT, d) for d in ("python", "scripts", "plots", "docs"))
# Python children run under this interpreter, the one the caller chose (with PyTorch, say).
PYTHON = sys.executable
# Every benchmark shape holds 16384 tokens of hidden size 2048: B = 16384/N sequences of
# H = 2048/d heads, the shapes the FlashAttention papers benchmark.
TOKENS, HIDDEN = 16384, 2048
# The CUDA-core chapters; the tensor-core ones (06 onwards) are read from the tree.
CUDA_CORE_CHAPTERS = ["01_naive", "02_tiled", "03_online_softmax", "04_fused_forward", "05_backward"]
# The element types the chapter programs' --dtype and compare_pytorch.py's --dtypes take.
DTYPES = ("float32", "bf16", "fp16")
# The readme step's copy of the tree: a fixed place, so a second run replaces the first's.
FRESH = "/tmp/ft_fresh"
# Parallel jobs for the build and for ctest: the README's test preset runs 16 at a time.
JOBS = 16
# Time limits, in seconds: bounds, not expectations; a program that hangs is stopped
# (timeout(1): exit status 124) and the run goes on.
TEST_TIMEOUT = 240        # one shard of a GPU test binary
# A GPU test binary runs as this many gtest shards at once: the float64 references on the CPU
# set its time, not the GPU. Each shard may use every core (OpenMP threads waiting passively,
# not spinning): while all run they share the 16 cores, and the shard left with the heaviest
# tests gets them all (at 2 threads a shard, chapter 10's walk test kept one shard past 240 s
# while the other seven ended within it, on an H100 machine).
TEST_SHARDS = 8
# The float64 references the shards share (FT_REFERENCE_CACHE, common/reference/precision.hpp):
# a lock per reference makes one shard compute it and the others read it, instead of every
# shard computing every shape its variants reach. Outside OUT_DIR: it is large and not a result.
REFERENCE_CACHE = "/tmp/ft_reference_cache"
PROGRAM_TIMEOUT = 300     # one tour, chapter, training or Nsight Compute run
SANITIZE_TIMEOUT = 120    # one chapter program under compute-sanitizer (--sanitize-timeout)
VIEWS_TIMEOUT = 300       # one views test under compute-sanitizer (--sanitize-timeout)
# The Python GPU tests (python/tests): name, file, time limit, the log lines the summary
# shows, the lines it adds when the test fails. Exit status 77 is "skipped" (no PyTorch,
# no GPU), which the test prints with its reason; it is no failure.
PYTHON_GPU_TESTS = [
    ("python_autograd_gpu", "python/tests/test_autograd_gpu.py", 300,
     r"^(Ran|OK|FAILED|test_autograd_gpu: skipped)", r"Error|FAIL|rel_err|differs"),
    ("python_ops_gpu", "python/tests/test_ops_gpu.py", 600,
     r"^(Ran|OK|FAILED|test_ops_gpu: skipped)", r"Error|FAIL|AssertionError"),
    ("python_integrations_gpu", "python/tests/test_integrations_gpu.py", 600,  # skips without transformers
     r"^(Ran|OK|FAILED|test_integrations_gpu: skipped)|distance to sdpa", r"Error|FAIL|AssertionError"),
]
SKIPPED = 77
# The sanitizer's problem: small, for compute-sanitizer's slow-down; N = 200 is no
# multiple of 16, so the kernels' cut last tiles are checked too.
SANITIZE_SHAPE = ["--batch", "1", "--heads", "2", "--seq-len", "200"]
# Chapter 11's (a decode step: 4 query rows, 700 cached keys, grouped heads, bf16; its extra
# rows put the streaming read and the paged cache under the tools too).
DECODE_SANITIZE_SHAPE = ["--batch", "2", "--heads", "8", "--heads-kv", "2", "--seq-len", "4", "--len-kv", "700",
                         "--causal-align", "bottom-right", "--dtype", "bf16"]
SANITIZE_TOOLS = ("memcheck", "racecheck", "synccheck")
# The views kernels (ft::Views, common/core/strides.hpp) run only from these tests, which
# between them cover every views kernel (split_tail's cut tiles and async_bc64 included).
VIEWS_FILTER = "Ch07Views.ProjectionViews:Ch08Views.CutTilesAndTheFallback"
VIEWS_CHAPTERS = ("07_tensor_core_forward", "08_tensor_core_backward")
# The kernels the chapter READMEs discuss, as "chapter:variant:kernel:d" (see --profiles).
DEFAULT_PROFILES = ["04:simple:fused_forward_simple_kernel:64", "04:fast:fused_forward_kernel:64",
                    "04:fast:fused_forward_kernel:128", "05:flash:flash_backward_atomic_dq:64",
                    "05:flash:flash_backward_atomic_dq:128"]
# The profiles' problem: N = 4096, B = 4 (H = 2048/d), the shape the READMEs quote.
PROFILE_N, PROFILE_B = 4096, 4
# Nsight Compute's sections for a profile, and the metrics of each warp-stall reason's
# cycles per issued instruction (WarpStateStats' breakdown, which ncu does not print alone).
NCU_SECTIONS = ["SpeedOfLight", "Occupancy", "WarpStateStats", "ComputeWorkloadAnalysis",
                "MemoryWorkloadAnalysis", "LaunchStats", "InstructionStats",
                "MemoryWorkloadAnalysis_Tables", "SourceCounters"]
SOURCE_SECTIONS = ["WarpStateStats", "SourceCounters", "InstructionStats"]
STALL_METRICS = r"regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$"
# The training runs' two attentions, in this order within each round: FlashAttention-2
# (PyTorch's) and the tutorial's, so that a drift of the host's speed falls on both alike.
# The training step's attentions: PyTorch's FlashAttention-2 and cuDNN backends, the tutorial's.
ATTENTIONS = ("sdpa_flash", "sdpa_cudnn", "flashtut")


def chapter_folders(pattern=r"\d\d_"):
    """The chapter folders of the tree whose names match `pattern` and that build (CMakeLists.txt)."""
    here = os.path.join(ROOT, "chapters")
    return sorted(d for d in os.listdir(here)
                  if re.match(pattern, d) and os.path.isfile(os.path.join(here, d, "CMakeLists.txt")))


TC_CHAPTERS = chapter_folders(r"(0[6-9]|10)_")  # the training-shaped tensor-core chapters present: 06-10
ALL_CHAPTERS = CUDA_CORE_CHAPTERS + TC_CHAPTERS
# Chapter 11 (decoding, N_q <= 16): sanitized only when named, with --sanitize-args of its shape.
DECODE_CHAPTERS = chapter_folders(r"11_")


# ---- Helpers the steps share ------------------------------------------------------------

def executable(path):
    return path is not None and os.path.isfile(path) and os.access(path, os.X_OK)


def program(build, chapter):
    """A chapter's program, build/chapters/NN_name/chNN_name (the first such name there)."""
    folder = os.path.join(build, "chapters", chapter)
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    found = [n for n in names if re.fullmatch(r"ch[0-9]{2}_[a-z_]+", n)]
    return os.path.join(folder, found[0] if found else "ch" + chapter)


def shape(n, d, causal):
    """The program flags of a 16384-token shape: N = n, d = d, B = 16384/N, H = 2048/d."""
    return (["--seq-len", str(n), "--batch", str(TOKENS // n), "--heads", str(HIDDEN // d),
             "--head-dim", str(d)] + (["--causal"] if causal else []))


def with_flags(base, extra):
    """A program's flags `base` with `extra` after them, each flag `extra` names dropped from
    `base` with its value (CLI11 refuses an option given twice): --sanitize-args's shape
    replaces the step's own. A flag's value is the word after it unless that word is a flag."""
    named = {word for word in extra if word.startswith("--")}
    kept, i = [], 0
    while i < len(base):
        takes_value = i + 1 < len(base) and not base[i + 1].startswith("--")
        if base[i] not in named:
            kept += base[i:i + 1 + takes_value]
        i += 1 + takes_value
    return kept + extra


def causal_word(causal):
    return "--causal" if causal else "non-causal"


def variants_for(chapter, specs):
    """The variants "NN:variant" specs name for a chapter (NN: its number), comma-joined."""
    return ",".join(spec.partition(":")[2] for spec in specs
                    if spec.partition(":")[0] == chapter[:2])


def read_lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def grep(pattern, path):
    """The lines of a file that match a regular expression (none when there is no file)."""
    return [line for line in read_lines(path) if re.search(pattern, line)]


def grep_after(pattern, paths, after):
    """grep -h -A: each matching line and the `after` lines that follow, groups apart by '--'."""
    groups = []
    for path in paths:
        lines, end = read_lines(path), -1  # end: the last line the current group holds
        for i, line in enumerate(lines):
            if re.search(pattern, line):
                if end < 0 or i > end + 1:  # not next to the group before: a group of its own
                    groups.append([])
                groups[-1] += lines[max(i, end + 1):i + after + 1]
                end = max(end, i + after)
    return [line for k, group in enumerate(groups) for line in (["--"] if k else []) + group]


def first(lines):
    return lines[0] if lines else ""


def last(lines):
    return lines[-1] if lines else ""


def count_lines(path):
    """Lines that are not empty (grep -c .): a CSV's rows and its header."""
    return sum(1 for line in read_lines(path) if line)


def join_csvs(out, parts):
    """Writes the CSV files `parts` as one: the first one's header, then every file's rows."""
    with open(out, "w") as f:
        header = None
        for path in parts:
            lines = [line for line in read_lines(path) if line]
            if not lines:
                continue
            if header is None:
                header = lines[0]
                f.write(header + "\n")
            f.writelines(line + "\n" for line in lines[1:])


def tag_csv(part, whole, column, value):
    """Adds a CSV file's rows to another with one more column, `column` = `value`, by column
    name: `whole` keeps the columns of the first part added to it (and `column`), and a later
    part that lacks one of them (the ab step's base tree, built before that column existed)
    leaves it empty. A part with a column `whole` lacks raises ValueError naming both."""
    try:
        with open(part, newline="") as f:
            reader = csv.DictReader(f)
            rows, fields = list(reader), reader.fieldnames
    except OSError:
        return
    if not fields:
        return
    new = not os.path.exists(whole)
    if new:
        header = fields + [column]
    else:
        with open(whole, newline="") as f:
            header = next(csv.reader(f), [])
    extra = [c for c in fields if c not in header]
    if extra:
        raise ValueError(f"{part} has columns {extra} that {whole} lacks: add the newer tree's rows first")
    with open(whole, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, restval="", lineterminator="\n")
        if new:
            w.writeheader()
        w.writerows({**r, column: value} for r in rows)


def append_csv(part, whole):
    """Adds a CSV file's rows to another (all of it, header first, if that is not there yet)."""
    if not os.path.exists(part):
        return
    lines = read_lines(part)
    if os.path.exists(whole):
        lines = lines[1:]  # its header is there already
    with open(whole, "a") as f:
        f.writelines(line + "\n" for line in lines)


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(cmd, env=None, cwd=None, log=None, append=False, stdout=None):
    """A command as a shell line: its environment, the command, where its output goes."""
    line = shlex.join([f"{k}={v}" for k, v in (env or {}).items()] + cmd)
    if cwd:
        line = f"(cd {shlex.quote(cwd)} && {line})"
    if stdout:
        line += f" > {shlex.quote(stdout)}"
    if log:
        line += f" {'2>>' if stdout else '>>' if append else '>'} {shlex.quote(log)}"
        line += "" if stdout else " 2>&1"
    return line


# What the clock log samples, once a second: the fields every driver of this decade knows.
CLOCK_QUERY = "timestamp,clocks.sm,clocks.mem,temperature.gpu,power.draw"


def clock_summary(text):
    """The line summary.txt gets from logs/clocks.csv (nvidia-smi's CSV): the SM and memory
    clocks over the busiest half of the samples by power drawn (the idle ones between
    programs, at lower clocks, would hide a card slowed under load; all of them where the
    driver reports no power), the highest temperature. One line saying why when there are no
    samples."""
    def number(field):
        m = re.match(r"\s*([0-9.]+)", field)
        return float(m.group(1)) if m else None

    rows = []  # (sm, mem, temperature, power) in MHz, MHz, C, W; None where not reported
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) == 5:
            row = [number(f) for f in fields[1:]]
            if row[0] is not None and row[1] is not None:
                rows.append(row)
    if not rows:
        return ["clocks: no samples (logs/clocks.csv says what nvidia-smi printed)"]
    powered = all(r[3] is not None for r in rows)
    busy = sorted(rows, key=lambda r: r[3])[len(rows) // 2:] if powered else rows
    sm, mem = sorted(r[0] for r in busy), sorted(r[1] for r in busy)
    temperatures = [r[2] for r in rows if r[2] is not None]
    which = (f"the busiest {len(busy)} ({busy[0][3]:.0f}-{busy[-1][3]:.0f} W)" if powered
             else "all (no power reported)")
    return [f"clocks: {len(rows)} samples; {which}: SM {sm[0]:.0f}-{sm[-1]:.0f} MHz "
            f"(median {sm[len(sm) // 2]:.0f}), memory {mem[0]:.0f}-{mem[-1]:.0f} MHz"
            + (f"; at most {max(temperatures):.0f} C" if temperatures else "") + " (logs/clocks.csv)"]


class ClockLog:
    """nvidia-smi in the background for the whole run, sampling CLOCK_QUERY once a second into
    logs/clocks.csv (a line a GPU a sample: on a machine of several, the summary takes them
    together); stop() ends it and returns clock_summary's lines. Where nvidia-smi is missing
    there is no log, and stop() says so."""

    def __init__(self, run):
        self.path = run.path("logs", "clocks.csv")
        cmd = ["nvidia-smi", f"--query-gpu={CLOCK_QUERY}", "--format=csv", "-lms", "1000"]
        self.process = None
        if run.dry_run:
            print("  (in the background, the whole run) " + shown(cmd, log=self.path))
            return
        try:
            with open(self.path, "w") as log:
                self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        except FileNotFoundError:
            pass

    def stop(self):
        if self.process is None:
            return ["clocks: not logged (no nvidia-smi)"]
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return clock_summary("\n".join(read_lines(self.path)))


class Result:
    def __init__(self, rc, output=""):
        self.rc, self.output = rc, output


class Run:
    """One call of the runner: its options, its folders, the summary, and the commands it runs.

    In a dry run nothing is run and no file is written: each command is printed instead.
    """

    def __init__(self, args, argv):
        self.args, self.argv, self.dry_run = args, argv, args.dry_run
        self.out = os.path.realpath(args.out_dir)
        self.logs = os.path.join(self.out, "logs")
        self.build = os.path.realpath(args.build)
        self.summary = os.path.join(self.out, "summary.txt")
        self.failed = False         # whether the step now running has failed
        self.late = False           # whether the step now running met --deadline
        # --deadline: the time past which no command starts (a device call has a fixed length)
        self.deadline = time.time() + args.deadline if args.deadline else None
        self._torch = None
        if not self.dry_run:
            os.makedirs(self.logs, exist_ok=True)
            open(self.summary, "w").close()

    def path(self, *parts):
        """A path in OUT_DIR: run.path("tour.csv"), run.path("logs", "tour.log")."""
        return os.path.join(self.out, *parts)

    @property
    def lib(self):
        return os.path.join(self.build, "common", "libflashtut.so")

    # -- output: the summary and files -----------------------------------------------------

    def say(self, *lines):
        """Prints lines and adds them to summary.txt (a dry run prints only the commands)."""
        if self.dry_run:
            return
        for line in lines:
            print(line, flush=True)
        self.write(self.summary, "".join(line + "\n" for line in lines), append=True)

    def write(self, path, text, append=False):
        if not self.dry_run:
            with open(path, "a" if append else "w") as f:
                f.write(text)

    def remove(self, path):
        if not self.dry_run and os.path.exists(path):
            os.remove(path)

    # -- commands --------------------------------------------------------------------------

    def sh(self, cmd, log=None, append=False, stdout=None, env=None, cwd=None, timeout=None,
           ok=(0,), check=True, tree_env=True):
        """Runs a command (a list of arguments, no shell) and returns its exit status, with
        its output when no log is given.

        log: the file that gets its output (append: add to it); stdout: a file for its
        standard output alone (then the log gets its errors); env: variables to set;
        timeout: seconds, through timeout(1), which ends a program that hangs with status
        124; ok: the exit statuses that are no failure (check=False: none is); tree_env:
        give it PYTHONPATH (False: the caller's environment as it is).
        """
        cut_by_deadline = False  # whether --deadline, not the command's own limit, may end it
        if self.deadline is not None and not self.dry_run:
            # Past --deadline nothing starts; a command started before it gets what is left.
            left = self.deadline - time.time()
            if left <= 0:
                self.late = True
                self.write(self.path("logs", "gpu_run.log"),
                           f"not run (past --deadline): {shlex.join(map(str, cmd))}\n", append=True)
                return Result(124, "not run: past --deadline\n")
            left = math.ceil(left)
            cut_by_deadline = timeout is None or left <= timeout
            timeout = min(timeout or left, left)
        if timeout is not None:
            cmd = ["timeout", str(timeout)] + cmd
        cmd = [str(c) for c in cmd]
        line = shown(cmd, env, cwd, log, append, stdout)
        if self.dry_run:
            print("  " + line)
            return Result(0)
        child_env = dict(os.environ)
        if tree_env:
            child_env["PYTHONPATH"] = os.pathsep.join(
                p for p in (PYTHONPATH, os.environ.get("PYTHONPATH")) if p)
        child_env.update(env or {})
        start = time.time()
        files = []
        try:
            if log:
                files.append(open(log, "a" if append else "w"))
            if stdout:
                files.append(open(stdout, "w"))
            out = files[-1] if files else subprocess.PIPE
            err = files[0] if log and stdout else subprocess.STDOUT
            p = subprocess.run(cmd, stdout=out, stderr=err, cwd=cwd, env=child_env,
                               text=True, errors="replace")
            result = Result(p.returncode, p.stdout or "")
        except FileNotFoundError:  # the program is not there: the shell's message and status
            result = Result(127, f"{cmd[0]}: command not found\n")
            if files:
                files[0].write(result.output)
                result.output = ""
        finally:
            for f in files:
                f.close()
        if check and result.rc not in ok:
            self.failed = True
        if cut_by_deadline and result.rc == 124:
            self.late = True
        self.write(self.path("logs", "gpu_run.log"),
                   f"rc={result.rc} {time.time() - start:.0f} s: {line}\n", append=True)
        return result

    def output(self, cmd, stderr=True):
        """What an information command prints (tool versions, the GPU's name); never a failure."""
        if self.dry_run:
            print("  " + shlex.join(cmd))
            return ""
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, errors="replace",
                               stderr=subprocess.STDOUT if stderr else subprocess.DEVNULL)
            return p.stdout
        except FileNotFoundError:
            return f"{cmd[0]}: command not found\n" if stderr else ""

    def has_torch(self):
        """Whether the Python children can import PyTorch (a dry run assumes they can)."""
        if self._torch is None:
            self._torch = self.sh([PYTHON, "-c", "import torch"], check=False).rc == 0
        return self._torch

    def commit(self):
        if self.args.commit:
            return self.args.commit
        sha = self.output(["git", "-C", ROOT, "rev-parse", "HEAD"], stderr=False).strip()
        return sha if re.fullmatch(r"[0-9a-f]{40}", sha) else "unknown"


# ---- The build --------------------------------------------------------------------------

def build(run, need_programs):
    """Configures and builds BUILD_DIR with Ninja: --build-targets' targets when given and the
    steps run programs, else everything when they do and it holds no tour binary, else the
    library alone when that is missing. True if it built. A pack (scripts/pack_build.py's,
    BUILD_DIR/PACKED.txt) is never built, --build-targets or not: its gzipped files are
    unpacked, and only the steps whose programs it holds can pass (name them with --steps)."""
    if pack_build.is_pack(run.build):
        with open(os.path.join(run.build, pack_build.MARKER)) as f:
            said = [f"== prebuilt ({run.build}): " + "; ".join(f.read().splitlines())]
        if run.args.build_targets:
            said.append("--build-targets ignored: a pack is never built")
        if run.dry_run:
            print(*said, sep="\n")
            return True
        try:
            unpacked = pack_build.unpack(run.build)
        except (OSError, EOFError) as e:  # a pack cut short in transit, a read-only folder
            run.say(*said, f"BUILD FAILED: unpacking {run.build}: {e}")
            return False
        run.say(*said, *[f"unpacked {os.path.relpath(p, run.build)}" for p in unpacked])
        return True
    tour = os.path.join(run.build, "chapters", "tour", "tour")
    targets = run.args.build_targets
    if need_programs and targets:  # only these, whatever the folder holds (Ninja skips what is built)
        run.say(f"== build {' '.join(targets)} ({run.build})")
        target, failed = ["--target", *targets], "BUILD FAILED"
    elif need_programs and not executable(tour):
        run.say(f"== build ({run.build})")
        target, failed = ["--", "-k", "0"], "BUILD FAILED (the targets that did build still run)"
    elif not os.path.isfile(run.lib):
        run.say(f"== build the library ({run.build})")
        target, failed = ["--target", "flashtut"], "BUILD FAILED"
    else:
        return True
    if run.dry_run:
        print("== build: BUILD_DIR lacks what the steps need")
    log = cmake_build(run, ROOT, run.build, target)
    if log:
        run.say(failed, *grep("error|FAILED", log)[:30])
        return False
    return True


def cmake_build(run, source, folder, target, prefix=""):
    """Configures `folder` from `source` with Ninja (Release) and builds it (`target`: cmake
    --build's arguments after -j), logs/<prefix>configure.log and logs/<prefix>build.log;
    the log of the command that failed, or None."""
    for cmd, name in ((["cmake", "-S", source, "-B", folder, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"], "configure"),
                      (["cmake", "--build", folder, "-j", str(JOBS)] + target, "build")):
        log = run.path("logs", prefix + name + ".log")
        if run.sh(cmd, log=log).rc != 0:
            return log
    return None


# ---- The steps, in the order they run ---------------------------------------------------

def step_readme(run):
    """The README's two commands, as written, in a fresh copy of the tree (no build folder):
    what a reader gets. The wall time of each is the acceptance figure for the test command."""
    run.say("== README commands in a fresh copy")
    copy_tree(run, FRESH)
    gpu = run.output(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines()
    lines = [f"commit: {run.commit()}",
             f"date: {utc_now()}, {len(os.sched_getaffinity(0))} cores, {last(gpu[:1])}"]
    run.say(*lines)
    for preset in ("tour", "test"):
        log = run.path("logs", f"readme_{preset}.log")
        start = int(time.time())
        rc = run.sh(["cmake", "--workflow", "--preset", preset], log=log, cwd=FRESH,
                    tree_env=False).rc
        new = [f"cmake --workflow --preset {preset}: rc={rc}, wall {int(time.time()) - start} s",
               *grep("tests passed|tests failed|Total Test time", log)[-3:]]
        run.say(*new)
        lines += new
    run.write(run.path("readme_commands.txt"), "".join(line + "\n" for line in lines))
    # The fresh build serves the later steps too, when no other build folder exists.
    fresh_build = os.path.join(FRESH, "build")
    if (not executable(os.path.join(run.build, "chapters", "tour", "tour"))
            and executable(os.path.join(fresh_build, "chapters", "tour", "tour"))):
        run.build = fresh_build
        run.say(f"(later steps use the README's build: {run.build})")


def copy_tree(run, dest):
    """Copies the tree to dest without its build folders (build, build-*) and .git."""
    if run.dry_run:
        print(f"  (copy {ROOT} to {dest}, without build, build-* and .git)")
        return

    def left_out(folder, names):
        if folder != ROOT:
            return []
        return [n for n in names if n in ("build", ".git") or n.startswith("build-")]

    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT, dest, symlinks=True, ignore=left_out)


def step_env(run):
    """env.txt: the GPU, driver, CUDA and tool versions, the commit, the date, this command;
    then the register-only probes of the GPU's ceilings (tools/probes.cu), when built."""
    lines = [f"date: {utc_now()}", f"commit: {run.commit()}"]
    lines += run.output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                         "clocks.max.sm,clocks.max.mem", "--format=csv"]).splitlines()
    lines += run.output(["nvidia-smi"]).splitlines()[2:3]  # "NVIDIA-SMI ... CUDA Version"
    lines += run.output(["nvcc", "--version"]).splitlines()[-2:]
    lines.append("ncu: " + last(run.output(["ncu", "--version"], stderr=False).splitlines()))
    lines.append("compute-sanitizer: " + last(
        run.output(["compute-sanitizer", "--version"], stderr=False).splitlines()))
    lines += run.output([PYTHON, "-c", 'import torch; print("torch", torch.__version__, '
                         '"cudnn", torch.backends.cudnn.version())'], stderr=False).splitlines()
    lines.append("command: " + shlex.join(["scripts/gpu_run.py", "OUT_DIR"] + run.argv))
    env_txt = run.path("env.txt")
    run.write(env_txt, "".join(line + "\n" for line in lines))
    if not run.dry_run:
        print("\n".join(lines))
    probes = os.path.join(run.build, "tools", "ft_probes")
    if executable(probes):
        out = run.sh([probes, "--csv", run.path("logs", "probes.csv")]).output
        run.write(env_txt, out, append=True)
        run.say(*out.splitlines())


def step_tests(run):
    """Every GPU test binary of the build, one after another, each as TEST_SHARDS gtest
    shards at once (logs/<binary>.shard<i>.log), then the Python GPU tests."""
    run.say("== GPU tests")
    b = run.build
    binaries = (sorted(glob.glob(os.path.join(b, "chapters", "*", "test_*_gpu")))
                + sorted(glob.glob(os.path.join(b, "common", "test_*_gpu")))
                + [os.path.join(b, "common", "test_common")])
    for test in filter(executable, binaries):
        name = os.path.basename(test)
        logs = [run.path("logs", f"{name}.shard{i}.log") for i in range(TEST_SHARDS)]

        def shard(i, test=test, logs=logs):
            env = {"GTEST_TOTAL_SHARDS": str(TEST_SHARDS), "GTEST_SHARD_INDEX": str(i), "OMP_NUM_THREADS": str(JOBS),
                   "OMP_WAIT_POLICY": "PASSIVE", "FT_REFERENCE_CACHE": REFERENCE_CACHE}
            return run.sh([test, "--gtest_brief=1"], log=logs[i], env=env, timeout=TEST_TIMEOUT).rc

        if run.dry_run:  # the commands in order, not interleaved
            rcs = [shard(i) for i in range(TEST_SHARDS)]
        else:
            with concurrent.futures.ThreadPoolExecutor(TEST_SHARDS) as pool:
                rcs = list(pool.map(shard, range(TEST_SHARDS)))
        bad = [f"shard {i}: rc={rc}" for i, rc in enumerate(rcs) if rc != 0]
        lines = [line for log in logs for line in grep(r"^\[  (PASSED|FAILED|SKIPPED) ", log)]
        passed = sum(int(m.group(1)) for line in lines for m in [re.match(r"\[  PASSED  \] (\d+) test", line)] if m)
        failed = [line for line in lines if line.startswith("[  FAILED  ]")]
        run.say(f"{name}: {'ok' if not bad else 'FAILED(' + ', '.join(bad) + ')'} — {passed} passed in "
                f"{TEST_SHARDS} shards" + "".join("; " + line for line in failed))
        if bad:
            run.say(*[line for log in logs for line in grep("Failure|error|FAILED", log)][:20])
    step_autograd_gpu(run)


def step_autograd_gpu(run):
    """flashtut.autograd on the GPU, eagerly and from a CUDA graph; flashtut.ops: opcheck,
    float64 references, decode steps through chapter 11, torch.compile(fullgraph=True), CUDA
    graphs; the transformers backend: training steps and decode steps against "sdpa"."""
    for name, path, limit, shows, on_failure in PYTHON_GPU_TESTS:
        log = run.path("logs", f"{name}.log")
        rc = run.sh([PYTHON, os.path.join(ROOT, path), "-v"], log=log, timeout=limit,
                    env={"FLASHTUT_LIB": run.lib, "PYTHONDONTWRITEBYTECODE": "1"},
                    ok=(0, SKIPPED)).rc
        run.say(f"{name}: rc={rc} — " + " ".join(grep(shows, log)))
        if rc != 0:
            run.say(*grep(on_failure, log)[:30])


def step_ctest(run):
    """The test binaries through ctest, 16 at a time as the README's test preset runs them,
    the tests --ctest-regex names (e.g. "^ch08[.]": chapter 08's)."""
    regex = run.args.ctest_regex
    run.say(f"== ctest -R '{regex}'")
    if pack_build.is_pack(run.build):
        refusal = (f"{run.build} is a pack (scripts/pack_build.py): ctest needs the whole build "
                   "folder; the tests step runs the packed test binaries")
        if run.dry_run:
            print("ctest refused: " + refusal)
            return
        raise RuntimeError(refusal)
    log = run.path("logs", "ctest.log")
    start = int(time.time())
    rc = run.sh(["ctest", "--test-dir", run.build, "-j", str(JOBS), "--output-on-failure",
                 "--timeout", str(TEST_TIMEOUT), "-R", regex], log=log,
                env={"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}).rc
    run.say(f"ctest: rc={rc}, wall {int(time.time()) - start} s; "
            + "\n".join(grep("tests passed|tests failed", log)))
    run.say(*grep(r"^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess)", log)[:40])
    run.say(*grep("Failure|Expected|Which is|rel_l2|max_abs|error:", log)[:60])


def step_sanitizer(run):
    """compute-sanitizer's memcheck, racecheck and synccheck on each chapter program, on a
    small problem, causal and not, at each --sanitize-dims head dimension."""
    a = run.args
    run.say("== compute-sanitizer (small problems: B=1 H=2 N=200, chapter 11 B=2 H=8 on 2 N_q=4 N_k=700, "
            f"d in {{{' '.join(map(str, a.sanitize_dims))}}}, causal and not"
            + (f"; {a.sanitize_args}" if a.sanitize_args else "") + ")")
    timeout = a.sanitize_timeout or SANITIZE_TIMEOUT
    for chapter in a.sanitize_chapters:
        prog = program(run.build, chapter)
        if not executable(prog):
            continue
        variants = variants_for(chapter, a.sanitize_variant)
        for d in a.sanitize_dims:
            for tool in SANITIZE_TOOLS:
                for causal in (False, True):
                    log = run.path("logs", f"sanitizer_{chapter}_d{d}_{tool}"
                                   f"{'_causal' if causal else ''}{a.sanitize_tag}.log")
                    flags = ((DECODE_SANITIZE_SHAPE if chapter in DECODE_CHAPTERS else SANITIZE_SHAPE)
                             + ["--head-dim", str(d)]
                             + (["--causal"] if causal else [])
                             + ["--iters", "1", "--warmup", "0", "--no-baseline"]
                             + (["--variant", variants] if variants else []))
                    cmd = (["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", prog]
                           + with_flags(flags, shlex.split(a.sanitize_args)))
                    rc = run.sh(cmd, log=log, timeout=timeout).rc
                    run.say(f"{chapter} d={d} {tool} {causal_word(causal)}: rc={rc} "
                            + last(grep("ERROR SUMMARY|RACECHECK SUMMARY", log)))


def step_sanitizer_views(run):
    """The kernels that read views run only from the tests: chapters 07 and 08's GPU tests
    (--views-filter picks which) under memcheck and racecheck."""
    run.say("== compute-sanitizer on the views tests")
    tests = []
    for chapter in VIEWS_CHAPTERS:
        tests += sorted(glob.glob(os.path.join(run.build, "chapters", chapter, "test_*_gpu")))
    for test in filter(executable, tests):
        name = os.path.basename(test)
        for tool in ("memcheck", "racecheck"):
            log = run.path("logs", f"sanitizer_views_{name}_{tool}.log")
            rc = run.sh(["compute-sanitizer", "--tool", tool, "--error-exitcode", "9", test,
                         f"--gtest_filter={run.args.views_filter}", "--gtest_brief=1"],
                        log=log, timeout=run.args.sanitize_timeout or VIEWS_TIMEOUT).rc
            run.say(f"views {name} {tool}: rc={rc} "
                    f"{last(grep('ERROR SUMMARY|RACECHECK SUMMARY', log))} "
                    + " ".join(grep(r"^\[  (PASSED|FAILED) ", log)))


def step_tour(run):
    """The tour (every chapter on one problem) at each --sizes x --dims x --causal shape."""
    a = run.args
    run.say(f"== tour ({TOKENS} tokens: B = {TOKENS}/N, H = {HIDDEN}/d)")
    tour_csv = run.path("tour.csv")
    run.remove(tour_csv)
    for d in a.dims:
        for causal in a.causal:
            for n in a.sizes:
                name = f"tour_d{d}_n{n}{'_causal' if causal else ''}"
                part = run.path("logs", name + ".csv")
                rc = run.sh([os.path.join(run.build, "chapters", "tour", "tour"),
                             *shape(n, d, causal), "--iters", "10", "--warmup", "1",
                             "--csv", part], log=run.path("logs", name + ".log"),
                            timeout=PROGRAM_TIMEOUT).rc
                run.say(f"tour d={d} N={n} {causal_word(causal)}: rc={rc}")
                if not run.dry_run:
                    append_csv(part, tour_csv)
    tables = sorted(glob.glob(run.path("logs", "tour_d64_n*.log")))
    run.say(*grep_after("^ch  variant", tables, 12))


def step_chapters(run):
    """Chapter 02's and 03's README problems (their variants' staircase), then chapters 04
    and 05 at --chapter-sizes x --dims x --causal."""
    run.say("== chapter programs (their own variants and benchmarks)")
    run.remove(run.path("chapters.csv"))

    def chapter_run(chapter, log_name, flags):
        prog = program(run.build, chapter)
        log = run.path("logs", log_name + ".log")
        rc = run.sh([prog, *flags, "--no-baseline", "--iters", "10",
                     "--csv", run.path("chapters.csv")], log=log, timeout=PROGRAM_TIMEOUT).rc
        run.say(f"{os.path.basename(prog)} {' '.join(flags)}: rc={rc}")
        run.say(*grep("^(02|03|04|05) ", log))

    chapter_run("02_tiled", "ch02_n4096",
                ["--seq-len", "4096", "--batch", "4", "--heads", "32", "--head-dim", "64"])
    chapter_run("03_online_softmax", "ch03_n16384",
                ["--seq-len", "16384", "--batch", "1", "--heads", "32"])
    for d in run.args.dims:
        for causal in run.args.causal:
            for n in run.args.chapter_sizes:
                tag = f"d{d}_n{n}{'--causal' if causal else ''}"  # the old logs' names
                chapter_run("04_fused_forward", "ch04_" + tag, shape(n, d, causal))
                chapter_run("05_backward", "ch05_" + tag, shape(n, d, causal))


def step_tc(run):
    """The tensor-core chapters' programs on every variant (or --tc-variant's): the
    staircase and the tile-shape sweep."""
    a = run.args
    run.say(f"== tensor-core chapters: every variant ({' '.join(a.tc_dtypes)}; --tc-dtypes "
            f"to change), {TOKENS} tokens")
    tc_csv = run.path("tc.csv")
    run.remove(tc_csv)
    for chapter in a.tc_chapters:
        prog = program(run.build, chapter)
        if not executable(prog):
            continue
        for dtype in a.tc_dtypes:
            for d in a.dims:
                for causal in a.causal:
                    for n in a.tc_sizes:
                        log = run.path("logs", f"tc_{chapter}_{dtype}_d{d}_n{n}"
                                       f"{'_causal' if causal else ''}.log")
                        rc = run.sh([prog, "--dtype", dtype, *shape(n, d, causal),
                                     "--no-baseline", "--iters", "10", "--warmup", "2",
                                     "--csv", tc_csv,
                                     "--variant", variants_for(chapter, a.tc_variant) or "all"],
                                    log=log, timeout=PROGRAM_TIMEOUT).rc
                        run.say(f"{os.path.basename(prog)} {dtype} d={d} N={n} "
                                f"{causal_word(causal)}: rc={rc}")
                        run.say(*grep("^0[6-9] ", log))


def shapes_flags(a):
    """The tour's shapes as the Python scripts take them: --sizes, --dims, --causal."""
    return (["--sizes", *map(str, a.sizes), "--dims", *map(str, a.dims),
             "--causal", *(str(int(c)) for c in a.causal)])


def step_anchors(run):
    """PyTorch's attention backends and a three-kernel version on the tour's shapes, after
    the GPU's ceilings (scripts/pytorch_anchors.py); ceilings.csv from the ceiling lines."""
    run.say("== PyTorch anchors (same run)")
    if not run.has_torch():
        run.say("anchors: python3 cannot import torch, skipped")
        return
    log = run.path("logs", "anchors.log")
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "pytorch_anchors.py"), run.out,
                 *shapes_flags(run.args)], log=log, env={"PYTHONUNBUFFERED": "1"}).rc
    run.say(f"anchors: rc={rc} {count_lines(run.path('anchors.csv'))} lines, "
            f"{len(grep(' skipped: ', log))} cases skipped")
    out = run.sh([PYTHON, os.path.join(ROOT, "plots", "ceilings_from_anchors.py"), log,
                  run.path("ceilings.csv")]).output
    run.say(*out.splitlines())
    run.say(*grep(r"ceiling|mem_efficient +torch.float32", log))


def step_vs_pytorch(run):
    """Ours through python/flashtut beside PyTorch's backends on the tour's shapes, forward
    and backward, checked against float64 (scripts/compare_pytorch.py; rc=1 when one of
    ours fails that check)."""
    run.say("== ours vs PyTorch (same run)")
    if not run.has_torch():
        run.say("vs_pytorch: python3 cannot import torch, skipped")
        return
    log = run.path("logs", "vs_pytorch.log")
    a = run.args
    shapes = ["--shapes", *a.vs_shapes] if a.vs_shapes else shapes_flags(a)
    impls = ["--impls", *a.vs_impls] if a.vs_impls else []
    order = ["--order", a.vs_order] if a.vs_order != "registry" else []
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "compare_pytorch.py"), "--out", run.out,
                 "--lib", run.lib, *shapes, *impls, *order,
                 "--dtypes", ",".join(a.vs_dtypes), "--backward"],
                log=log, env={"PYTHONUNBUFFERED": "1"}).rc
    run.say(f"vs_pytorch: rc={rc} {count_lines(run.path('vs_pytorch.csv'))} lines, "
            f"{len(grep(' skipped: ', log))} cases skipped")
    lines = read_lines(log)
    table = next((i for i, line in enumerate(lines) if line.startswith("impl  ")), len(lines))
    run.say(*lines[table:])


def step_hf(run):
    """Hugging Face models' training-step time with the tutorial's attention and PyTorch's
    FlashAttention-2 and cuDNN (scripts/hf_step_time.py; skipped without transformers)."""
    run.say("== Hugging Face models, training-step time (same process)")
    if not run.has_torch():
        run.say("hf: python3 cannot import torch, skipped")
        return
    log = run.path("logs", "hf_step_time.log")
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "hf_step_time.py"), "--out", run.out],
                log=log, env={"PYTHONUNBUFFERED": "1", "FLASHTUT_LIB": run.lib},
                timeout=PROGRAM_TIMEOUT).rc
    run.say(f"hf: rc={rc}", *read_lines(log)[-14:])


def step_train(run):
    """A small GPT (scripts/train_gpt.py) trained with PyTorch's FlashAttention-2 and with the
    tutorial's attention, --train-repeats rounds of every (seed, attention); the tutorial's
    first run checks its kernels against FlashAttention-2 first, its later runs skip that;
    round 0's seed-0 runs also profile --train-profile eager steps."""
    a = run.args
    run.say(f"== training ({a.train_steps} steps each)")
    if not run.has_torch():
        run.say("training: python3 cannot import torch, skipped")
        return
    checked = False  # the tutorial's first run checks its kernels; later runs pass --no-check

    def train_one(attention, seed, repeat, csv, flags):
        nonlocal checked
        if attention == "flashtut":
            flags = flags + (["--no-check"] if checked else [])
            checked = True
        log = run.path("logs", os.path.basename(csv)[:-len(".csv")] + ".log")
        rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "train_gpt.py"),
                     "--attention", attention, "--seed", str(seed), "--repeat", str(repeat),
                     "--steps", str(a.train_steps), "--lib", run.lib, "--out", csv, *flags],
                    log=log, env={"PYTHONUNBUFFERED": "1"}, timeout=PROGRAM_TIMEOUT).rc
        run.say(f"train {attention} seed {seed} repeat {repeat} {' '.join(flags)}: rc={rc} "
                + " ".join(grep("^train_gpt: (summary|profile|error|check:   )", log)))
        return csv

    graph = ["--graph"] if a.train_graph else []
    parts = []
    for repeat in range(a.train_repeats):  # rounds: a drift of the host's speed hits both
        for seed in a.train_seeds:
            for attention in a.train_attentions:
                profile = a.train_profile if repeat == 0 and seed == 0 else 0
                parts.append(train_one(attention, seed, repeat,
                                       run.path("logs", f"train_{attention}_s{seed}_r{repeat}.csv"),
                                       graph + ["--profile", str(profile)]))
    if not run.dry_run:
        join_csvs(run.path("training.csv"), parts)
    out = run.sh([PYTHON, os.path.join(ROOT, "plots", "plot_training.py"),
                  run.path("training.csv"), "--out", run.path("training.png")]).output
    run.write(run.path("training_verdict.txt"), out)
    run.say(*out.splitlines())
    if a.train_eager:  # an eager pair, for the host-bound step time: training_eager.csv
        eager = [train_one(attention, 0, 0, run.path("logs", f"train_eager_{attention}_s0.csv"),
                           ["--profile", "0"]) for attention in a.train_attentions]
        if not run.dry_run:
            join_csvs(run.path("training_eager.csv"), eager)


def step_precision(run):
    """scripts/precision_vs_pytorch.py: chapter 06's grid variants, chapter 07 and PyTorch's
    three bf16 kernels and FlashAttention-2 on logits of order 1 and 100, against float64."""
    run.say("== precision on large logits (chapter 06's second lesson)")
    if not run.has_torch():
        run.say("precision: python3 cannot import torch, skipped")
        return
    log = run.path("logs", "precision_vs_pytorch.log")
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "precision_vs_pytorch.py"), "--out", run.out,
                 "--lib", run.lib], log=log, env={"PYTHONUNBUFFERED": "1"}, timeout=PROGRAM_TIMEOUT).rc
    run.say(f"precision_vs_pytorch: rc={rc}", *grep("^d=", log))


# Chapter 11's benchmark grid (its issue's): d = 128, bf16, 32 query heads; the batch, the
# cached keys, the key/value heads and the query rows of a decode step.
DECODE_BATCHES, DECODE_LENGTHS, DECODE_KV_HEADS, DECODE_QUERY_ROWS = (1, 16, 128), (1024, 8192, 32768, 131072), (32, 8, 1), (1, 4)
# The split counts forced (FT_CH11_SPLITS) on a few shapes, (B, H_kv, N_k), one query row, to
# put choose_splits' choice beside every other.
DECODE_SPLITS, DECODE_SPLIT_SHAPES = (1, 2, 4, 8, 16, 32, 64, 128), ((1, 8, 32768), (1, 8, 131072), (16, 8, 8192), (1, 1, 131072))
# The shapes --decode-ab compares settings on (B, key/value heads, cached keys; one query row
# unless --decode-ab-query-rows says otherwise): where the grid missed the read's 85% (B = 1
# with grouped heads, 32 heads on one), two short caches, where the launches and the merge are
# most of the time, one that met it, as a control, and 32 heads on one at B = 1, 16 and 128
# from 1k keys up, where it trails cuDNN.
# The --decode-ab setting that runs the program with --graph (each timed run a CUDA graph's
# replay) instead of under an environment variable.
GRAPH_SETTING = "graph"
DECODE_AB_SHAPES = ((1, 8, 32768), (1, 8, 131072), (1, 1, 32768), (16, 1, 32768), (128, 1, 32768), (16, 8, 32768),
                    (1, 1, 1024), (1, 8, 8192), (1, 1, 8192), (1, 1, 131072), (16, 1, 1024), (16, 1, 8192),
                    (128, 1, 1024), (128, 1, 8192))


def step_decode(run):
    """Chapter 11's program on the decode grid: every variant, the streaming read of the same
    bytes and the paged cache (its extra rows), no float64 check (the tests check); a shape
    too large for the GPU is refused by the program (exit 2) and skipped."""
    run.say("== decoding (chapter 11): d = 128, bf16, 32 query heads, bottom-right causal")
    out = run.path("decode.csv")
    run.remove(out)
    prog = program(run.build, "11_decoding")
    for rows in DECODE_QUERY_ROWS if run.args.decode_grid else ():
        for kv in DECODE_KV_HEADS:
            for b in DECODE_BATCHES:
                for n in DECODE_LENGTHS:
                    name = f"decode_b{b}_kv{kv}_q{rows}_n{n}"
                    rc = run.sh([prog, "--batch", str(b), "--heads", "32", "--heads-kv", str(kv),
                                 "--seq-len", str(rows), "--len-kv", str(n), "--head-dim", "128",
                                 "--dtype", "bf16", "--causal", "--causal-align", "bottom-right",
                                 "--no-verify", "--iters", "10", "--warmup", "2", "--csv", out],
                                log=run.path("logs", name + ".log"), timeout=PROGRAM_TIMEOUT, ok=(0, 2)).rc
                    run.say(f"{name}: rc={rc}" + (" (too large for this GPU: skipped)" if rc == 2 else ""))
    # The sweep of split counts: batched_v alone, each count's rows tagged with it.
    sweep = run.path("decode_splits.csv")
    run.remove(sweep)
    for shape in DECODE_SPLIT_SHAPES if run.args.decode_splits else ():
        for splits in ["auto"] + run.args.decode_splits:
            decode_on_shape(run, prog, shape, "batched_v", f"splits_{splits}", 10, 2,
                            {} if splits == "auto" else {"FT_CH11_SPLITS": str(splits)}, sweep, "splits", str(splits))
        run.say(f"split sweep b={shape[0]} kv={shape[1]} n={shape[2]}: decode_splits.csv")
    # --decode-ab: --decode-ab-variant (tensor_cores unless told) on a few shapes at
    # --decode-ab-query-rows query rows, as built and under each NAME=VALUE setting (chapter
    # 11's FT_CH11_* switches) or with --graph, each row tagged with it; the program adds its
    # streaming read (and the paged cache) to every run.
    ab = run.path("decode_ab.csv")
    run.remove(ab)
    for setting in ["built"] + run.args.decode_ab if run.args.decode_ab else ():
        graph = setting == GRAPH_SETTING
        env = {} if setting == "built" or graph else dict([setting.split("=", 1)])
        for shape in DECODE_AB_SHAPES:
            decode_on_shape(run, prog, shape, run.args.decode_ab_variant, "ab_" + setting.replace("=", "_"),
                            20, 3, env, ab, "setting", setting, query_rows=run.args.decode_ab_query_rows,
                            flags=["--graph"] if graph else [])
        run.say(f"decode A/B {setting}: decode_ab.csv")


def decode_on_shape(run, prog, shape, variants, tag, iters, warmup, env, whole, column, value, query_rows=1,
                    flags=()):
    """Chapter 11's program on `variants` at `query_rows` query rows (one unless told) of a
    shape (B, key/value heads, cached keys) under the environment `env`, with `flags` added,
    no float64 check; its rows added to `whole` with one more column, `column` = `value`."""
    b, kv, n = shape
    name = f"decode{query_rows}_b{b}_kv{kv}_n{n}_{tag}"
    part = run.path("logs", name + ".csv")
    run.remove(part)
    rc = run.sh([prog, "--batch", str(b), "--heads", "32", "--heads-kv", str(kv), "--seq-len", str(query_rows),
                 "--len-kv", str(n), "--head-dim", "128", "--dtype", "bf16", "--causal",
                 "--causal-align", "bottom-right", "--variant", variants, "--no-verify",
                 "--iters", str(iters), "--warmup", str(warmup), *flags, "--csv", part],
                log=run.path("logs", name + ".log"), timeout=PROGRAM_TIMEOUT, env=env).rc
    if rc == 0 and not run.dry_run:
        tag_csv(part, whole, column, value)


def step_decode_vs_pytorch(run):
    """Chapter 11's fastest beside PyTorch's four SDPA backends on the decode grid, through
    python/flashtut (scripts/decode_vs_pytorch.py), with FlashInfer's decode and prefill where
    python3 can import flashinfer (its wheel carried), and with --decode-graph the step in CUDA
    graphs too: decode_vs_pytorch.csv (and decode_graphs.csv)."""
    run.say("== chapter 11 beside PyTorch's backends (and FlashInfer), same run")
    if not run.has_torch():
        run.say("decode_vs_pytorch: python3 cannot import torch, skipped")
        return
    flashinfer = run.sh([PYTHON, "-c", "import flashinfer"], check=False, timeout=60).rc == 0
    graph = run.args.decode_graph
    log = run.path("logs", "decode_vs_pytorch.log")
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "decode_vs_pytorch.py"), "--out", run.out, "--lib", run.lib,
                 *(["--flashinfer"] if flashinfer else []), *(["--graph"] if graph else [])],
                log=log, env={"PYTHONUNBUFFERED": "1"}, timeout=PROGRAM_TIMEOUT * (6 if graph else 3)).rc
    run.say(f"decode_vs_pytorch: rc={rc} {count_lines(run.path('decode_vs_pytorch.csv'))} lines"
            + ("" if flashinfer else " (flashinfer not importable: PyTorch alone)")
            + (f", decode_graphs.csv {count_lines(run.path('decode_graphs.csv'))} lines" if graph else ""))


def step_ab(run):
    """A chapter's program from this tree beside the same program built from --ab-tree (another
    copy of the project, e.g. `git archive main | tar -x -C base`), run in turn on each
    --ab-args in one call, so that a change common to every variant is measured against the
    code before it: ab.csv, the program's rows with a `tree` column (this or base)."""
    a = run.args
    run.say(f"== A/B of {a.ab_chapter} against {a.ab_tree or '(no --ab-tree)'}")
    if not a.ab_tree or not a.ab_args:
        run.say("ab: needs --ab-tree and --ab-args, skipped")
        return
    base_build = os.path.join(os.path.abspath(a.ab_tree), "build")
    target = os.path.basename(program(run.build, a.ab_chapter))
    log = cmake_build(run, os.path.abspath(a.ab_tree), base_build, ["--target", target], prefix="ab_")
    if log:
        run.say("ab: the base tree did not build", *grep("error|FAILED", log)[:20])
        return
    out = run.path("ab.csv")
    run.remove(out)
    for i, args in enumerate(a.ab_args):
        for tree, build in (("this", run.build), ("base", base_build)):
            part = run.path("logs", f"ab_{i}_{tree}.csv")
            run.remove(part)
            rc = run.sh([program(build, a.ab_chapter), *shlex.split(args), "--csv", part],
                        log=run.path("logs", f"ab_{i}_{tree}.log"), timeout=PROGRAM_TIMEOUT).rc
            if rc == 0 and not run.dry_run:
                tag_csv(part, out, "tree", tree)
            run.say(f"ab {tree} {args}: rc={rc}")


def step_generate(run):
    """The small GPT trained once more (train_gpt.py --save, FlashAttention-2, seed 0), then
    scripts/generate.py with SDPA (PyTorch's choice, and its FlashAttention-2 backend alone)
    and with the tutorial's kernels (chapter 11's decode), each checked against the uncached
    generation: generate.txt."""
    run.say("== generation with a KV cache (chapter 11)")
    if not run.has_torch():
        run.say("generate: python3 cannot import torch, skipped")
        return
    ckpt = run.path("logs", "gpt.pt")
    env = {"PYTHONUNBUFFERED": "1", "FLASHTUT_LIB": run.lib}
    rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "train_gpt.py"), "--graph", "--steps", "300",
                 "--save", ckpt], log=run.path("logs", "generate_train.log"), env=env, timeout=PROGRAM_TIMEOUT).rc
    run.say(f"train_gpt --save: rc={rc}")
    lines = []
    # SDPA as PyTorch chooses, SDPA on its FlashAttention-2 backend alone, the tutorial's.
    for name, args in (("sdpa", ["--attention", "sdpa"]),
                       ("sdpa_flash", ["--attention", "sdpa", "--sdpa-backend", "flash"]),
                       ("flashtut", ["--attention", "flashtut"])):
        log = run.path("logs", f"generate_{name}.log")
        rc = run.sh([PYTHON, os.path.join(ROOT, "scripts", "generate.py"), "--checkpoint", ckpt, *args,
                     "--tokens", "200", "--check", "--lib", run.lib],
                    log=log, env=env, timeout=PROGRAM_TIMEOUT).rc
        lines += [f"{name}: rc={rc}", *grep("^generate: summary", log)]
        if rc != 0:
            lines += read_lines(log)[-15:]
    run.write(run.path("generate.txt"), "\n".join(lines) + "\n")
    run.say(*lines)


def step_ring(run):
    """Ring attention (flashtut.ring) on one GPU over simulated ranks (python/tests/
    test_ring_gpu.py), then through torchrun and NCCL over every GPU here at --ring-shapes
    (scripts/ring_attention.py: checked against one device, timed, TFLOP/s a GPU, efficiency),
    each run's rank-0 timeline drawn from its profiler trace (plots/plot_ring_timeline.py)."""
    run.say("== ring attention")
    if not run.has_torch():
        run.say("ring: python3 cannot import torch, skipped")
        return
    env = {"FLASHTUT_LIB": run.lib, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
           "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    log = run.path("logs", "python_ring_gpu.log")
    rc = run.sh([PYTHON, os.path.join(ROOT, "python", "tests", "test_ring_gpu.py"), "-v"], log=log,
                timeout=PROGRAM_TIMEOUT, env=env, ok=(0, SKIPPED)).rc
    run.say(f"python_ring_gpu: rc={rc} — " + " ".join(grep(r"^(Ran|OK|FAILED|test_ring_gpu: skipped)", log)))
    if rc != 0:
        run.say(*grep(r"Error|FAIL|differs", log)[:30])
    gpus = run.output([PYTHON, "-c", "import torch; print(torch.cuda.device_count())"], stderr=False).strip()
    table = run.path("ring.csv")
    if not run.dry_run and os.path.exists(table):
        os.remove(table)
    counted = int(gpus) if gpus.isdigit() and int(gpus) > 0 else 1
    # --ring-ranks: the rank counts asked for, those this machine has (default: 1 and all).
    every = sorted({r for r in run.args.ring_ranks if r <= counted} if run.args.ring_ranks else {1, counted})
    for seq_len, causal in run.args.ring_shapes:
        for ranks in every:
            name = f"ring_P{ranks}_N{seq_len}_c{causal}"
            log, traces = run.path("logs", name + ".log"), run.path("logs", name + "_traces")
            rc = run.sh([PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
                         os.path.join(ROOT, "scripts", "ring_attention.py"), "--seq-len", str(seq_len),
                         "--head-dim", "128", "--heads", str(run.args.ring_heads), *(["--causal"] if causal else []),
                         "--csv", table, "--trace", traces, *shlex.split(run.args.ring_args)],
                        log=log, timeout=PROGRAM_TIMEOUT, env=env).rc
            run.say(f"ring P={ranks} N={seq_len} causal={causal}: rc={rc}",
                    *grep(r"^(ring attention|  forward|  backward|rank .* differs)", log))
            # Rank 0's timeline: whether the transfers ran under the blocks' kernels.
            plot_log = run.path("logs", name + "_timeline.log")
            run.sh([PYTHON, os.path.join(ROOT, "plots", "plot_ring_timeline.py"),
                    os.path.join(traces, "ring_trace_rank0.json"), "--out", run.path(name + "_timeline.png"),
                    "--title", f"Ring attention, rank 0 of {ranks}: N = {seq_len}, {'causal' if causal else 'non-causal'}"],
                   log=plot_log, check=False)
            run.say(*grep(r"^(stream|transfers|exposed)", plot_log))


def step_traffic(run):
    """Nsight Compute's DRAM and L2 bytes per kernel beside the traffic model's
    (scripts/measure_traffic.sh, which reads FT_TRAFFIC_* from the environment)."""
    run.say("== Nsight Compute traffic")
    script = os.path.join(ROOT, "scripts", "measure_traffic.sh")
    if not executable(script):
        run.say("traffic: scripts/measure_traffic.sh missing, skipped")
        return
    # The raw Nsight Compute files stay in the logs (the device tool returns 8 files).
    folder, log = run.path("logs", "traffic"), run.path("logs", "traffic.log")
    rc = run.sh([script, folder, run.build], log=log).rc
    run.say(f"traffic: rc={rc}")
    if os.path.exists(os.path.join(folder, "traffic.csv")) and not run.dry_run:
        shutil.copy(os.path.join(folder, "traffic.csv"), run.path("traffic.csv"))
    run.say(*read_lines(log)[-40:])


def profiled_command(run, spec):
    """A "chapter:variant:kernel:d" spec's fields and the command Nsight Compute profiles, at
    N = 4096, B = 4: the chapter's program, or for "torch:BACKEND:kernel:d" PyTorch's
    backend (scripts/sdpa_once.py, bf16)."""
    chapter, variant, kernel, d = spec.split(":", 3)
    heads = str(HIDDEN // int(d))
    if chapter == "torch":
        cmd = [PYTHON, os.path.join(ROOT, "scripts", "sdpa_once.py"), "--backend", variant,
               "--batch", str(PROFILE_B), "--heads", heads, "--seq-len", str(PROFILE_N),
               "--head-dim", d, "--iters", "2"]
    else:
        folder = os.path.basename(glob.glob(os.path.join(ROOT, "chapters", chapter + "_*"))[0])
        cmd = [program(run.build, folder), "--seq-len", str(PROFILE_N), "--batch",
               str(PROFILE_B), "--heads", heads, "--head-dim", d, "--variant", variant,
               "--iters", "1", "--warmup", "0", "--no-verify", "--no-baseline"]
    return chapter, variant, kernel, d, cmd


def stalls(path):
    """The warp-stall metrics of an ncu report, largest first, as "    value name" lines."""
    rows = []
    for line in grep("smsp__average_warps_issue_stalled_", path):
        fields = line.split()
        try:
            value = float(fields[-1].replace(",", ""))
        except ValueError:
            value = 0.0
        rows.append((value, fields[-1], fields[0]))
    return [f"    {text} {name}" for _, text, name in sorted(rows, reverse=True)]


def step_profiles(run):
    """Nsight Compute sections of the --profiles kernels, with each warp-stall reason's
    cycles per issued instruction; then the --source-pages kernels' per-instruction stall
    samples and their phase tables (scripts/stall_phases.py). Into logs/profiles/."""
    a = run.args
    run.say("== Nsight Compute profiles")
    folder = run.path("logs", "profiles")
    if not run.dry_run:
        os.makedirs(folder, exist_ok=True)
    sections = [arg for s in NCU_SECTIONS for arg in ("--section", s)]
    for spec in a.profiles:
        # The second launch of the kernel: the first is the program's verifying call.
        chapter, variant, kernel, d, cmd = profiled_command(run, spec)
        out = os.path.join(folder, f"profile_{chapter}_{variant}_d{d}.txt")
        rc = run.sh(["ncu", "--clock-control", "none", *sections, "--metrics", STALL_METRICS,
                     "-k", f"regex:{kernel}", "--launch-skip", "1", "--launch-count", "1", *cmd],
                    log=out, timeout=PROGRAM_TIMEOUT).rc
        run.say(f"profile {chapter} {variant} d={d}: rc={rc} {first(grep(' Duration ', out))}")
        # The stall reasons, largest first: cycles a warp waits per instruction it issues.
        run.say(*stalls(out)[:8])
    sections = [arg for s in SOURCE_SECTIONS for arg in ("--section", s)]
    for spec in a.source_pages:
        chapter, variant, kernel, d, cmd = profiled_command(run, spec)
        rep = os.path.join(folder, f"source_{chapter}_{variant}_d{d}")
        rc = run.sh(["ncu", "--clock-control", "none", *sections, "-k", f"regex:{kernel}",
                     "--launch-skip", "1", "--launch-count", "1", "-o", rep, *cmd],
                    log=rep + ".log", timeout=PROGRAM_TIMEOUT).rc
        # The source page, exported as CSV and gzipped; the report itself is large, and goes.
        export = run.sh(["ncu", "-i", rep + ".ncu-rep", "--page", "source", "--csv",
                         "--print-source", "sass"], stdout=rep + ".csv", log=rep + ".log").rc
        run.sh(["gzip", "-f", rep + ".csv"])
        run.say(f"source page {chapter} {variant} d={d}: profile rc={rc}, export rc={export}")
        run.remove(rep + ".ncu-rep")
        names = ["--names", a.phase_names] if a.phase_names else []
        out = run.sh([PYTHON, os.path.join(ROOT, "scripts", "stall_phases.py"), rep + ".csv.gz",
                      *names]).output
        run.say(*out.splitlines())


# name -> (function, what it does and the files it writes). Its order is the order they run.
STEPS = {
    "readme": (step_readme, "the README's two workflow presets in a fresh copy of the tree "
               "(/tmp/ft_fresh), timed: readme_commands.txt"),
    "env": (step_env, "GPU, driver, CUDA, tool versions, commit, date, this command, the "
            "register-only probes: env.txt"),
    "tests": (step_tests, "every GPU test binary, then the Python GPU tests (autograd_gpu): "
              "summary lines, logs/test_*.log"),
    "autograd_gpu": (step_autograd_gpu, "python/tests' flashtut.autograd and flashtut.ops on "
                     "the GPU: summary lines, logs/python_*_gpu.log"),
    "ctest": (step_ctest, "the tests through ctest, 16 at a time, --ctest-regex's (not run by "
              "default): logs/ctest.log"),
    "sanitizer": (step_sanitizer, "compute-sanitizer memcheck/racecheck/synccheck on each "
                  "--sanitize-chapters program: logs/sanitizer_*.log"),
    "sanitizer_views": (step_sanitizer_views, "compute-sanitizer on chapters 07-08's views "
                        "tests (--views-filter): logs/sanitizer_views_*.log"),
    "tour": (step_tour, "the tour at --sizes x --dims x --causal (16384 tokens): tour.csv"),
    "chapters": (step_chapters, "chapters 02-05's programs, their own variants and "
                 "benchmarks: chapters.csv"),
    "tc": (step_tc, "the tensor-core chapters' programs on every variant (--tc-*): tc.csv"),
    "anchors": (step_anchors, "PyTorch's attention backends on the tour's shapes (needs "
                "torch): anchors.csv, ceilings.csv"),
    "vs_pytorch": (step_vs_pytorch, "ours through python/flashtut beside PyTorch's backends "
                   "(needs torch): vs_pytorch.csv"),
    "hf": (step_hf, "Hugging Face models' training-step time, ours beside PyTorch's "
           "FlashAttention-2 and cuDNN (needs torch, transformers): hf_step_time.csv"),
    "train": (step_train, "a small GPT trained with FlashAttention-2 and with ours (needs "
              "torch): training.csv, training.png, training_verdict.txt"),
    "precision": (step_precision, "chapter 06's lesson on bf16 scores: O and lse errors on logits of "
                  "order 1 and 100, ours beside PyTorch's (needs torch): precision_vs_pytorch.csv"),
    "decode": (step_decode, "chapter 11 on the decode grid (batch x cached keys x key/value heads "
               "x query rows), with the streaming read and the paged cache: decode.csv"),
    "decode_vs_pytorch": (step_decode_vs_pytorch, "chapter 11's fastest beside PyTorch's SDPA backends and, "
                          "where it imports, FlashInfer, on the decode grid (--decode-graph: in CUDA graphs "
                          "too; needs torch): decode_vs_pytorch.csv"),
    "ab": (step_ab, "a chapter's program from this tree and from --ab-tree (built there) on each "
           "--ab-args in turn: ab.csv (not run by default)"),
    "generate": (step_generate, "the small GPT saved, then generated from with a KV cache through "
                 "SDPA and through chapter 11, each checked against uncached tokens: generate.txt"),
    "ring": (step_ring, "ring attention on simulated ranks (one GPU), then through torchrun "
             "over every GPU here at --ring-shapes: ring.csv, ring_*_timeline.png, logs/ring_*"),
    "traffic": (step_traffic, "Nsight Compute's bytes per kernel beside the traffic model "
                "(scripts/measure_traffic.sh): traffic.csv"),
    "profiles": (step_profiles, "Nsight Compute sections (--profiles) and stall samples "
                 "(--source-pages): logs/profiles/"),
}
DEFAULT_STEPS = [name for name in STEPS if name not in ("ctest", "ab")]
# The steps that run the build's programs and tests (the others need the library at most).
PROGRAM_STEPS = {"tests", "ctest", "sanitizer", "sanitizer_views", "tour", "chapters", "tc", "ab",
                 "traffic", "profiles", "decode"}


def run_step(run, name):
    """Runs one step; True if it failed. An exception fails the step, not the run."""
    function, description = STEPS[name]
    if run.dry_run:
        print(f"== {name}: {description}")
    run.failed = run.late = False
    try:
        function(run)
    except Exception as e:
        run.failed = True
        if run.dry_run:
            raise
        run.write(run.path("logs", "gpu_run.log"), traceback.format_exc(), append=True)
        traceback.print_exc()
        run.say(f"{name}: the step stopped: {type(e).__name__}: {e}")
    if run.late:
        run.say(f"{name}: not finished by --deadline ({run.args.deadline} s after the start)")
    return run.failed or run.late


# ---- The command line -------------------------------------------------------------------

# The environment variables of scripts/gpu_run.sh, which these options replace.
WAS = {"--commit": "FT_COMMIT", "--sizes": "FT_SIZES", "--dims": "FT_DIMS",
       "--causal": "FT_CAUSAL", "--ctest-regex": "FT_CTEST_REGEX",
       "--sanitize-chapters": "FT_SANITIZE", "--sanitize-dims": "FT_SANITIZE_DIMS",
       "--sanitize-args": "FT_SANITIZE_ARGS", "--sanitize-variant": "FT_SANITIZE_VARIANT",
       "--sanitize-tag": "FT_SANITIZE_TAG", "--sanitize-timeout": "FT_SANITIZE_TIMEOUT",
       "--views-filter": "FT_VIEWS_FILTER", "--chapter-sizes": "FT_CHAPTER_SIZES",
       "--tc-chapters": "FT_TC_CHAPTERS", "--tc-variant": "FT_TC_VARIANT",
       "--tc-dtypes": "FT_TC_DTYPES", "--tc-sizes": "FT_TC_SIZES", "--vs-dtypes": "FT_VS_DTYPES",
       "--train-steps": "FT_TRAIN_STEPS", "--train-repeats": "FT_TRAIN_REPEATS",
       "--train-seeds": "FT_TRAIN_SEEDS", "--train-graph": "FT_TRAIN_GRAPH",
       "--train-profile": "FT_TRAIN_PROFILE", "--train-eager": "FT_TRAIN_EAGER",
       "--profiles": "FT_PROFILES", "--source-pages": "FT_SOURCE_PAGES",
       "--phase-names": "FT_PHASE_NAMES"}


def single(check):
    """An argparse type from a check (which raises ValueError with a message for a bad value)."""
    def parse(word):
        try:
            return check(word)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def items(check):
    """An argparse type for one word of a list option: its comma-separated items, each
    passed through check."""
    return single(lambda word: [check(item) for item in word.split(",") if item])


class Flatten(argparse.Action):
    """A list option's words, each a list of items, as one list."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [item for word in values for item in word])


def number(text, low=0):
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < low:
        raise ValueError(f"{value} is less than {low}")
    return value


def positive(text):
    return number(text, 1)


def vs_shape(text):
    """B,H,N,d,C or B,H,N,d,C,Hkv: the word, checked."""
    parts = text.split(",")
    if len(parts) not in (5, 6):
        raise ValueError(f"{text!r} is not B,H,N,d,C[,Hkv]")
    for p in parts:
        number(p)
    return text


def ring_shape(text):
    """'131072,1' -> (131072, 1): the ring step's whole sequence and its mask."""
    parts = text.split(",")
    if len(parts) != 2 or not parts[0].isdigit() or parts[1] not in ("0", "1") or int(parts[0]) < 1:
        raise ValueError(f"{text!r}: expected N,C with N >= 1 and C 0 or 1")
    return int(parts[0]), int(parts[1])


def divisor_of(whole, what):
    def check(text):
        value = number(text, 1)
        if whole % value:
            raise ValueError(f"{value} does not divide {whole} ({what})")
        return value
    return check


def env_setting(text):
    """'FT_CH11_EARLY_MERGE=0': an environment variable's name and its value, checked; or
    GRAPH_SETTING, the program's --graph."""
    if text == GRAPH_SETTING:
        return text
    name, eq, _ = text.partition("=")
    if not eq or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
        raise ValueError(f"{text!r} is not NAME=VALUE (e.g. FT_CH11_EARLY_MERGE=0) or {GRAPH_SETTING}")
    return text


def one_of(choices, what):
    def check(text):
        if text not in choices:
            raise ValueError(f"{what} {text!r} is none of: {', '.join(choices)}")
        return text
    return check


def causal_flag(text):
    if text not in ("0", "1"):
        raise ValueError(f"causal {text!r} is neither 0 nor 1")
    return text == "1"


def chapter_variant(text):
    """'08:warp_tiles': a chapter of the tree and a variant name (which only the chapter's
    program knows: it refuses a wrong one itself)."""
    number_, _, variant = text.partition(":")
    if not re.fullmatch(r"\d\d", number_) or not variant.strip():
        raise ValueError(f"{text!r} is not CHAPTER:VARIANT (e.g. 08:warp_tiles)")
    numbers = sorted({c[:2] for c in chapter_folders()})
    if number_ not in numbers:  # no program would ever run its variants: silently ignored
        raise ValueError(f"{text!r}: no chapter {number_} with a program (those with one: "
                         f"{' '.join(numbers)})")
    return text


def commit_hash(text):
    """--commit: the hash env.txt and the readme step record, 7 to 40 hex digits, with a tag
    for a tree that is not the commit's after a - or + (env.txt has "-dirty", "+warp_tiles")."""
    match = re.fullmatch(r"([0-9a-fA-F]{7,40})([-+][\w.+-]+)?", text)
    if not match:
        raise ValueError(f"{text!r} is not a commit hash (7 to 40 hex digits, as git rev-parse "
                         f"--short HEAD prints, optionally tagged: abc1234-dirty, abc1234+patch)")
    return match.group(1).lower() + (match.group(2) or "")


def profile_spec(text):
    fields = text.split(":", 3)
    chapters = {c[:2] for c in ALL_CHAPTERS}
    if len(fields) != 4 or not all(fields):
        raise ValueError(f"{text!r} is not chapter:variant:kernel:d")
    if fields[0] != "torch" and fields[0] not in chapters:
        raise ValueError(f"{text!r}: the chapter is 'torch' or one of {', '.join(sorted(chapters))}")
    divisor_of(HIDDEN, "H = 2048/d")(fields[3])
    return text


def step_table(indent=""):
    """The steps, one per line (wrapped at 100 columns): name, what it does and writes."""
    return "\n".join(textwrap.fill(description, 100, initial_indent=f"{indent}{name:<16} ",
                                   subsequent_indent=indent + " " * 17)
                     for name, (_, description) in STEPS.items())


def parse_args(argv):
    steps = step_table("  ")
    ap = argparse.ArgumentParser(
        prog="scripts/gpu_run.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Runs everything this project measures on a GPU, step by step, into "
                    "OUT_DIR: summary.txt, the CSVs, logs.tar.gz.",
        epilog=f"steps (default: all but ctest), in the order they run:\n{steps}\n\n"
               "Lists take spaces or commas: --sizes 1024 4096 or --sizes 1024,4096; put "
               "OUT_DIR first.\nExit status: 0, or 1 if a step failed (summary.txt names it), "
               "2 for a bad command line.")
    ap.add_argument("out_dir", nargs="?", metavar="OUT_DIR", help="where the results go")

    def option(flag, text, **kw):
        """An option; its help names the variable of scripts/gpu_run.sh it replaces."""
        if flag in WAS:
            text += f" (was {WAS[flag]})"
        if kw.get("nargs") in ("+", "*"):
            kw["action"] = Flatten
        ap.add_argument(flag, help=text, **kw)

    ap.add_argument("--build-targets", nargs="+", default=[], metavar="TARGET",
                    help="build only these targets (e.g. flashtut ch11_decoding test_ch11_decoding_gpu): "
                         "the whole tree takes about 150 s on the H200 machine's 16 cores "
                         "(default: everything)")
    option("--build", "the build folder (default: build); configured and built with Ninja "
           "when the steps need programs and it holds no tour binary", default="build",
           metavar="BUILD_DIR")
    option("--steps", "the steps to run (default: all but ctest)", nargs="+",
           type=items(one_of(list(STEPS), "step")), default=DEFAULT_STEPS, metavar="STEP")
    option("--dry-run", "print the commands the steps would run, run nothing, write nothing",
           action="store_true")
    option("--list", "print the steps and what each writes, and exit", action="store_true")
    option("--deadline", "seconds after the start past which no command starts; one running "
           "then is given what is left (timeout(1)), the steps it cuts short fail, and "
           "summary.txt and logs.tar.gz are still written: set it below the device call's "
           "limit (default: none)", type=single(positive), metavar="SECONDS")
    option("--commit", "the commit env.txt names (default: git rev-parse HEAD, for a tree "
           "without .git)", type=single(commit_hash))
    option("--sizes", "sequence lengths N of the tour, the anchors and vs_pytorch (default: "
           "1024 4096 16384)", nargs="+", type=items(divisor_of(TOKENS, "B = 16384/N")),
           default=[1024, 4096, 16384], metavar="N")
    option("--dims", "head dimensions d of the tour, chapters, tc, anchors, vs_pytorch "
           "(default: 64 128)", nargs="+", type=items(divisor_of(HIDDEN, "H = 2048/d")),
           default=[64, 128], metavar="D")
    option("--causal", "0 (no mask), 1 (causal), or both (default: 0 1)", nargs="+",
           type=items(causal_flag), default=[False, True], metavar="C")
    option("--ctest-regex", "the tests the ctest step runs, e.g. '^ch08[.]' (default: .)",
           default=".", metavar="REGEX")
    option("--sanitize-chapters", "the chapters compute-sanitizer checks (default: all: "
           f"{' '.join(ALL_CHAPTERS)})", nargs="+",
           type=items(one_of(ALL_CHAPTERS + DECODE_CHAPTERS, "chapter")), default=ALL_CHAPTERS, metavar="CHAPTER")
    option("--sanitize-dims", "the head dimensions it runs them at (default: 64; '64 128' "
           "also covers the d = 128 kernels)", nargs="+", type=items(positive),
           default=[64], metavar="D")
    option("--sanitize-args", "more flags for those runs, one string: "
           "--sanitize-args='--variant fastest' (default: none)", default="", metavar="ARGS")
    option("--sanitize-variant", "the variants each chapter runs under the sanitizer, as "
           "--tc-variant (default: the program's default)", nargs="+",
           type=items(chapter_variant), default=[], metavar="NN:VARIANT")
    option("--sanitize-tag", "added to the sanitizer's log names, to tell runs apart "
           "(default: none)", default="", metavar="TAG")
    option("--sanitize-timeout", "seconds for each sanitizer run (default: 120 for a "
           "chapter program, 300 for a views test)", type=single(positive),
           metavar="SECONDS")
    option("--views-filter", f"the views tests' --gtest_filter (default: {VIEWS_FILTER})",
           default=VIEWS_FILTER, metavar="FILTER")
    option("--chapter-sizes", "sequence lengths of chapters 04 and 05 in the chapters step "
           "(default: 4096)", nargs="+", type=items(divisor_of(TOKENS, "B = 16384/N")),
           default=[4096], metavar="N")
    option("--tc-chapters", f"the chapters the tc step runs (default: {' '.join(TC_CHAPTERS)})",
           nargs="+", type=items(one_of(ALL_CHAPTERS, "chapter")), default=TC_CHAPTERS,
           metavar="CHAPTER")
    option("--tc-variant", "run these variants instead of all, e.g. '06:grid_half 07:fastest'; "
           "a chapter named twice runs both in one run (default: all)", nargs="+",
           type=items(chapter_variant), default=[], metavar="NN:VARIANT")
    option("--tc-dtypes", "element types of the tc step (default: bf16)", nargs="+",
           type=items(one_of(DTYPES, "dtype")), default=["bf16"], metavar="DTYPE")
    option("--tc-sizes", "sequence lengths of the tc step (default: 4096 16384)", nargs="+",
           type=items(divisor_of(TOKENS, "B = 16384/N")), default=[4096, 16384], metavar="N")
    option("--vs-dtypes", "element types of vs_pytorch (default: bf16 fp16 float32)",
           nargs="+", type=items(one_of(DTYPES, "dtype")), default=["bf16", "fp16", "float32"],
           metavar="DTYPE")
    option("--vs-shapes", "vs_pytorch at these shapes instead of --sizes x --dims x --causal: "
           "B,H,N,d,C[,Hkv] (compare_pytorch.py --shapes)", nargs="+",
           type=single(lambda word: [vs_shape(word)]), default=[], metavar="SHAPE")
    option("--vs-impls", "only these in vs_pytorch (compare_pytorch.py --impls; default: its "
           "own)", nargs="+", type=items(str), default=[], metavar="NAME")
    option("--vs-order", "the order ours run in within a shape in vs_pytorch "
           "(compare_pytorch.py --order: registry, impls or reverse; default: registry)",
           choices=("registry", "impls", "reverse"), default="registry")
    option("--ring-shapes", "the ring step's whole sequences as N,C (C: 1 causal, 0 not; "
           "d = 128, bf16; default: 131072,1 131072,0)", nargs="+",
           type=single(lambda word: [ring_shape(word)]), default=[(131072, 1), (131072, 0)],
           metavar="N,C")
    option("--ring-heads", "query heads (= key/value heads) of the ring step (default: 8)",
           type=single(positive), default=8, metavar="H")
    option("--ring-ranks", "the ring step's rank counts, those this machine has (default: 1 "
           "and every GPU)", nargs="+", type=items(positive), default=[], metavar="P")
    option("--ring-args", "more flags for ring_attention.py, one string: "
           "--ring-args='--iters 3 --warmup 1' (default: none)", default="", metavar="ARGS")
    option("--train-steps", "training steps per run (default: 300)", type=single(positive),
           default=300, metavar="STEPS")
    option("--train-repeats", "rounds of runs, each one run of every (seed, attention) "
           "(default: 3)", type=single(number), default=3, metavar="K")
    option("--train-seeds", "the training seeds (default: 0 1)", nargs="+", type=items(number),
           default=[0, 1], metavar="SEED")
    option("--train-attentions", "the attentions each (seed, round) trains with (default: "
           f"{' '.join(ATTENTIONS)})", nargs="+",
           type=items(one_of(list(ATTENTIONS), "attention")), default=list(ATTENTIONS),
           metavar="ATTENTION")
    option("--train-graph", "replay each training step as a CUDA graph (default: yes; "
           "--no-train-graph: eagerly)", action=argparse.BooleanOptionalAction, default=True)
    option("--train-profile", "eager steps round 0's seed-0 runs profile (default: 5)",
           type=single(number), default=5, metavar="STEPS")
    option("--train-eager", "add an eager pair (seed 0, no graph): training_eager.csv",
           action="store_true")
    ap.add_argument("--ab-tree", metavar="DIR",
                    help="the ab step's other copy of the project, built in DIR/build (default: none)")
    ap.add_argument("--ab-chapter", default="10_hopper_backward", metavar="CHAPTER",
                    type=one_of(ALL_CHAPTERS + DECODE_CHAPTERS, "chapter"),
                    help="the ab step's chapter folder (default: 10_hopper_backward)")
    ap.add_argument("--ab-args", nargs="+", default=[], metavar="ARGS",
                    help="the ab step's runs: each one string of the program's flags, e.g. "
                         "'--variant specialized --seq-len 4096 --batch 4 --heads 32 --head-dim 64'")
    ap.add_argument("--decode-grid", action=argparse.BooleanOptionalAction, default=True,
                    help="the decode step runs the whole grid (default: yes; --no-decode-grid: only its "
                         "sweep and --decode-ab)")
    ap.add_argument("--decode-ab", nargs="+", default=[], metavar="NAME=VALUE",
                    type=items(env_setting), action=Flatten,
                    help="the decode step also runs --decode-ab-variant (tensor_cores unless told) and the "
                         "streaming read on a few shapes as built and under each environment setting (e.g. "
                         f"FT_CH11_PDL=0) or, for {GRAPH_SETTING}, with the program's --graph (each timed run a "
                         "CUDA graph's replay): decode_ab.csv, its rows tagged (default: none)")
    ap.add_argument("--decode-ab-variant", default="tensor_cores", metavar="VARIANT",
                    help="the variant(s) --decode-ab runs, as the program's --variant takes them "
                         "(e.g. wgmma or fastest for step 6's switches; default: tensor_cores)")
    ap.add_argument("--decode-ab-query-rows", type=int, default=1, choices=range(1, 17), metavar="N_q",
                    help="the query rows a sequence of --decode-ab's shapes, 1 to 16 (default: 1)")
    ap.add_argument("--decode-graph", action="store_true",
                    help="the decode_vs_pytorch step also replays each step in CUDA graphs and times "
                         "Python loops (decode_graphs.csv; default: no)")
    ap.add_argument("--decode-splits", nargs="*", type=int, default=list(DECODE_SPLITS), metavar="S",
                    help="the split counts the decode step's sweep forces on its few shapes; "
                         "--decode-splits with nothing after it: no sweep (default: "
                         f"{' '.join(map(str, DECODE_SPLITS))})")
    option("--profiles", "the kernels the profiles step profiles, as chapter:variant:kernel:d "
           "(N = 4096, B = 4), or torch:BACKEND:kernel:d for PyTorch's (scripts/sdpa_once.py); "
           "--profiles with nothing after it: none (default: "
           f"{' '.join(DEFAULT_PROFILES)})", nargs="*", type=items(profile_spec),
           default=DEFAULT_PROFILES, metavar="SPEC")
    option("--source-pages", "kernels (same specs) whose per-instruction stall samples and "
           "phase table the profiles step adds (default: none)", nargs="+",
           type=items(profile_spec), default=[], metavar="SPEC")
    option("--phase-names", "the phases' names for scripts/stall_phases.py, e.g. "
           "S,dP,dV,dQ,dK (default: g0, g1, ...)", default="", metavar="NAMES")
    args = ap.parse_args(argv)
    if args.list:
        return args
    if args.out_dir is None:
        ap.error("OUT_DIR is missing (the folder the results go to)")
    if not args.decode_ab and (args.decode_ab_variant != "tensor_cores" or args.decode_ab_query_rows != 1):
        ap.error("--decode-ab-variant and --decode-ab-query-rows shape --decode-ab's runs: "
                 "add --decode-ab NAME=VALUE ...")
    return args


def warn_old_variables():
    """scripts/gpu_run.sh read FT_* variables; a caller who still sets one is told its option."""
    for flag, variable in WAS.items():
        if variable in os.environ:
            print(f"gpu_run.py: {variable} is set but no longer read: use {flag}", file=sys.stderr)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.list:
        print(step_table())
        return 0
    warn_old_variables()
    # env.txt's "command:" line names the output folder OUT_DIR, as the READMEs do.
    shown_argv = list(argv)
    shown_argv.remove(args.out_dir)
    run = Run(args, shown_argv)
    steps = [name for name in STEPS if name in args.steps]
    if "tests" in steps and "autograd_gpu" in steps:
        steps.remove("autograd_gpu")  # the tests step runs the Python GPU tests too
    if run.dry_run:
        print(f"Every command gets PYTHONPATH={PYTHONPATH} (the README's commands excepted).")
    clocks = ClockLog(run)
    failed = []
    if "readme" in steps and run_step(run, "readme"):
        failed.append("readme")
    if not build(run, need_programs=bool(PROGRAM_STEPS & set(steps))):
        failed.append("build")
    for name in steps:
        if name != "readme" and run_step(run, name):
            failed.append(name)
    if run.dry_run:
        return 0
    run.say(*clocks.stop())
    if failed:
        run.say("== failed steps: " + ", ".join(failed))
    # One archive of the logs: the device tool returns at most 8 files.
    with tarfile.open(run.path("logs.tar.gz"), "w:gz") as tar:
        tar.add(run.logs, arcname="logs")
    shutil.rmtree(run.logs)
    run.say("== done")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
