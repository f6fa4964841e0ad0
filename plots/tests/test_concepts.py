"""CPU test: plots/concepts.py draws every concept picture (a non-empty PNG, 1600 pixels
wide, the height concepts.FIGURES says) into a temporary folder, and each chapter's README
embeds its picture (the figure's path appears in chapters/NN_*/README.md)."""
import glob
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOTS = os.path.dirname(HERE)
ROOT = os.path.dirname(PLOTS)
import concepts


def png_size(path):
    """(width, height) from the PNG's IHDR chunk."""
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path}: not a PNG")
    return struct.unpack(">II", head[16:24])


class Concepts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.proc = subprocess.run([sys.executable, os.path.join(PLOTS, "concepts.py"),
                                   cls.tmp.name], capture_output=True, text=True, timeout=300)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_runs(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stdout + self.proc.stderr)

    def test_one_figure_per_chapter(self):
        """Chapters 01-10 each have one at least; later chapters may add theirs."""
        chapters = sorted(os.path.basename(d)[:2]
                          for d in glob.glob(os.path.join(ROOT, "chapters", "[0-9][0-9]_*")))
        numbers = sorted({name.split("_")[1] for name in concepts.FIGURES})
        self.assertEqual(numbers, [f"{n:02d}" for n in range(1, 11)])
        self.assertLessEqual(set(numbers), set(chapters))

    def test_pairs_even_the_causal_load(self):
        """concept_09_pairs counts chapter 09's schedules: round-robin leaves one block with
        about twice the mean (128 tiles a head on 132 blocks); pairs are within a pair of it."""
        rr = concepts.block_work(128, 16, 132, pairs=False)
        pairs = concepts.block_work(128, 16, 132, pairs=True)
        self.assertEqual(sum(rr), sum(pairs))  # the same tiles, handed out differently
        self.assertEqual(sum(rr), 16 * 128 * 129 // 2)
        self.assertGreater(max(rr) / (sum(rr) / 132), 1.5)
        self.assertLessEqual(max(pairs) - min(pairs), 129)

    def test_every_figure_written_at_its_size(self):
        for name, height in concepts.FIGURES.items():
            path = os.path.join(self.tmp.name, name)
            with self.subTest(figure=name):
                self.assertTrue(os.path.isfile(path), f"{name} not written")
                self.assertGreater(os.path.getsize(path), 10_000, f"{name} is (nearly) empty")
                self.assertEqual(png_size(path), (round(concepts.WIDTH_IN * concepts.DPI),
                                                  round(height * concepts.DPI)))

    def test_each_chapter_readme_embeds_its_figure(self):
        for name in concepts.FIGURES:
            number = name.split("_")[1]
            (readme,) = glob.glob(os.path.join(ROOT, "chapters", f"{number}_*", "README.md"))
            with self.subTest(figure=name), open(readme, encoding="utf-8") as fh:
                self.assertIn(f"](../../plots/figures/{name})", fh.read(),
                              f"{os.path.relpath(readme, ROOT)} does not show {name}")

    def test_committed_figures_exist(self):
        for name in concepts.FIGURES:
            self.assertTrue(os.path.isfile(os.path.join(PLOTS, "figures", name)), name)


if __name__ == "__main__":
    unittest.main()
