"""scripts/check_layers.py: the repository is clean, and each kind of violation is found."""
import os
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
import check_layers

ROOT = os.path.dirname(os.path.dirname(HERE))


class CheckLayers(unittest.TestCase):
    def tree(self, files):
        tmp = tempfile.mkdtemp()
        for rel, text in files.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write(text)
        return tmp

    def test_the_repository_is_clean(self):
        self.assertEqual(list(check_layers.violations(ROOT)), [])
        self.assertEqual(list(check_layers.depth_violations(ROOT)), [])

    def test_a_chain_of_a_chapters_headers_deeper_than_three_is_found(self):
        inc = '#include "09_x/{}"\n#include "core/problem.hpp"\n'
        root = self.tree({
            "chapters/09_x/a.cuh": inc.format("b.cuh"), "chapters/09_x/b.cuh": inc.format("c.cuh"),
            "chapters/09_x/c.cuh": inc.format("d.cuh"), "chapters/09_x/d.cuh": inc.format("e.cuh"),
            "chapters/09_x/e.cuh": "", "chapters/09_x/k.cu": inc.format("a.cuh"),
        })
        found = list(check_layers.depth_violations(root))
        self.assertEqual(found, ["chapters/09_x/a.cuh: includes its chapter's headers 4 deep "
                                 "(a.cuh > b.cuh > c.cuh > d.cuh > e.cuh); at most 3"])
        self.assertEqual(check_layers.main(["--root", root]), 1)
        os.remove(os.path.join(root, "chapters/09_x/e.cuh"))  # d.cuh's include now leads nowhere
        with open(os.path.join(root, "chapters/09_x/d.cuh"), "w") as fh:
            fh.write("")
        self.assertEqual(list(check_layers.depth_violations(root)), [])

    def test_each_violation_is_found(self):
        root = self.tree({
            "common/core/a.hpp": '#include "07_tensor_core_forward/flash_forward.hpp"\n',
            "common/core/b.hpp": '#include "harness/harness.hpp"\n',
            "common/sm80/c.cuh": "// ch07:: in a comment is fine\nusing ch07::Copy;\n",
            "common/harness/d.cpp": '#include "core/problem.hpp"\n#include "reference/inputs.hpp"\n',
        })
        found = list(check_layers.violations(root))
        self.assertEqual(len(found), 3, found)
        self.assertTrue(any("includes a chapter's file" in v for v in found))
        self.assertTrue(any("layer core/ includes harness/harness.hpp" in v for v in found))
        self.assertTrue(any("names a chapter's namespace, ch07::" in v for v in found))
        self.assertEqual(check_layers.main(["--root", root]), 1)


if __name__ == "__main__":
    unittest.main()
