"""CPU tests of flashtut.ring, ring attention's schedule: the zigzag layout, the merge by the
log-sum-exp, and the forward and backward over P ranks against attention over the whole
sequence in float64, causal and not, grouped heads, P = 1 to 4 simulated in one process,
then through torch.distributed's real point-to-point (gloo on the CPU) with one, two and
three ranks; each visit's call against the causal mask cell by cell; the square cut for
kernels that take one length. The blocks are computed by flashtut.ring.reference_blocks (float64), so what is
tested is the ring, not a kernel. Exit 77 (skipped) without PyTorch."""
import math
import os
import sys
import tempfile
import unittest

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("test_ring: skipped: PyTorch is not installed (pip install torch)")
    sys.exit(77)

import flashtut.ring as ring

# How close float64 results on the CPU are held. On a loaded machine, PyTorch (2.15, CPU) was
# seen to compute the float64 reference at a rank's start up to 1e-9 away from the same
# computation repeated a moment later, the difference appearing first in an exp (the cause
# not pinned down; the ring's result equalled the simulated ring's exactly): so 1e-8, which a
# wrong merge or a misplaced block misses by many orders of magnitude.
CLOSE = dict(rtol=1e-8, atol=1e-8)


def full_attention(q, k, v, causal):
    """o and lse of attention over the whole sequence, float64 (the definition)."""
    return ring.reference_blocks()[0](q, k, v, causal)


def full_gradients(q, k, v, do, causal):
    o, lse = full_attention(q, k, v, causal)
    return ring.reference_blocks()[1](q, k, v, o, lse, do, causal)


def inputs(world, heads=4, heads_kv=2, chunk=3, d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = 2 * world * chunk
    q = torch.randn(2, heads, n, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, heads_kv, n, d, generator=g, dtype=torch.float64)
    v = torch.randn(2, heads_kv, n, d, generator=g, dtype=torch.float64)
    do = torch.randn(2, heads, n, d, generator=g, dtype=torch.float64)
    return q, k, v, do


def shards(x, world):
    return [ring.zigzag_shard(x, world, r) for r in range(world)]


class Layout(unittest.TestCase):
    def test_zigzag_round_trip(self):
        x = torch.arange(24.0).view(1, 1, 24, 1)
        for world in (1, 2, 3):
            parts = shards(x, world)
            self.assertTrue(torch.equal(ring.zigzag_unshard(parts), x))
        # P = 2: rank 0 holds chunks 0 and 3, rank 1 chunks 1 and 2 (chunks of 6).
        parts = shards(x, 2)
        self.assertEqual(parts[0].flatten().tolist(), list(range(0, 6)) + list(range(18, 24)))
        self.assertEqual(parts[1].flatten().tolist(), list(range(6, 18)))

    def test_refuses_a_length_that_does_not_split(self):
        with self.assertRaisesRegex(ValueError, "multiple of 2·world = 4"):
            ring.zigzag_shard(torch.zeros(1, 1, 10, 1), 2, 0)

    @staticmethod
    def positions(rank, world, chunk):
        """The sequence positions of rank ``rank``'s rows, in its local order (zigzag)."""
        late = 2 * world - 1 - rank
        return list(range(rank * chunk, (rank + 1) * chunk)) + list(range(late * chunk, (late + 1) * chunk))

    def computed(self, rank, src, world, chunk, causal):
        """The (query position, key position) pairs rank's one call computes when src's block
        visits: step_block's rectangle, under its own diagonal mask when it says causal."""
        a, b, diag = ring.step_block(rank, src, world, causal)
        rows = ring._half(torch.tensor(self.positions(rank, world, chunk)), a, dim=0).tolist()
        cols = ring._half(torch.tensor(self.positions(src, world, chunk)), b, dim=0).tolist()
        return {(i, j) for x, i in enumerate(rows) for y, j in enumerate(cols) if not diag or y <= x}

    def test_each_visit_is_exactly_the_masks_pairs(self):
        """Cell by cell: the pairs a visit's call computes are the visible pairs of the
        rank's queries and the visitor's keys, no more, no fewer."""
        for world in (1, 2, 3, 4, 5):
            for chunk in (1, 3):
                for causal in (False, True):
                    for rank in range(world):
                        for src in range(world):
                            want = {(i, j) for i in self.positions(rank, world, chunk)
                                    for j in self.positions(src, world, chunk) if not causal or j <= i}
                            self.assertEqual(self.computed(rank, src, world, chunk, causal), want,
                                             (world, chunk, causal, rank, src))

    def test_causal_steps_balance_the_work(self):
        """Under the mask every rank computes the same number of pairs at every step: at the
        first (its own block) 2c² + c, a triangle of 2c rows; after it 2c², a 2c × c or
        c × 2c rectangle. The zigzag's point."""
        chunk = 3
        for world in (2, 3, 4, 5):
            for step in range(world):
                counts = {len(self.computed(r, (r - step) % world, world, chunk, True)) for r in range(world)}
                self.assertEqual(counts, {2 * chunk * chunk + (chunk if step == 0 else 0)}, (world, step))

    def test_merge_of_two_halves_is_the_whole(self):
        q, k, v, _ = inputs(1)
        o, lse = full_attention(q, k, v, False)
        n = k.shape[2] // 2
        oa, la = full_attention(q, k[:, :, :n], v[:, :, :n], False)
        ob, lb = full_attention(q, k[:, :, n:], v[:, :, n:], False)
        om, lm = ring.merge(oa, la, ob, lb)
        torch.testing.assert_close(om, o, **CLOSE)
        torch.testing.assert_close(lm, lse, **CLOSE)

    def test_merge_keeps_rows_that_saw_no_key(self):
        o = torch.zeros(1, 1, 2, 4, dtype=torch.float64)
        lse = torch.full((1, 1, 2), -math.inf, dtype=torch.float64)
        om, lm = ring.merge(o, lse, o.clone(), lse.clone())
        self.assertTrue(torch.equal(om, o))
        self.assertTrue(torch.isinf(lm).all())


def check_ring(world, causal, blocks=None):
    """P = world ranks simulated in one process against the whole sequence in float64."""
    q, k, v, do = inputs(world)
    o_ref, lse_ref = full_attention(q, k, v, causal)
    dq_ref, dk_ref, dv_ref = full_gradients(q, k, v, do, causal)
    qs, ks, vs, dos = shards(q, world), shards(k, world), shards(v, world), shards(do, world)
    results = ring.forward_simulated(qs, ks, vs, causal=causal, blocks=blocks)
    o = ring.zigzag_unshard([o for o, _ in results])
    lse = ring.zigzag_unshard([l.unsqueeze(-1) for _, l in results]).squeeze(-1)
    torch.testing.assert_close(o, o_ref, **CLOSE)
    torch.testing.assert_close(lse, lse_ref, **CLOSE)
    grads = ring.backward_simulated(qs, ks, vs, [o for o, _ in results], [l for _, l in results], dos,
                                    causal=causal, blocks=blocks)
    for i, (name, ref) in enumerate((("dq", dq_ref), ("dk", dk_ref), ("dv", dv_ref))):
        got = ring.zigzag_unshard([g[i] for g in grads])
        torch.testing.assert_close(got, ref, **CLOSE, msg=f"{name}, P = {world}")


class Simulated(unittest.TestCase):
    def test_every_world_causal_and_not(self):
        for world in (1, 2, 3, 4):
            for causal in (False, True):
                with self.subTest(world=world, causal=causal):
                    check_ring(world, causal)


class SquareCut(unittest.TestCase):
    """ring.square_blocks: a kernel that takes one length still runs the ring."""

    def square_only(self):
        forward, backward = ring.reference_blocks()

        def only_square(q, k):
            if q.shape[2] != k.shape[2]:
                raise AssertionError(f"a {q.shape[2]} × {k.shape[2]} call reached a one-length kernel")

        def f(q, k, v, causal):
            only_square(q, k)
            return forward(q, k, v, causal)

        def b(q, k, v, o, lse, do, causal):
            only_square(q, k)
            return backward(q, k, v, o, lse, do, causal)

        return ring.square_blocks(f, b)

    def test_the_ring_through_square_calls(self):
        blocks = self.square_only()
        for world in (1, 2, 3, 4):
            for causal in (False, True):
                with self.subTest(world=world, causal=causal):
                    check_ring(world, causal, blocks)

    def test_refuses_a_rectangle_it_cannot_cut(self):
        f, _ = self.square_only()
        q, k, v, _ = inputs(1)
        with self.assertRaisesRegex(ValueError, "neither equal nor a pair"):
            f(q, k[:, :, :1], v[:, :, :1], False)
        with self.assertRaisesRegex(ValueError, "only on a square"):
            f(q, k[:, :, :k.shape[2] // 2], v[:, :, :v.shape[2] // 2], True)


def _rank_main(rank, world, init_file, causal, failures):
    """One process of the distributed test: its shard through DistributedRing, checked
    against the whole sequence's attention."""
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        q, k, v, do = inputs(world, seed=7)
        o_ref, lse_ref = full_attention(q, k, v, causal)
        dq_ref, dk_ref, dv_ref = full_gradients(q, k, v, do, causal)
        comm = ring.DistributedRing()
        mine = lambda x: ring.zigzag_shard(x, world, rank)
        o, lse = ring.forward(mine(q), mine(k), mine(v), causal=causal, comm=comm)
        torch.testing.assert_close(o, mine(o_ref), **CLOSE)
        torch.testing.assert_close(lse, ring.zigzag_shard(lse_ref.unsqueeze(-1), world, rank).squeeze(-1),
                                   **CLOSE)
        dq, dk, dv = ring.backward(mine(q), mine(k), mine(v), o, lse, mine(do), causal=causal, comm=comm)
        for got, ref in ((dq, dq_ref), (dk, dk_ref), (dv, dv_ref)):
            torch.testing.assert_close(got, mine(ref), **CLOSE)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        failures.put(f"rank {rank}: {type(e).__name__}: {e}")
        raise
    finally:
        dist.destroy_process_group()


class Distributed(unittest.TestCase):
    """The real communication path: torch.distributed over gloo, one process a rank."""

    def run_world(self, world):
        if not dist.is_available() or not dist.is_gloo_available():
            self.skipTest("torch.distributed with gloo is not available in this PyTorch")
        for causal in (False, True):
            with tempfile.TemporaryDirectory() as tmp, self.subTest(world=world, causal=causal):
                ctx = mp.get_context("spawn")
                failures = ctx.SimpleQueue()
                procs = [ctx.Process(target=_rank_main, args=(r, world, os.path.join(tmp, "init"), causal, failures))
                         for r in range(world)]
                for p in procs:
                    p.start()
                for p in procs:
                    p.join(timeout=120)
                for p in procs:  # a rank that hangs fails the test instead of holding the runner
                    if p.is_alive():
                        p.terminate()
                        p.join()
                messages = []
                while not failures.empty():
                    messages.append(failures.get())
                self.assertEqual(messages, [])
                self.assertEqual([p.exitcode for p in procs], [0] * world)

    def test_one_rank(self):
        self.run_world(1)

    def test_two_ranks(self):
        self.run_world(2)

    def test_three_ranks(self):
        """A block's dk, dv pass through a rank that neither owns it nor ends with it."""
        self.run_world(3)


if __name__ == "__main__":
    unittest.main()
