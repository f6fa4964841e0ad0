#!/usr/bin/env python3
"""How long a grid of key-tile blocks keeps the SMs busy, counted on the CPU.

Chapter 08's backward runs one block an SM, one block a key tile, and a key tile's work is
the number of query tiles it visits (all of them non-causal; from the diagonal on, causal).
This script hands the blocks to the SMs the way the block scheduler does, in grid order,
each to the SM that frees up first, and prints the time the grid takes against the time a
perfect split of the same work would take (the work over the SMs). The difference is the
idle time at the end of the grid: the "last wave" of chapter 08's case study
(chapters/08_tensor_core_backward/case_study.md, "split_tail, the last wave").

A third column is chapter 10's step 9 (`persistent`): one resident block an SM, block i
walking the key tiles i, i + SMs, i + 2·SMs, ... in grid order, whatever their lengths; the
grid lasts as long as the longest walk (chapters/10_hopper_backward/case_study.md, "One
block an SM"). Handing the tiles out from a counter instead is the grid-order column again.

Times are in query tiles; each block costs `--overhead` query tiles more (loading K and V,
storing dK and dV). Two grid orders: the kernels' own (head-major: a head's key tiles in a
row) and longest first (the key-tile index slowest: every head's first tile, then every
head's second, ...). The comparison's shapes by default:

    python3 scripts/wave_schedule.py
    python3 scripts/wave_schedule.py --tokens 16384 --sizes 4096 --dims 128 --sms 108
    python3 scripts/wave_schedule.py --tokens 32768 --width 4096 --sizes 32768 --dims 128
"""
import argparse
import heapq


def makespan(durations, sms):
    """Greedy list scheduling in the given order: each block to the SM free first."""
    free = [0.0] * sms
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def fixed_walk(durations, sms):
    """One resident block an SM, block i taking blocks i, i + sms, ...: the longest walk."""
    walks = [0.0] * sms
    for i, d in enumerate(durations):
        walks[i % sms] += d
    return max(walks)


def tile_lengths(n, d, causal, br_of=lambda d: 128 if d == 64 else 64, bc=128):
    """Query tiles visited by each of a head's key tiles (WarpTileTraits' Br and Bc)."""
    br = br_of(d)
    q_tiles = -(-n // br)
    kv_tiles = -(-n // bc)
    return [q_tiles - (t * bc // br if causal else 0) for t in range(kv_tiles)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=16384, help="B·N (B = tokens / N)")
    ap.add_argument("--width", type=int, default=2048, help="H·d (H = width / d)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--sms", type=int, default=132, help="SMs (one block each): H100/H200 132")
    ap.add_argument("--overhead", type=float, default=1.0, help="query tiles a block adds")
    a = ap.parse_args()
    # The model's blocks are a list in memory: keep it to a few million of them.
    if a.sms < 1:
        ap.error(f"--sms {a.sms}: an SM count is at least 1")
    if a.overhead < 0:
        ap.error(f"--overhead {a.overhead}: a block's start and end cost 0 query tiles or more")
    for d in a.dims:
        if d not in (64, 128):
            ap.error(f"--dims {d}: the kernels' tiles are set for d = 64 and 128 only")
        if a.width % d:
            ap.error(f"--width {a.width} is not a multiple of d = {d} (H = width / d heads)")
    for n in a.sizes:
        if not 1 <= n <= a.tokens:
            ap.error(f"--sizes {n}: N must be 1 to --tokens ({a.tokens}), which holds B = tokens / N sequences")
        if (a.tokens // n) * (a.width // min(a.dims)) * -(-n // 128) > 10_000_000:
            ap.error(f"--sizes {n} with --tokens {a.tokens}: over ten million blocks to count; take fewer tokens")
    print(f"{'N':>6} {'d':>4} {'causal':>6} {'blocks':>7} {'waves':>6}   idle: grid order  longest first"
          f"  fixed walk   walk's speed / grid order's")
    for d in a.dims:
        for causal in (False, True):
            for n in a.sizes:
                heads = (a.tokens // n) * (a.width // d)
                lengths = tile_lengths(n, d, causal)
                head_major = [l + a.overhead for _ in range(heads) for l in lengths]
                longest = sorted(head_major, reverse=True)
                ideal = sum(head_major) / a.sms
                spans = [makespan(head_major, a.sms), makespan(longest, a.sms), fixed_walk(head_major, a.sms)]
                idle = [1 - ideal / span for span in spans]
                print(f"{n:>6} {d:>4} {'yes' if causal else 'no':>6} {len(head_major):>7} "
                      f"{len(head_major) / a.sms:>6.2f}   {100 * idle[0]:>15.1f}% {100 * idle[1]:>13.1f}%"
                      f" {100 * idle[2]:>10.1f}%   {spans[0] / spans[2]:>27.3f}")


if __name__ == "__main__":
    main()
