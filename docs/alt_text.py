#!/usr/bin/env python3
"""Gives every picture of the rendered site its alt text (the docs target runs this after
Doxygen): Doxygen 1.9's \\image writes <img ... alt=""/>, which a screen reader announces as
nothing; gen_pages.py records each picture's words (its caption, or the README's alt text)
in image_alts.json, and this writes them into the HTML.

  python3 docs/alt_text.py HTML_DIR IMAGE_ALTS_JSON      exit 1 if a listed picture is
                                                           shown with no alt text after it
"""
import glob
import html
import json
import os
import re
import sys


def fill(text, alts):
    """`text` with alt="" replaced, in each <img> whose src is a key of `alts`."""
    def one(m):
        tag = m.group(0)
        src = re.search(r'src="([^"]+)"', tag)
        if not src or src.group(1) not in alts:
            return tag
        words = html.escape(alts[src.group(1)], quote=True)
        return tag.replace('alt=""', f'alt="{words}"')
    return re.sub(r"<img\b[^>]*>", one, text)


def missing(text, alts):
    """The listed pictures shown with an empty alt."""
    return [src for src in re.findall(r'<img\b[^>]*src="([^"]+)"[^>]*alt=""', text) if src in alts]


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
        return 2
    html_dir, alts_path = argv
    with open(alts_path, encoding="utf-8") as fh:
        alts = json.load(fh)
    left = []
    for path in glob.glob(os.path.join(html_dir, "*.html")):
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        new = fill(text, alts)
        if new != text:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(new)
        left += [f"{os.path.basename(path)}: {src}" for src in missing(new, alts)]
    for item in left:
        print(f"alt_text: no alt text for {item}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
