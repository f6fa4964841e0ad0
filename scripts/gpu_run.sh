#!/usr/bin/env bash
# Everything this project measures on a GPU, in one call: environment, every GPU test,
# compute-sanitizer on every chapter, the tour at the FlashAttention papers' sizes, the
# chapter programs' own benchmarks, PyTorch's attention backends for comparison, and
# Nsight Compute's DRAM bytes per kernel and its profile sections of the main kernels.
#
#   scripts/gpu_run.sh OUT_DIR [BUILD_DIR] [STAGES]
#
# STAGES: comma-separated subset of env,tests,ctest,readme,sanitizer,sanitizer_views,tour,chapters,tc,anchors,
# autograd_gpu,vs_pytorch,train,traffic,profiles (default: all but ctest, which repeats `tests` through ctest,
# in parallel and filtered by FT_CTEST_REGEX). `readme` runs the README's two commands (the workflow
# presets) in a fresh copy of the tree and records their wall time in readme_commands.txt;
# `tc` runs the tensor-core chapters' programs on every variant (the staircase and the
# tile-shape sweep: tc.csv). BUILD_DIR defaults to build/ and is configured and built with
# Ninja if it holds no tour binary. The PyTorch anchors (scripts/pytorch_anchors.py) need
# PyTorch with CUDA; without it that stage says so and is skipped. FT_COMMIT names the
# commit in env.txt when the tree carries no .git. Results land in OUT_DIR: env.txt,
# tour.csv, chapters.csv, anchors.csv, ceilings.csv, traffic.csv, summary.txt, logs.tar.gz
# (at most 8 files, as the device tool returns).
# `vs_pytorch` times our kernels through python/flashtut beside PyTorch's backends on the same
# shapes, checked against a float64 reference (scripts/compare_pytorch.py; FT_VS_DTYPES,
# default "bf16,fp16,float32"): vs_pytorch.csv. It needs PyTorch with CUDA, like the anchors.
# FT_SIZES, FT_DIMS, FT_CAUSAL narrow the tour and chapter runs (defaults: "1024 4096 16384",
# "64 128", "0 1"); FT_SANITIZE lists the chapters compute-sanitizer checks (default all),
# FT_SANITIZE_DIMS the head dimensions it runs them at (default 64; "64 128" also covers the
# kernels' d = 128 instantiations, chapter 05's one-block-per-SM shape among them);
# FT_SANITIZE_ARGS adds flags to those runs (e.g. "--variant fastest"), FT_SANITIZE_VARIANT
# picks variants per chapter as FT_TC_VARIANT does (e.g. "06:warp_rows 08:warp_tiles"), FT_SANITIZE_TAG
# names their logs apart, FT_SANITIZE_TIMEOUT bounds each run (default 120 s). FT_TC_CHAPTERS narrows the tc stage (e.g. "08_tensor_core_backward").
# FT_SOURCE_PAGES adds to the profiles stage the per-instruction stall samples of the kernels
# it names (FT_PROFILES' "chapter:variant:kernel:d" specs) and their phase tables
# (scripts/stall_phases.py, phases named by FT_PHASE_NAMES, e.g. "S,dP,dV,dQ,dK"); with
# FT_PROFILES=" " (a space: empty means the defaults) the stage runs only those.
set -uo pipefail
OUT=$(realpath -m "${1:?usage: gpu_run.sh OUT_DIR [BUILD_DIR] [STAGES]}")
BUILD=$(realpath -m "${2:-build}")
STAGES=${3:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOGS="$OUT/logs"
mkdir -p "$OUT" "$LOGS"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
want() { [[ ("$STAGES" == all && "$1" != ctest) || ",$STAGES," == *",$1,"* ]]; }
say() { echo "$*" | tee -a "$SUMMARY"; }
prog() { echo "$BUILD/chapters/$1/$(ls "$BUILD/chapters/$1" | grep -E '^ch[0-9]{2}_[a-z_]+$' | head -1)"; }
CHAPTERS=(01_naive 02_tiled 03_online_softmax 04_fused_forward 05_backward)
TC_CHAPTERS=()  # the tensor-core chapters present in this tree (06, 07, ...)
for d in "$ROOT"/chapters/0[6-9]_*; do [ -f "$d/CMakeLists.txt" ] && TC_CHAPTERS+=("$(basename "$d")"); done
CHAPTERS+=("${TC_CHAPTERS[@]}")
SIZES=${FT_SIZES:-1024 4096 16384}
DIMS=${FT_DIMS:-64 128}
CAUSAL=${FT_CAUSAL:-0 1}
SANITIZE=${FT_SANITIZE:-${CHAPTERS[*]}}
SANITIZE_DIMS=${FT_SANITIZE_DIMS:-64}
flag() { [ "$1" = 1 ] && echo "--causal"; }

if want readme; then
  # The README's two commands, as written, in a fresh copy of the tree (no build folder):
  # what a reader gets. The wall time of each is the acceptance figure for the test command.
  say "== README commands in a fresh copy"
  FRESH=/tmp/ft_fresh
  rm -rf "$FRESH" && mkdir -p "$FRESH"
  (cd "$ROOT" && tar --exclude=./build --exclude='./build-*' --exclude=./.git -cf - .) | (cd "$FRESH" && tar -xf -)
  {
    echo "commit: ${FT_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    for preset in tour test; do
      start=$(date +%s)
      (cd "$FRESH" && cmake --workflow --preset "$preset") >"$LOGS/readme_$preset.log" 2>&1
      rc=$?
      echo "cmake --workflow --preset $preset: rc=$rc, wall $(( $(date +%s) - start )) s"
      grep -E "tests passed|tests failed|Total Test time" "$LOGS/readme_$preset.log" | tail -3
    done
  } | tee "$OUT/readme_commands.txt" | tee -a "$SUMMARY"
  # The fresh build serves the later stages too, when no other build folder exists.
  if [ ! -x "$BUILD/chapters/tour/tour" ] && [ -x "$FRESH/build/chapters/tour/tour" ]; then
    BUILD="$FRESH/build"
    say "(later stages use the README's build: $BUILD)"
  fi
fi

# The stages that run the programs and tests need the whole build. autograd_gpu, vs_pytorch
# and train need only the library, anchors nothing of ours, and env only what is there (it
# runs tools/ft_probes when that was built).
needs_programs() {
  local st
  for st in tests ctest sanitizer sanitizer_views tour chapters tc traffic profiles; do
    want "$st" && return 0
  done
  return 1
}
if needs_programs && [ ! -x "$BUILD/chapters/tour/tour" ]; then
  say "== build ($BUILD)"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$LOGS/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j 16 -- -k 0 >"$LOGS/build.log" 2>&1 || { say "BUILD FAILED (the targets that did build still run)"; grep -E "error|FAILED" "$LOGS/build.log" | head -30 | tee -a "$SUMMARY"; }
elif [ ! -f "$BUILD/common/libflashtut.so" ]; then
  say "== build the library ($BUILD)"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$LOGS/configure.log" 2>&1 &&
    cmake --build "$BUILD" -j 16 --target flashtut >"$LOGS/build.log" 2>&1 || { say "BUILD FAILED"; grep -E "error|FAILED" "$LOGS/build.log" | head -30 | tee -a "$SUMMARY"; }
fi

if want env; then
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: ${FT_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    nvidia-smi | sed -n 3p
    nvcc --version | tail -n 2
    echo "ncu: $(ncu --version 2>/dev/null | tail -n 1)"
    echo "compute-sanitizer: $(compute-sanitizer --version 2>/dev/null | tail -n 1)"
    python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>/dev/null
    echo "command: scripts/gpu_run.sh OUT_DIR ${2:-build} $STAGES"
  } >"$OUT/env.txt" 2>&1
  cat "$OUT/env.txt"
  # The ceilings of the tensor-core chapters, from register-only probes (tools/probes.cu).
  if [ -x "$BUILD/tools/ft_probes" ]; then
    "$BUILD/tools/ft_probes" --csv "$LOGS/probes.csv" 2>&1 | tee -a "$OUT/env.txt" | tee -a "$SUMMARY"
  fi
fi

if want tests; then
  say "== GPU tests"
  for t in "$BUILD"/chapters/*/test_*_gpu "$BUILD"/common/test_*_gpu "$BUILD"/common/test_common; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    if timeout 240 "$t" --gtest_brief=1 >"$LOGS/$name.log" 2>&1; then r=ok; else r="FAILED(rc=$?)"; fi
    say "$name: $r — $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$LOGS/$name.log" | tr '\n' ' ')"
    [ "$r" = ok ] || grep -E "Failure|error|FAILED" "$LOGS/$name.log" | head -20 | tee -a "$SUMMARY"
  done
fi

if want tests || want autograd_gpu; then
  # flashtut.autograd on the GPU, eager and from a CUDA graph (exit 77: skipped, says why).
  FLASHTUT_LIB="$BUILD/common/libflashtut.so" PYTHONDONTWRITEBYTECODE=1 timeout 300 \
    python3 "$ROOT/python/tests/test_autograd_gpu.py" -v >"$LOGS/python_autograd_gpu.log" 2>&1
  rc=$?
  say "python_autograd_gpu: rc=$rc — $(grep -E '^(Ran|OK|FAILED|test_autograd_gpu: skipped)' "$LOGS/python_autograd_gpu.log" | tr '\n' ' ')"
  [ "$rc" = 0 ] || grep -E "Error|FAIL|rel_err|differs" "$LOGS/python_autograd_gpu.log" | head -30 | tee -a "$SUMMARY"
  # flashtut.ops: opcheck, float64 references, torch.compile(fullgraph=True), CUDA graphs.
  FLASHTUT_LIB="$BUILD/common/libflashtut.so" PYTHONDONTWRITEBYTECODE=1 timeout 600 \
    python3 "$ROOT/python/tests/test_ops_gpu.py" -v >"$LOGS/python_ops_gpu.log" 2>&1
  rc=$?
  say "python_ops_gpu: rc=$rc — $(grep -E '^(Ran|OK|FAILED|test_ops_gpu: skipped)' "$LOGS/python_ops_gpu.log" | tr '\n' ' ')"
  [ "$rc" = 0 ] || grep -E "Error|FAIL|AssertionError" "$LOGS/python_ops_gpu.log" | head -30 | tee -a "$SUMMARY"
fi

if want ctest; then
  # The test binaries through ctest, 16 at a time as the README's test preset runs them:
  # FT_CTEST_REGEX picks tests by name (default: all), e.g. "^ch08[.]" for chapter 08's.
  say "== ctest -R '${FT_CTEST_REGEX:-.}'"
  start=$(date +%s)
  OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE ctest --test-dir "$BUILD" -j 16 --output-on-failure \
    -R "${FT_CTEST_REGEX:-.}" >"$LOGS/ctest.log" 2>&1
  say "ctest: rc=$?, wall $(( $(date +%s) - start )) s; $(grep -E 'tests passed|tests failed' "$LOGS/ctest.log")"
  grep -E "^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess)" "$LOGS/ctest.log" | head -40 | tee -a "$SUMMARY"
  grep -E "Failure|Expected|Which is|rel_l2|max_abs|error:" "$LOGS/ctest.log" | head -60 | tee -a "$SUMMARY"
fi

# FT_TC_VARIANT="06:grid_half 07:fastest" runs those variants instead of all (a chapter may
# be named more than once: "08:spread_atomics 08:late_copy" runs both, in one run).
tc_variant() { for cv in ${FT_TC_VARIANT:-}; do [ "${cv%%:*}" = "${1:0:2}" ] && echo "${cv#*:}"; done; }

if want sanitizer; then
  say "== compute-sanitizer (small problems: B=1 H=2 N=200, d in {$SANITIZE_DIMS}, causal and not)"
  for ch in $SANITIZE; do
    p=$(prog "$ch")
    [ -x "$p" ] || continue
    for d in $SANITIZE_DIMS; do
      for tool in memcheck racecheck synccheck; do
        for c in "" "--causal"; do
          log="$LOGS/sanitizer_${ch}_d${d}_${tool}${c:+_causal}${FT_SANITIZE_TAG:-}.log"
          v=$(FT_TC_VARIANT="${FT_SANITIZE_VARIANT:-}" tc_variant "$ch" | paste -sd, -)
          timeout "${FT_SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$p" --batch 1 --heads 2 \
            --seq-len 200 --head-dim "$d" $c --iters 1 --warmup 0 --no-baseline ${v:+--variant $v} \
            ${FT_SANITIZE_ARGS:-} >"$log" 2>&1
          rc=$?
          say "$ch d=$d $tool ${c:-non-causal}: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)"
        done
      done
    done
  done
fi

if want sanitizer_views; then
  # The kernels that read views (ft::Views, common/core/strides.hpp) run only from the tests: their
  # GPU tests under memcheck and racecheck (FT_VIEWS_FILTER picks them; default the ones
  # that cover every views kernel, split_tail's cut tiles and async_bc64 included).
  say "== compute-sanitizer on the views tests"
  for t in "$BUILD"/chapters/07_tensor_core_forward/test_*_gpu "$BUILD"/chapters/08_tensor_core_backward/test_*_gpu; do
    [ -x "$t" ] || continue
    for tool in memcheck racecheck; do
      log="$LOGS/sanitizer_views_$(basename "$t")_$tool.log"
      timeout "${FT_SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$t" \
        --gtest_filter="${FT_VIEWS_FILTER:-Ch07Views.ProjectionViews:Ch08Views.CutTilesAndTheFallback}" \
        --gtest_brief=1 >"$log" 2>&1
      say "views $(basename "$t") $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1) $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
    done
  done
fi

if want tour; then
  say "== tour (16384 tokens: B = 16384/N, H = 2048/d)"
  rm -f "$OUT/tour.csv"
  for d in $DIMS; do
    for cz in $CAUSAL; do
      c=$(flag $cz)
      for n in $SIZES; do
        part="$LOGS/tour_d${d}_n${n}${c:+_causal}.csv"
        timeout 300 "$BUILD/chapters/tour/tour" --seq-len $n --batch $((16384 / n)) --heads $((2048 / d)) \
          --head-dim $d $c --iters 10 --warmup 1 --csv "$part" >"$LOGS/tour_d${d}_n${n}${c:+_causal}.log" 2>&1
        say "tour d=$d N=$n ${c:-non-causal}: rc=$?"
        if [ -f "$part" ]; then
          if [ -f "$OUT/tour.csv" ]; then tail -n +2 "$part" >>"$OUT/tour.csv"; else cp "$part" "$OUT/tour.csv"; fi
        fi
      done
    done
  done
  grep -h -A12 "^ch  variant" "$LOGS"/tour_d64_n*.log | tee -a "$SUMMARY"
fi

if want chapters; then
  say "== chapter programs (their own variants and benchmarks)"
  rm -f "$OUT/chapters.csv"
  run_ch() {  # chapter, log name, flags...
    local p; p=$(prog "$1"); local log="$LOGS/$2.log"; shift 2
    timeout 300 "$p" "$@" --no-baseline --iters 10 --csv "$OUT/chapters.csv" >"$log" 2>&1
    say "$(basename "$p") $*: rc=$?"
    grep -E "^(02|03|04|05) " "$log" | tee -a "$SUMMARY"
  }
  # Chapter 02's README problem (its variants' staircase), then chapter 03's.
  run_ch 02_tiled ch02_n4096 --seq-len 4096 --batch 4 --heads 32 --head-dim 64
  run_ch 03_online_softmax ch03_n16384 --seq-len 16384 --batch 1 --heads 32
  for d in $DIMS; do
    for cz in $CAUSAL; do
      c=$(flag $cz)
      for n in ${FT_CHAPTER_SIZES:-4096}; do
        run_ch 04_fused_forward "ch04_d${d}_n${n}${c}" --seq-len $n --batch $((16384 / n)) --heads $((2048 / d)) --head-dim $d $c
        run_ch 05_backward "ch05_d${d}_n${n}${c}" --seq-len $n --batch $((16384 / n)) --heads $((2048 / d)) --head-dim $d $c
      done
    done
  done
fi

if want tc; then
  say "== tensor-core chapters: every variant (bf16; FT_TC_DTYPES to change), 16384 tokens"
  rm -f "$OUT/tc.csv"
  for ch in ${FT_TC_CHAPTERS:-${TC_CHAPTERS[*]}}; do
    p=$(prog "$ch")
    [ -x "$p" ] || continue
    for dt in ${FT_TC_DTYPES:-bf16}; do
      for d in $DIMS; do
        for cz in $CAUSAL; do
          c=$(flag $cz)
          for n in ${FT_TC_SIZES:-4096 16384}; do
            log="$LOGS/tc_${ch}_${dt}_d${d}_n${n}${c:+_causal}.log"
            vs=$(tc_variant "$ch" | paste -sd, -)  # the chapter's FT_TC_VARIANT entries, or all
            timeout 300 "$p" --dtype "$dt" --seq-len $n --batch $((16384 / n)) --heads $((2048 / d)) \
              --head-dim $d $c --no-baseline --iters 10 --warmup 2 --csv "$OUT/tc.csv" \
              --variant "${vs:-all}" >"$log" 2>&1
            say "$(basename "$p") $dt d=$d N=$n ${c:-non-causal}: rc=$?"
            grep -E "^0[6-9] " "$log" | tee -a "$SUMMARY"
          done
        done
      done
    done
  done
fi

if want anchors; then
  # PyTorch's attention backends and a three-kernel version on the tour's shapes (same
  # FT_SIZES, FT_DIMS, FT_CAUSAL), after the GPU's ceilings: anchors.csv, and ceilings.csv
  # from the ceiling lines of the log.
  say "== PyTorch anchors (same run)"
  if python3 -c 'import torch' >/dev/null 2>&1; then
    PYTHONUNBUFFERED=1 python3 "$ROOT/scripts/pytorch_anchors.py" "$OUT" --sizes $SIZES \
      --dims $DIMS --causal $CAUSAL >"$LOGS/anchors.log" 2>&1
    say "anchors: rc=$? $(grep -c . "$OUT/anchors.csv" 2>/dev/null) lines, $(grep -c ' skipped: ' "$LOGS/anchors.log") cases skipped"
    python3 "$ROOT/plots/ceilings_from_anchors.py" "$LOGS/anchors.log" "$OUT/ceilings.csv" 2>&1 | tee -a "$SUMMARY"
    grep -E "ceiling|mem_efficient +torch.float32" "$LOGS/anchors.log" | tee -a "$SUMMARY"
  else
    say "anchors: python3 cannot import torch, skipped"
  fi
fi

if want vs_pytorch; then
  # Ours through the Python module (ch07 in bf16/fp16, ch04 and ch05 in float32) beside
  # PyTorch's five on the tour's shapes (same FT_SIZES, FT_DIMS, FT_CAUSAL), forward and
  # backward: vs_pytorch.csv; rc=1 when one of ours fails its float64 check.
  say "== ours vs PyTorch (same run)"
  if python3 -c 'import torch' >/dev/null 2>&1; then
    PYTHONUNBUFFERED=1 python3 "$ROOT/scripts/compare_pytorch.py" --out "$OUT" \
      --lib "$BUILD/common/libflashtut.so" --sizes $SIZES --dims $DIMS --causal $CAUSAL \
      --dtypes ${FT_VS_DTYPES:-bf16,fp16,float32} --backward >"$LOGS/vs_pytorch.log" 2>&1
    say "vs_pytorch: rc=$? $(grep -c . "$OUT/vs_pytorch.csv" 2>/dev/null) lines, $(grep -c ' skipped: ' "$LOGS/vs_pytorch.log") cases skipped"
    sed -n '/^impl  /,$p' "$LOGS/vs_pytorch.log" | tee -a "$SUMMARY"
  else
    say "vs_pytorch: python3 cannot import torch, skipped"
  fi
fi

if want train; then
  # A small GPT (scripts/train_gpt.py) trained with PyTorch's FlashAttention-2 and with the
  # tutorial's attention (chapters 07 and 08): FT_TRAIN_REPEATS runs (default 3) of each seed
  # of FT_TRAIN_SEEDS (default "0 1") with each attention, in rounds (one run of every
  # (seed, attention), then the next round), so that a drift of the host's speed falls on both
  # alike; each step replayed as a CUDA graph (--graph) unless FT_TRAIN_GRAPH=0. The tutorial's
  # first run checks its kernels against FlashAttention-2 first; its later runs skip that
  # (--no-check). Round 0's seed-0 runs also profile FT_TRAIN_PROFILE (default 5) eager steps.
  # training.csv holds every step of every run; plots/plot_training.py draws training.png and
  # prints the band, each run, the verdict and the step times (training_verdict.txt).
  # FT_TRAIN_EAGER=1 adds an eager pair (seed 0, FlashAttention-2 then the tutorial, no
  # graph): training_eager.csv, for the host-bound step time.
  say "== training (FT_TRAIN_STEPS=${FT_TRAIN_STEPS:-300} steps each)"
  if python3 -c 'import torch' >/dev/null 2>&1; then
    graph=$([ "${FT_TRAIN_GRAPH:-1}" = 1 ] && echo --graph)
    checked=0
    train_one() {  # attention seed repeat out.csv [flags...]
      local a=$1 s=$2 r=$3 csv=$4; shift 4
      local name; name=$(basename "$csv" .csv)
      local flags=("$@")
      if [ "$a" = flashtut ]; then
        if [ "$checked" = 0 ]; then checked=1; else flags+=(--no-check); fi
      fi
      PYTHONUNBUFFERED=1 timeout 300 python3 "$ROOT/scripts/train_gpt.py" --attention "$a" --seed "$s" \
        --repeat "$r" --steps "${FT_TRAIN_STEPS:-300}" --lib "$BUILD/common/libflashtut.so" \
        --out "$csv" "${flags[@]}" >"$LOGS/$name.log" 2>&1
      say "train $a seed $s repeat $r ${flags[*]}: rc=$? $(grep -E '^train_gpt: (summary|profile|error|check:   )' "$LOGS/$name.log" | tr '\n' ' ')"
    }
    parts=()
    for ((r = 0; r < ${FT_TRAIN_REPEATS:-3}; r++)); do
      for s in ${FT_TRAIN_SEEDS:-0 1}; do
        for a in sdpa_flash flashtut; do
          profile=0
          [ "$r" = 0 ] && [ "$s" = 0 ] && profile=${FT_TRAIN_PROFILE:-5}
          train_one "$a" "$s" "$r" "$LOGS/train_${a}_s${s}_r${r}.csv" $graph --profile "$profile"
          parts+=("$LOGS/train_${a}_s${s}_r${r}.csv")
        done
      done
    done
    join_csvs() { python3 - "$@" <<'PY'
import sys
out, parts = sys.argv[1], sys.argv[2:]
with open(out, "w") as f:
    for path in parts:
        try:
            lines = open(path).read().splitlines()
        except OSError:
            continue
        f.write("\n".join(lines if not f.tell() else lines[1:]) + "\n")
PY
    }
    join_csvs "$OUT/training.csv" ${parts[@]+"${parts[@]}"}
    python3 "$ROOT/plots/plot_training.py" "$OUT/training.csv" --out "$OUT/training.png" 2>&1 |
      tee "$OUT/training_verdict.txt" | tee -a "$SUMMARY"
    if [ "${FT_TRAIN_EAGER:-0}" = 1 ]; then
      for a in sdpa_flash flashtut; do
        train_one "$a" 0 0 "$LOGS/train_eager_${a}_s0.csv" --profile 0
      done
      join_csvs "$OUT/training_eager.csv" "$LOGS"/train_eager_sdpa_flash_s0.csv "$LOGS"/train_eager_flashtut_s0.csv
    fi
  else
    say "training: python3 cannot import torch, skipped"
  fi
fi

if want traffic; then
  say "== Nsight Compute traffic"
  if [ -x "$ROOT/scripts/measure_traffic.sh" ]; then
    # The raw Nsight Compute files stay in the logs (the device tool returns 8 files).
    "$ROOT/scripts/measure_traffic.sh" "$LOGS/traffic" "$BUILD" >"$LOGS/traffic.log" 2>&1
    say "traffic: rc=$?"
    cp "$LOGS/traffic/traffic.csv" "$OUT/traffic.csv" 2>/dev/null
    tail -n 40 "$LOGS/traffic.log" | tee -a "$SUMMARY"
  else
    say "traffic: scripts/measure_traffic.sh missing, skipped"
  fi
fi

if want profiles; then
  # Nsight Compute sections of the kernels the chapter READMEs discuss, at N = 4096 (B = 4,
  # H = 2048/d): the second launch of the kernel (the first is the verifying call), with
  # each warp-stall reason's share of the cycles between a warp's instructions (the
  # WarpStateStats section's breakdown, which the command line does not print by itself).
  # FT_PROFILES: "chapter:variant:kernel:d ..." (default below); "torch:BACKEND:kernel:d"
  # profiles PyTorch's backend instead (scripts/sdpa_once.py, bf16), e.g.
  # "torch:FLASH_ATTENTION:flash_bwd_dq_dk_dv:128" for FlashAttention-2's backward.
  # Written to logs/profiles/.
  say "== Nsight Compute profiles"
  mkdir -p "$LOGS/profiles"
  # A spec's fields (ch, v, k, d) and the command it profiles (cmd), at N = 4096, B = 4.
  profile_cmd() {
    IFS=: read -r ch v k d <<<"$1"
    if [ "$ch" = torch ]; then
      cmd=(python3 "$ROOT/scripts/sdpa_once.py" --backend "$v" --batch 4 --heads $((2048 / d))
           --seq-len 4096 --head-dim "$d" --iters 2)
    else
      cmd=("$(prog "$(basename "$ROOT"/chapters/"$ch"_*)")" --seq-len 4096 --batch 4 --heads $((2048 / d))
           --head-dim "$d" --variant "$v" --iters 1 --warmup 0 --no-verify --no-baseline)
    fi
  }
  for spec in ${FT_PROFILES:-04:simple:fused_forward_simple_kernel:64 04:fast:fused_forward_kernel:64
      04:fast:fused_forward_kernel:128 05:flash:flash_backward_atomic_dq:64
      05:flash:flash_backward_atomic_dq:128}; do
    profile_cmd "$spec"
    out="$LOGS/profiles/profile_${ch}_${v}_d${d}.txt"
    timeout 300 ncu --clock-control none --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables \
      --section SourceCounters --metrics "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$" \
      -k "regex:$k" --launch-skip 1 --launch-count 1 "${cmd[@]}" >"$out" 2>&1
    say "profile $ch $v d=$d: rc=$? $(grep -E ' Duration ' "$out" | head -1)"
    # The stall reasons, largest first: cycles a warp waits, per instruction it issues.
    grep -E "smsp__average_warps_issue_stalled_" "$out" | awk '{print $NF, $1}' | sort -rn | head -8 |
      sed 's/^/    /' | tee -a "$SUMMARY"
  done
  # FT_SOURCE_PAGES (same specs): Nsight Compute's stall samples per SASS instruction, the
  # source page exported to logs/profiles/source_<ch>_<variant>_d<d>.csv.gz, and the table of
  # where the warps wait by phase (scripts/stall_phases.py; chapter 08's five products).
  for spec in ${FT_SOURCE_PAGES:-}; do
    profile_cmd "$spec"
    rep="$LOGS/profiles/source_${ch}_${v}_d${d}"
    timeout 300 ncu --clock-control none --section WarpStateStats --section SourceCounters \
      --section InstructionStats -k "regex:$k" --launch-skip 1 --launch-count 1 -o "$rep" \
      "${cmd[@]}" >"$rep.log" 2>&1
    rc=$?
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2>>"$rep.log" | gzip >"$rep.csv.gz"
    say "source page $ch $v d=$d: profile rc=$rc, export rc=${PIPESTATUS[0]}"
    rm -f "$rep.ncu-rep"
    python3 "$ROOT/scripts/stall_phases.py" "$rep.csv.gz" ${FT_PHASE_NAMES:+--names $FT_PHASE_NAMES} 2>&1 |
      tee -a "$SUMMARY"
  done
fi

tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
say "== done"
