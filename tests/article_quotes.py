#!/usr/bin/python3
"""The documents' sentences each lesson page quotes, checked against the documents.

Every docs/lesson-*.md and docs/zh/lesson-*.md quotes the sentence of the KV
Cache article or the numpy chapter that each claim it explains rests on. A
quote is Chinese text between double quotes ("..." on the English pages,
“...” on the Chinese ones) with at least four Chinese characters; "……"
marks words left out. Anything else a page quotes is written otherwise: what
kvdemo prints and prompts in backquotes, other words in 「...」 on the
Chinese pages. Each piece of a quote must appear in one of the two
documents verbatim, up to white space (pages wrap lines). Writes

  tests/fixtures/article_quotes.txt  one "PAGE<TAB>QUOTE" a line; PAGE is
                                     "output" for the quotes kvdemo prints
                                     after 原文： (lessons/*.c, src/*/*.c)

which test_docs reads to check that each page still holds its quotes and
that every page has at least one, and test_zh to check that every 原文： kvdemo
prints is followed by one of the "output" quotes. Prints the quotes that are not verbatim
and exits 1 when there are any.

Run: /usr/bin/python3 tests/article_quotes.py (the documents are in
/work/shared/seeds/, or the folder given as the first argument).
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEEDS = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/seeds"
HAN = re.compile(r"[\u4e00-\u9fff]")
SPACE = re.compile(r"\s+")


def squeeze(text):
    return SPACE.sub("", text)


def quotes(page_text, zh):
    pattern = r"“([^”]{1,400})”" if zh else r'"([^"]{1,400})"'
    for m in re.finditer(pattern, page_text):
        q = m.group(1)
        if len(HAN.findall(q)) >= 4:
            yield SPACE.sub(" ", q).strip()


def source_quotes():
    """The quotes that kvdemo's Chinese output gives after 原文：, from the
    C sources (adjacent string literals joined, their \\n removed)."""
    for path in sorted(glob.glob(os.path.join(ROOT, "lessons", "*.c")) +
                       glob.glob(os.path.join(ROOT, "src", "*", "*.c"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r'"\s*\n\s*"', "", text).replace("\\n", "")
        for m in re.finditer(r"原文：“([^”]{1,400})”", text):
            yield os.path.relpath(path, ROOT), SPACE.sub(" ", m.group(1)).strip()


def main():
    documents = ""
    for name in sorted(glob.glob(os.path.join(SEEDS, "0*.txt"))):
        with open(name, encoding="utf-8") as f:
            documents += squeeze(f.read())
    if not documents:
        sys.exit("no documents in %s" % SEEDS)
    rows, bad = [], []
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "lesson-*.md"))) + \
        sorted(glob.glob(os.path.join(ROOT, "docs", "zh", "lesson-*.md")))
    for path in pages:
        page = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found = 0
        for q in quotes(text, "/zh/" in path):
            pieces = [p for p in q.split("……") if squeeze(p)]
            if all(squeeze(p) in documents for p in pieces):
                rows.append("%s\t%s" % (page, q))
                found += 1
            else:
                bad.append("%s: not in the documents: %s" % (page, q))
        if not found:
            bad.append("%s: quotes no sentence of the documents" % page)
    for path, q in source_quotes():
        pieces = [p for p in q.split("……") if squeeze(p)]
        if all(squeeze(p) in documents for p in pieces):
            rows.append("output\t%s" % q)
        else:
            bad.append("%s: 原文： but not in the documents: %s" % (path, q))
    with open(os.path.join(HERE, "fixtures", "article_quotes.txt"), "w", encoding="utf-8") as f:
        f.write("# made by tests/article_quotes.py: PAGE<TAB>QUOTE, each verbatim in the documents\n")
        f.write("\n".join(rows) + "\n")
    for line in bad:
        print(line)
    print("%d quotes on %d pages; %d problems" % (len(rows), len(pages), len(bad)))
    sys.exit(1 if bad else 0)


main()
