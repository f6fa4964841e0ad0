#!/usr/bin/env bash
# Measures the bytes every chapter's kernels move, with Nsight Compute, next to the traffic
# model's prediction, and writes OUT_DIR/traffic.csv (columns: docs/contracts.md, contract 4).
#
# Usage: scripts/measure_traffic.sh OUT_DIR BUILD_DIR     (on a machine with a GPU and ncu)
#   e.g. scripts/measure_traffic.sh plots/results/h200 build
#
# For each program BUILD_DIR/chapters/NN_*/chNN_*, N in {1024, 4096, 16384}, d in {64, 128}
# (B = 16384/N sequences, H = 2048/d heads: 16k tokens of hidden size 2048 throughout, the
# shapes the FlashAttention papers benchmark), non-causal, and each variant of the chapter:
#   1. the program's model ledger (--ledger-csv), printed without touching the GPU
#      (CUDA_VISIBLE_DEVICES= hides it: the program prints the model and exits 3), which
#      names the chapter's variants and says whether a variant supports the shape;
#   2. one run under ncu per variant: per kernel launch, DRAM bytes (dram__bytes_*), bytes
#      requested from L2 by loads and stores (lts__t_sectors_srcunit_tex_op_*, 32-byte
#      sectors) and the kernel's time;
#   3. scripts/join_traffic.py pairs launches with ledger rows by kernel name and prints a
#      summary that marks model/measurement gaps over 20%.
# Raw files stay in OUT_DIR/ncu/ (not committed). A run replaces the files of the runs it
# repeats and keeps the others, and the join reads them all: so the work can be split into
# several calls (FT_TRAFFIC_CHAPTERS) and traffic.csv still covers everything measured.
# Delete OUT_DIR/ncu to start afresh.
#
# Environment:
#   NCU                  the ncu binary (default: ncu)
#   FT_TRAFFIC_CHAPTERS  only these chapters, e.g. "01 02 03" (default: every chapter built)
#   FT_TRAFFIC_SKIP      "CH:N:d ..." combinations to leave out, e.g. "01:16384:128"
#   FT_TRAFFIC_VARIANTS  only these variants, as chapter:variant, e.g. "07:fastest 07:plain"
#                        (a chapter not named keeps all its variants)
#   FT_TRAFFIC_N, FT_TRAFFIC_D  override the size lists, e.g. FT_TRAFFIC_N="1024" for a quick try
#   FT_TRAFFIC_KEEP      an earlier traffic.csv whose rows stay for every run not repeated
#                        here (join_traffic.py --keep), e.g. plots/results/h200/traffic.csv
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 OUT_DIR BUILD_DIR" >&2
  exit 2
fi
out=$1
build=$2
here=$(cd "$(dirname "$0")" && pwd)
ncu=${NCU:-ncu}
command -v "$ncu" >/dev/null || { echo "$0: '$ncu' not found (Nsight Compute)" >&2; exit 1; }

metrics=dram__bytes_read.sum,dram__bytes_write.sum
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
metrics+=,gpu__time_duration.sum
# Atomics and reductions (chapter 05's dQ) reach L2 as operations of their own, counted by
# neither counter above; added where this ncu knows them.
known=$("$ncu" --query-metrics 2>/dev/null || true)
for m in lts__t_sectors_srcunit_tex_op_red lts__t_sectors_srcunit_tex_op_atom; do
  grep -qw "$m" <<<"$known" && metrics+=,$m.sum
done
echo "metrics: $metrics"
# Nothing is skipped unless FT_TRAFFIC_SKIP says so. (On the H200, chapters 01-03 at
# N=16384, d=128 took 16 s under ncu, chapter 05 at all six shapes under 80 s.)
skip=${FT_TRAFFIC_SKIP-}
sizes=${FT_TRAFFIC_N:-"1024 4096 16384"}
dims=${FT_TRAFFIC_D:-"64 128"}
tokens=16384   # B·N: sequences × tokens per sequence
hidden=2048    # H·d: heads × head dimension

chapters=${FT_TRAFFIC_CHAPTERS:-}
raw=$out/ncu
mkdir -p "$raw"

shopt -s nullglob
programs=("$build"/chapters/[0-9][0-9]_*/ch[0-9][0-9]_*)
[[ ${#programs[@]} -gt 0 ]] || { echo "$0: no chapter programs under $build/chapters" >&2; exit 1; }

# Runs the program with the GPU hidden: it prints the model's ledger into $2 and exits 3
# (2 when the shape or head dimension is not supported).
# A chapter's problem at the tour's N and d: B·N tokens of H·d features, self-attention; a
# decoding chapter's (decode_chapters) the same sequences each decoding one token, one query
# row against their N cached keys, as the tour runs it.
decode_chapters=" 11 "
shape_of() {
  local chapter=$1 n=$2 d=$3
  if [[ $decode_chapters == *" $chapter "* ]]; then
    echo --batch $((tokens / n)) --heads $((hidden / d)) --seq-len 1 --len-kv "$n" --head-dim "$d" \
      --causal-align bottom-right
  else
    echo --batch $((tokens / n)) --heads $((hidden / d)) --seq-len "$n" --head-dim "$d"
  fi
}

model_only() {
  local prog=$1 ledger=$2
  shift 2
  local rc=0
  CUDA_VISIBLE_DEVICES='' "$prog" "$@" --ledger-csv "$ledger" >"$ledger.log" 2>&1 || rc=$?
  return $rc
}

for prog in "${programs[@]}"; do
  [[ -f $prog && -x $prog ]] || continue
  name=$(basename "$prog")
  chapter=${name:2:2}
  [[ -z $chapters || " $chapters " == *" $chapter "* ]] || continue
  # 1. The chapter's variants, from its ledger at a shape every chapter supports.
  rm -f "$raw/$name.variants.csv"
  rc=0
  model_only "$prog" "$raw/$name.variants.csv" $(shape_of "$chapter" 1024 64) || rc=$?
  if [[ ! -s $raw/$name.variants.csv ]]; then
    echo "$0: $name wrote no ledger (exit $rc); see $raw/$name.variants.csv.log" >&2
    exit 1
  fi
  variants=$(tail -n +2 "$raw/$name.variants.csv" | cut -d, -f2 | awk '!seen[$0]++')
  if [[ " ${FT_TRAFFIC_VARIANTS:-} " == *" $chapter:"* ]]; then
    keep=""
    for v in $variants; do [[ " $FT_TRAFFIC_VARIANTS " == *" $chapter:$v "* ]] && keep+="$v "; done
    variants=$keep
  fi
  for n in $sizes; do
    for d in $dims; do
      if [[ " $skip " == *" $chapter:$n:$d "* ]]; then
        echo "== $name N=$n d=$d: skipped (FT_TRAFFIC_SKIP)"
        continue
      fi
      shape=($(shape_of "$chapter" "$n" "$d"))
      # 2. One profiled run per variant, so kernels that two variants share are not mixed up.
      for v in $variants; do
        base=$raw/${name}_N${n}_d${d}__$v
        rm -f "$base.ledger.csv" "$base.ncu.csv"
        rc=0
        model_only "$prog" "$base.ledger.csv" "${shape[@]}" --variant "$v" || rc=$?
        if [[ $rc -ne 3 && $rc -ne 0 ]]; then
          echo "== $name N=$n d=$d variant $v: not run ($(tail -n 1 "$base.ledger.csv.log"))"
          continue
        fi
        # Profile only the ledger's kernels (not input generation, the L2 flush, or the
        # forward a backward pairs with): fewer replays, and nothing else to match.
        kernels=$(tail -n +2 "$base.ledger.csv" | cut -d, -f3 | sed 's/<.*//' | sort -u | paste -sd'|')
        echo "== $name N=$n d=$d variant $v: $kernels"
        rm -f "$base.ledger.csv"
        if ! "$ncu" --clock-control none --print-units base --metrics "$metrics" --csv \
            --kernel-name-base function --kernel-name "regex:$kernels" \
            --log-file "$base.ncu.csv" \
            "$prog" "${shape[@]}" --variant "$v" --iters 1 --warmup 0 --no-verify \
            --no-baseline --ledger-csv "$base.ledger.csv" >"$base.log" 2>&1; then
          echo "   failed: see $base.log (last line: $(tail -n 1 "$base.log"))" >&2
          rm -f "$base.ncu.csv"  # join only complete runs
        fi
      done
    done
  done
done

# 3. Join and summarise.
python3 "$here/join_traffic.py" "$out/traffic.csv" "$raw" ${FT_TRAFFIC_KEEP:+--keep "$FT_TRAFFIC_KEEP"}
