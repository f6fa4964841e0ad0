#!/bin/sh
# The chapters' kernels are compiled through this (CUDA_COMPILER_LAUNCHER, cmake/flashtut.cmake)
# with -Xptxas=-v: it runs the compile it is given and keeps ptxas's report of every kernel
# (registers, stack frame, spill stores and loads, per architecture) beside the object, as
# <object>.ptxas.txt, which scripts/check_spills.py holds the READMEs' claims against. Every
# other line the compiler writes to stderr (warnings, errors) passes through unchanged.
obj=
prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && obj=$a
  prev=$a
done
[ -n "$obj" ] || exec "$@"
"$@" 2>"$obj.ptxas.tmp"
rc=$?
grep -v -e '^ptxas info' -e '^ *[0-9]* bytes stack frame' "$obj.ptxas.tmp" >&2
mv -f "$obj.ptxas.tmp" "$obj.ptxas.txt"
exit $rc
