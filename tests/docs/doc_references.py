#!/usr/bin/env python3
"""The project explains itself: no file points outside the repository, and every section cited
as `docs/NAME.md §X.Y` exists.

Usage: doc_references.py REPO_ROOT

Scans the files git tracks (or, outside a git checkout, every file under REPO_ROOT except build
and output folders) and fails, listing file:line for each problem, when
  1. a file refers to a path or document outside the repository: the private "shared" folder one
     level up or under /work, the spec's file name (SPEC with the .md extension), `SPEC §…` or the
     bare word SPEC used as a document name (the CLI's `--scheme SPEC` / `--compare SPEC`
     metavariable is allowed) — OUTSIDE_PATTERNS below;
  2. a citation `docs/NAME.md §X.Y` (also `NAME.md §X.Y`, `[NAME.md](NAME.md) §X.Y`, ranges
     `§2.2–2.3` and lists `§2.2, §2.4`) names a doc that does not exist or a section that is not a
     numbered heading (`## 3.3 Title`) of that doc. A bare `§X.Y` with no doc name before it on its
     line means docs/math.md, the project's convention (docs/math.md says so);
  3. docs/math.md numbers two headings alike.
"""
import os
import re
import subprocess
import sys

# Left out of the scan, with the reason:
# (The training corpus resources/data/lab-corpus.txt is scanned like any other file: its snapshot
# of older project docs cites docs/math.md, and the shipped models were retrained on it.)
EXCLUDED_FILES = {
    # This script: it names the patterns it looks for.
    "tests/docs/doc_references.py",
}
# None: the committed report snapshots (docs/reports/, resources/models/training-report.md) are
# scanned too; they are regenerated, not edited, so a reference there is fixed at its source.
EXCLUDED_PREFIXES = ()
# Outside a git checkout: folders that hold build outputs, not sources.
WALK_SKIP_DIRS = {".git", "build", "out", "node_modules", "__pycache__"}

OUTSIDE_PATTERNS = [
    (re.compile(r"\.\./shared"), "a path outside the repository (the shared folder one level up)"),
    (re.compile(r"/work/shared"), "a path outside the repository ('/work/shared')"),
    (re.compile(r"/work/main\b"), "an absolute path of the build machine's checkout ('/work/main')"),
    (re.compile(r"SPEC\.md"), "a document outside the repository (the spec's .md file)"),
    (re.compile(r"\bSPEC\b"), "a document outside the repository ('SPEC')"),
]
# `attnres cost --scheme SPEC [--compare SPEC]`: a metavariable, not a document.
ALLOWED_SPEC = re.compile(r"--(?:scheme|compare) SPEC\b")

SECTION = r"\d+(?:\.\d+)*"
# One cited section or range: §2.2, §2.2–2.3, §3.3-3.4 (an ASCII hyphen or an en dash).
CITE_ONE = re.compile(r"§\s?(" + SECTION + r")(?:\s?[–-]\s?(?:§\s?)?(" + SECTION + r"))?")
DOC_NAME = re.compile(r"(?:docs/)?([A-Za-z0-9_-]+)\.md")
HEADING = re.compile(r"^#{1,6}\s+(" + SECTION + r")\.?\s")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for directory, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in WALK_SKIP_DIRS and not d.startswith("build"))
            for name in sorted(names):
                files.append(os.path.relpath(os.path.join(directory, name), root))
        return files


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None  # deleted in the working tree, or not a file
    if b"\0" in data[:8192]:
        return None  # binary
    return data.decode("utf-8", "replace")


def headings(root, doc, cache):
    """Numbered headings of docs/DOC.md: {number: line}, or None when the doc does not exist."""
    if doc not in cache:
        text = read_text(os.path.join(root, "docs", doc + ".md"))
        if text is None:
            cache[doc] = None
        else:
            found = {}
            for number, line in enumerate(text.splitlines(), 1):
                m = HEADING.match(line)
                if m:
                    found.setdefault(m.group(1), []).append(number)
            cache[doc] = found
    return cache[doc]


def citations(line, default_doc):
    """(doc, first, last) for every § citation of the line: a § belongs to the nearest doc name
    before it on the line, else to default_doc."""
    names = [(m.end(), m.group(1)) for m in DOC_NAME.finditer(line)]
    for m in CITE_ONE.finditer(line):
        doc = default_doc
        for end, name in names:
            if end <= m.start():
                doc = name
        first = m.group(1)
        last = m.group(2) or first
        yield doc, first, last, m.group(0)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    problems = []
    cache = {}
    scanned = 0
    for rel in tracked_files(root):
        rel = rel.replace(os.sep, "/")
        if rel in EXCLUDED_FILES or rel.startswith(EXCLUDED_PREFIXES):
            continue
        text = read_text(os.path.join(root, rel))
        if text is None:
            continue
        scanned += 1
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{number}"
            for pattern, what in OUTSIDE_PATTERNS:
                for m in pattern.finditer(line):
                    if pattern.pattern == r"\bSPEC\b":
                        if any(a.start() <= m.start() < a.end() for a in ALLOWED_SPEC.finditer(line)):
                            continue
                        if line[m.end():m.end() + 3] == ".md":
                            continue  # reported as the spec's file name
                    problems.append(f"{where}: {what}: {line.strip()}")
            if "§" not in line:
                continue
            for doc, first, last, cited in citations(line, "math"):
                found = headings(root, doc, cache)
                if found is None:
                    problems.append(f"{where}: cites docs/{doc}.md {cited}, but docs/{doc}.md does "
                                    f"not exist: {line.strip()}")
                    continue
                for section in dict.fromkeys((first, last)):
                    if section not in found:
                        problems.append(f"{where}: cites docs/{doc}.md §{section}, which is not a "
                                        f"numbered heading ('## {section} …') of docs/{doc}.md")
    math = headings(root, "math", cache) or {}
    for section, lines in sorted(math.items()):
        if len(lines) > 1:
            problems.append(f"docs/math.md: section {section} is numbered twice (lines "
                            f"{', '.join(map(str, lines))})")
    if not math:
        problems.append("docs/math.md: no numbered headings ('## 3.3 Title') found")
    if problems:
        print(f"{len(problems)} problem(s) in {scanned} files:")
        for p in problems:
            print("  " + p)
        print("Point references at the project's own docs (docs/math.md §X.Y) and give every cited "
              "section a numbered heading there.")
        return 1
    print(f"ok: {scanned} files, no reference outside the repository, every cited section exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
