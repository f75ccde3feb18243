#!/usr/bin/env python3
"""Extract plain English text from Debian documentation packages into a training corpus.

Sources (all DFSG-free; installed with apt by extract_data.sh):
  linux-doc            Documentation/**/*.rst.gz       (GPL-2)
  python3.11-doc       html/**/*.html                  (PSF License)
  debian-reference-en  /usr/share/debian-reference/*.en.html (GPL-2+)
  dict-gcide           /usr/share/dictd/gcide.dict.dz  (GPL-3+)

Output (in --out): train.txt, valid.txt, manifest.json (package names + versions, licences, byte
counts, the split rule). A document goes to validation iff sha1(its source path) mod 50 == 0, so
the split is deterministic and no validation document is ever seen in training. Documents are
written in sorted path order; each document ends with two blank lines
("\\n\\n\\n" occurs nowhere else: tidy() collapses longer runs to one blank line).
"""
import argparse
import glob
import gzip
import hashlib
import html.parser
import json
import os
import re
import subprocess
import sys

PACKAGES = {
    "linux-doc": "GPL-2.0-only (Linux kernel documentation)",
    "python3.11-doc": "PSF-2.0 (Python documentation)",
    "debian-reference-en": "GPL-2.0-or-later (Debian Reference)",
    "dict-gcide": "GPL-3.0-or-later (GNU Collaborative International Dictionary of English)",
}

# Text per package (MB): the corpus stays modest (~60 MB) and mixed (kernel docs would fill it alone).
CAPS_MB = {"linux-doc": 30, "python3.11-doc": 20, "debian-reference-en": 10, "dict-gcide": 6}

BLOCK = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "tr", "table",
         "section", "dt", "dd", "dl", "blockquote", "title", "article"}
SKIP = {"script", "style", "head", "nav"}


class TextExtractor(html.parser.HTMLParser):
    """Text of an HTML page: only the main content (Sphinx role="main") when the page marks it."""

    def __init__(self, has_main):
        super().__init__(convert_charrefs=True)
        self.has_main = has_main
        self.main_depth = 0  # > 0 while inside the role="main" element
        self.main_tag = None
        self.skip = 0
        self.pre = 0
        self.parts = []

    def capturing(self):
        return (not self.has_main or self.main_depth > 0) and self.skip == 0

    def handle_starttag(self, tag, attrs):
        if tag in SKIP:
            self.skip += 1
        if self.main_depth:
            if tag == self.main_tag:
                self.main_depth += 1
        elif self.has_main and dict(attrs).get("role") == "main":
            self.main_tag, self.main_depth = tag, 1
        if tag == "pre":
            self.pre += 1
        if tag in BLOCK and self.capturing():
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in SKIP and self.skip:
            self.skip -= 1
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in BLOCK and self.capturing():
            self.parts.append("\n")
        if self.main_depth and tag == self.main_tag:
            self.main_depth -= 1

    def handle_data(self, data):
        if not self.capturing():
            return
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_to_text(raw):
    ex = TextExtractor(has_main='role="main"' in raw)
    ex.feed(raw)
    ex.close()
    return tidy("".join(ex.parts))


def tidy(text):
    text = text.replace("\r", "").replace("\u00b6", "")  # Sphinx pilcrow anchors
    lines = [l.rstrip() for l in text.split("\n")]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def rst_to_text(raw):
    # Keep reStructuredText as is, minus directive noise and heading underlines.
    lines = []
    for l in raw.replace("\r", "").split("\n"):
        s = l.strip()
        if s and len(s) >= 3 and len(set(s)) == 1 and s[0] in "=-~^*#+`'\".":
            continue
        if s.startswith(".. SPDX") or s.startswith(".. _") or s.startswith(".. include::"):
            continue
        lines.append(l.rstrip())
    return tidy("\n".join(lines))


def gcide_docs(path, max_bytes):
    """The dictionary, de-marked-up, cut into ~64 KB documents at entry boundaries."""
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        raw = f.read()
    raw = re.sub(r"<[^>]{0,80}>", "", raw)  # GCIDE tags: <hw>, <pos>, <def>, ...
    raw = re.sub(r"[ \t]+", " ", raw)
    out, cur, size, n = [], [], 0, 0
    for entry in raw.split("\n\n"):
        cur.append(entry.strip())
        size += len(entry)
        if size > 65536:
            out.append((f"gcide#{n}", tidy("\n\n".join(cur))))
            n, cur, size = n + 1, [], 0
            if sum(len(t) for _, t in out) > max_bytes:
                break
    return out


def version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def documents(args, size):
    """(package, source id, text) in a fixed order; each package stops at its cap (MB, in
    CAPS_MB) of text, read from size[package], so that no single source dominates."""
    for path in sorted(glob.glob("/usr/share/doc/linux-doc/Documentation/**/*.rst.gz", recursive=True)):
        if "/translations/" in path:
            continue  # English only
        if size["linux-doc"] > CAPS_MB["linux-doc"] << 20:
            break
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            yield "linux-doc", path, rst_to_text(f.read())
    for path in sorted(glob.glob("/usr/share/doc/python3.11/html/**/*.html", recursive=True)):
        if "/_static/" in path or path.endswith(("genindex.html", "search.html")) or "genindex-" in path:
            continue
        if size["python3.11-doc"] > CAPS_MB["python3.11-doc"] << 20:
            break
        with open(path, encoding="utf-8", errors="replace") as f:
            yield "python3.11-doc", path, html_to_text(f.read())
    for path in sorted(glob.glob("/usr/share/debian-reference/*.en.html")):
        with open(path, encoding="utf-8", errors="replace") as f:
            yield "debian-reference-en", path, html_to_text(f.read())
    for name, text in gcide_docs("/usr/share/dictd/gcide.dict.dz", CAPS_MB["dict-gcide"] << 20):
        yield "dict-gcide", name, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    stats = {p: {"docs": 0, "train_bytes": 0, "valid_bytes": 0} for p in PACKAGES}
    size = {p: 0 for p in PACKAGES}
    total = 0
    with open(os.path.join(args.out, "train.txt"), "w", encoding="utf-8") as tr, \
         open(os.path.join(args.out, "valid.txt"), "w", encoding="utf-8") as va:
        for pkg, src, text in documents(args, size):
            if len(text) < 200:
                continue
            data = text + "\n\n"  # documents end with two blank lines (text ends with \\n)
            valid = int(hashlib.sha1(src.encode()).hexdigest(), 16) % 50 == 0
            (va if valid else tr).write(data)
            n = len(data.encode("utf-8"))
            stats[pkg]["docs"] += 1
            stats[pkg]["valid_bytes" if valid else "train_bytes"] += n
            size[pkg] += n
            total += n
    manifest = {
        "packages": [{"name": p, "version": version(p), "licence": l, **stats[p]} for p, l in PACKAGES.items()],
        "split": "validation iff int(sha1(source path), 16) % 50 == 0; documents in sorted path order",
        "caps_mb": CAPS_MB,
        "total_bytes": total,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
    json.dump(manifest, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
