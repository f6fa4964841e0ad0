#!/usr/bin/env python3
"""Builds some of the tree's targets for Hopper alone (sm_90a) on a machine without a GPU,
and packs what they produce into a folder that scripts/gpu_run.py takes as its build folder
on a GPU machine, so that the GPU machine runs them without compiling first.

  python3 scripts/pack_build.py DIR TARGET [TARGET ...]
  e.g. python3 scripts/pack_build.py build_pack flashtut ch10_hopper_backward test_ch10_hopper_backward_gpu
  then, on the GPU machine:  python3 scripts/gpu_run.py OUT --build build_pack --steps tests vs_pytorch

Why: the library holds every chapter's kernels; compiled for one architecture it still
takes minutes on 16 cores, which is worth saving where GPU time is the scarce resource.
nvcc's output here runs there when the GPU machine's driver supports this toolkit (CUDA 13.0
needs driver 580 or later; `nvidia-smi` there says).

  - The build happens in build90a/ (configured with -DCMAKE_CUDA_ARCHITECTURES=90a the
    first time, kept between calls so that Ninja rebuilds only what changed).
  - DIR keeps the build folder's layout: a chapter's program finds the library through its
    RUNPATH, $ORIGIN/../../common. Files over 8 MB (the library) are gzipped; gpu_run.py
    unpacks them. DIR is replaced whole, and only when it is new, empty or an earlier pack
    (it holds PACKED.txt): a build folder or any other is refused.
  - DIR/PACKED.txt names the targets, the commit (and whether the tree had uncommitted
    changes) and the date; gpu_run.py, finding it, never builds in DIR, and its ctest step
    refuses (ctest needs the whole build folder).
  - ctest is not packed: a pack runs test binaries directly (gpu_run.py's tests step).
"""
import argparse
import datetime
import gzip
import os
import shutil
import stat
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build90a")
MARKER = "PACKED.txt"  # gpu_run.py looks for this name
GZIP_OVER = 8 << 20    # bytes: the library (about 49 MB at sm_90a) travels as about 16 MB
LIBRARY = ("flashtut", os.path.join("common", "libflashtut.so"))


def outputs(build, target):
    """The file `target` produces in `build`, relative to it: the library for `flashtut`,
    else the one executable of that name outside CMakeFiles. Raises LookupError naming
    the target when there is none, or more than one."""
    if target == LIBRARY[0]:
        found = [LIBRARY[1]] if os.path.isfile(os.path.join(build, LIBRARY[1])) else []
    else:
        found = []
        for folder, dirs, files in os.walk(build):
            dirs[:] = [d for d in dirs if d != "CMakeFiles"]
            path = os.path.join(folder, target)
            if target in files and os.access(path, os.X_OK):
                found.append(os.path.relpath(path, build))
    if len(found) != 1:
        raise LookupError(f"target {target!r}: {len(found)} files of that name in {build} "
                          "(a target of this tree, built? e.g. test_ch10_hopper_backward_gpu)")
    return found[0]


def pack(build, targets, dest, stamp, gzip_over=GZIP_OVER):
    """Copies each target's file from `build` into `dest` at the same relative path,
    gzipping those over `gzip_over` bytes, and writes dest/PACKED.txt (`stamp`: its lines
    after the targets). Returns [(relative path as packed, bytes)]."""
    files = [outputs(build, t) for t in targets]
    refuse_to_replace(dest)
    # Written beside DIR and renamed into place, so that a pack cut short is never taken
    # for a build folder (one without PACKED.txt, which gpu_run.py would build in).
    work = dest.rstrip(os.sep) + ".partial"
    shutil.rmtree(work, ignore_errors=True)
    packed = []
    for rel in files:
        src, dst = os.path.join(build, rel), os.path.join(work, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.getsize(src) > gzip_over:
            with open(src, "rb") as f, gzip.open(dst + ".gz", "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
            rel += ".gz"
        else:
            shutil.copy2(src, dst)
        packed.append((rel, os.path.getsize(os.path.join(work, rel))))
    with open(os.path.join(work, MARKER), "w") as f:
        f.write("targets: " + " ".join(targets) + "\n" + "".join(line + "\n" for line in stamp))
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(work, dest)
    return packed


def is_pack(folder):
    """Whether `folder` is a pack: it holds PACKED.txt."""
    return os.path.isfile(os.path.join(folder, MARKER))


def refuse_to_replace(dest):
    """Raises ValueError unless `dest` may be replaced whole: new, empty, or an earlier pack
    (it holds PACKED.txt), and neither the tree, a folder above it, nor build90a/."""
    real, root = os.path.realpath(dest), os.path.realpath(ROOT)
    if real in (root, os.path.realpath(BUILD)) or root.startswith(real.rstrip(os.sep) + os.sep):
        raise ValueError(f"{dest}: the tree, a folder above it or build90a/; name a folder of its own")
    if os.path.isdir(dest) and os.listdir(dest) and not is_pack(dest):
        raise ValueError(f"{dest} holds files and is not a pack (no {MARKER}); name a new folder")


def unpack(folder):
    """gpu_run.py's side: gunzips every *.gz under `folder` in place, once, and makes what it
    unpacks executable (the packs gzip only the library). Returns the paths unpacked."""
    done = []
    for parent, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".gz"):
                src = os.path.join(parent, name)
                dst = src[:-3]
                with gzip.open(src, "rb") as g, open(dst, "wb") as f:
                    shutil.copyfileobj(g, f)
                os.chmod(dst, os.stat(dst).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                os.remove(src)
                done.append(dst)
    return done


def stamp_lines():
    """The commit, whether the tree differs from it, the date and the architecture."""
    git = lambda *a: subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
    dirty = " with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else ""
    return [f"commit: {git('rev-parse', 'HEAD') or 'unknown'}{dirty}",
            f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
            "architectures: 90a (built in build90a/)"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Copy DIR to the GPU machine with the tree.")
    ap.add_argument("dir", metavar="DIR", help="the pack, e.g. build_pack (ignored by git as /build*/)")
    ap.add_argument("targets", nargs="+", metavar="TARGET", help="CMake targets, e.g. flashtut ch10_hopper_backward")
    args = ap.parse_args(argv)
    try:
        refuse_to_replace(args.dir)
    except ValueError as e:
        ap.error(str(e))
    configure = ["cmake", "-S", ROOT, "-B", BUILD, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                 "-DCMAKE_CUDA_ARCHITECTURES=90a"]
    for cmd in (configure, ["cmake", "--build", BUILD, "--target", *args.targets]):
        if subprocess.run(cmd).returncode != 0:
            print(f"pack_build: failed: {' '.join(cmd)}", file=sys.stderr)
            return 1
    try:
        packed = pack(BUILD, args.targets, args.dir, stamp_lines())
    except (LookupError, ValueError) as e:
        print(f"pack_build: {e}", file=sys.stderr)
        return 1
    for rel, size in packed:
        print(f"{size / 1e6:8.1f} MB  {os.path.join(args.dir, rel)}")
    print(f"{sum(s for _, s in packed) / 1e6:8.1f} MB in all; on the GPU machine: "
          f"python3 scripts/gpu_run.py OUT --build {args.dir} --steps ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
