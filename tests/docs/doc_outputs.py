#!/usr/bin/env python3
"""The numbers the README and docs quote from the program are what the program prints:

  doc_outputs.py ATTNRES REPO WORKDIR

Markers (HTML comments, invisible on the rendered page) say what produced a quoted block:
  <!-- output: attnres ARGS -->             the ``` block below: each line is a line of stdout
  <!-- output-file F: attnres ARGS -->      the > quoted block below: each line is a line of F
  <!-- values: attnres ARGS | k=v ... -->   JSON at key k (group.name) is v, and the paragraph
                                           below quotes v
  <!-- presets: ... -->                    the line below lists every hardware preset with its
                                           peak TFLOP/s, HBM TB/s and NVLink GB/s
Commands run in WORKDIR with the repository's scenarios/ linked there. Trailing spaces are
ignored; nothing else is. Exit 1 with every mismatch printed.
"""
import json
import os
import re
import subprocess
import sys

ATTNRES, REPO, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
DOCS = ["README.md", "docs/math.md", "docs/quality.md", "docs/validation.md"]  # and the example of docs/json.md
problems = []
cache = {}


def run(command):
    if command in cache:
        return cache[command]
    args = command.split()
    assert args[0] == "attnres", command
    result = subprocess.run([ATTNRES] + args[1:], capture_output=True, text=True, cwd=WORK)
    if result.returncode != 0:
        problems.append(f"{command}: exit status {result.returncode}: {result.stderr[:300]}")
    cache[command] = result.stdout
    return result.stdout


def block_after(lines, i, quoted):
    """The lines of the fenced (or > quoted) block that starts right after line i."""
    out = []
    j = i + 1
    if quoted:
        while j < len(lines) and lines[j].startswith(">"):
            text = lines[j][1:].removeprefix(" ")
            if text.strip():
                out.append(text)
            j += 1
        return out
    if j >= len(lines) or not lines[j].startswith("```"):
        return None
    j += 1
    while j < len(lines) and not lines[j].startswith("```"):
        if lines[j].strip():
            out.append(lines[j])
        j += 1
    return out


def check_lines(where, expected, produced):
    have = {line.rstrip() for line in produced.splitlines()}
    for line in expected:
        if line.rstrip() not in have:
            problems.append(f"{where}: the program does not print this line:\n    {line.rstrip()}")


def value_at(doc, key):
    value = doc
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def check_doc(name):
    path = os.path.join(REPO, name)
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        where = f"{name}:{i + 1}"
        line = line.strip()  # a marker may be indented inside a list item
        m = re.match(r"<!-- output: (attnres .*?) -->$", line)
        if m:
            block = block_after(lines, i, quoted=False)
            if block is None:
                problems.append(f"{where}: no ``` block right after the marker")
            else:
                check_lines(where, block, run(m.group(1)))
        m = re.match(r"<!-- output-file (\S+): (attnres .*?) -->$", line)
        if m:
            run(m.group(2))
            produced = os.path.join(WORK, m.group(1))
            block = block_after(lines, i, quoted=True)
            if not block:
                problems.append(f"{where}: no > quoted block right after the marker")
            elif not os.path.exists(produced):
                problems.append(f"{where}: {m.group(1)} was not written")
            else:
                check_lines(where, block, open(produced, encoding="utf-8").read())
        m = re.match(r"<!-- values: (attnres .*?) \| (.*?) -->$", line)
        if m:
            doc = json.loads(run(m.group(1)) or "{}")
            paragraph = " ".join(lines[i + 1:i + 12])
            for pair in m.group(2).split():
                key, _, expected = pair.partition("=")
                got = value_at(doc, key)
                if got is None or float(got) != float(expected):
                    problems.append(f"{where}: {key} is {got!r}, the doc says {expected}")
                if not re.search(rf"(?<![\d.]){re.escape(expected)}(?![\d.])", paragraph):
                    problems.append(f"{where}: the text below does not quote {key} = {expected}")
        m = re.match(r"<!-- measured \(the main job's report.json, training.quality, "
                     r"(\w+), within ([\d.]+)\): (.*?) -->$", line)
        if m:
            check_measured(where, m.group(1), float(m.group(2)), m.group(3), lines[i + 1:i + 6])
        m = re.match(r"<!-- masks \((\S+), history_masks: delta, random_mean, random_std\): "
                     r"(.*?) -->$", line)
        if m:
            check_masks(where, m.group(1), m.group(2), lines[i + 1:i + 14])
        if line.startswith("<!-- presets:"):
            check_presets(where, lines[i + 1] + " " + lines[i + 2])


def check_measured(where, key, tolerance, pairs, below):
    """The main job's measured numbers (with ATTNRES_DOCS_MAIN_JOB=1: it trains for a minute).
    Training is deterministic on one machine; another CPU's kernels round differently, hence
    the tolerance."""
    paragraph = " ".join(below)
    for pair in pairs.split(";"):
        scheme, _, value = pair.strip().rpartition(" ")
        shown = value.lstrip("-")
        if not re.search(rf"(?<![\d.]){re.escape(shown)}(?![\d.])", paragraph):
            problems.append(f"{where}: the text below does not quote {scheme} = {shown}")
    if os.environ.get("ATTNRES_DOCS_MAIN_JOB") != "1":
        return
    run("attnres report scenarios/block-size-tradeoff.toml --out out/main-job")
    path = os.path.join(WORK, "out", "main-job", "report.json")
    rows = json.load(open(path, encoding="utf-8"))["training"]["quality"] if os.path.exists(path) else []
    by_scheme = {row["scheme"]: row.get(key) for row in rows}
    for pair in pairs.split(";"):
        scheme, _, value = pair.strip().rpartition(" ")
        got = by_scheme.get(scheme)
        if got is None or abs(got - float(value)) > tolerance:
            problems.append(f"{where}: the main job measures {scheme} {key} = {got!r}, the README "
                            f"says {value} (within {tolerance})")


def check_masks(where, file, entries, below):
    """History-masking results quoted from a committed training report: each entry's three
    numbers match the file to two decimals and appear in the text below."""
    masks = json.load(open(os.path.join(REPO, file), encoding="utf-8"))["training"]["history_masks"]
    paragraph = " ".join(below)
    for entry in entries.split(";"):
        words = entry.split()
        scheme, drop, numbers = " ".join(words[:-4]), words[-4], [float(w) for w in words[-3:]]
        found = [m for m in masks if m["scheme"] == scheme and m["drop"] == drop]
        if not found:
            problems.append(f"{where}: {file} has no mask {scheme} {drop}")
            continue
        actual = [found[0]["delta"], found[0]["random_mean"], found[0]["random_std"]]
        for quoted, value in zip(numbers, actual):
            if abs(round(value, 2) - quoted) > 1e-9:
                problems.append(f"{where}: {scheme} {drop}: the doc says {quoted}, {file} {value:.4f}")
        for quoted in numbers:
            text = f"{quoted:.2f}"
            if text not in paragraph:
                problems.append(f"{where}: the text below does not quote {scheme} {drop} {text}")


def check_presets(where, text):
    names = run("attnres strategies --help")
    listed = re.search(r"preset \(([a-z0-9\s-]+)\)", names)  # the help may wrap the list
    presets = listed.group(1).split() if listed else []
    if not presets:
        problems.append(f"{where}: strategies --help lists no presets")
    for preset in presets:
        out = run(f"attnres strategies --layers 2 --blocks 1 --d-model 64 --hardware {preset} "
                  "--format json")
        h = json.loads(out or "{}").get("inputs", {}).get("hardware", {})
        figures = [h.get("peak_flop_per_second", 0) / 1e12,
                   h.get("hbm_bandwidth_bytes_per_second", 0) / 1e12,
                   h.get("intra_node_bandwidth_bytes_per_second", 0) / 1e9]
        m = re.search(rf"\b{preset} ([\d.]+), ([\d.]+), ([\d.]+)", text)
        if not m:
            problems.append(f"{where}: preset {preset} is not listed with its figures")
            continue
        for quoted, actual in zip(m.groups(), figures):
            if abs(float(quoted) - actual) > 1e-9 * max(1, actual):
                problems.append(f"{where}: {preset}: the doc says {quoted}, the preset {actual:g}")


def main():
    os.makedirs(WORK, exist_ok=True)
    link = os.path.join(WORK, "scenarios")
    if not os.path.exists(link):
        os.symlink(os.path.join(REPO, "scenarios"), link)
    for name in DOCS:
        check_doc(name)
    # The Python example of docs/json.md runs against this build and prints something.
    text = open(os.path.join(REPO, "docs", "json.md"), encoding="utf-8").read()
    for snippet in re.findall(r"```python\n(.*?)```", text, re.S):
        env = dict(os.environ, PATH=os.path.dirname(ATTNRES) + os.pathsep + os.environ["PATH"])
        result = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True,
                                cwd=WORK, env=env)
        if result.returncode != 0 or not result.stdout.strip():
            problems.append(f"docs/json.md: the Python example fails: {result.stderr[-400:]}")
    # Every preset is named wherever the docs list the presets.
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    presets = re.search(r"preset \(([a-z0-9 ]+)\)", run("attnres pipeline --help"))
    for preset in presets.group(1).split() if presets else []:
        if f"|{preset}|" not in readme and f"|{preset}|FILE" not in readme and f"{preset}|" not in readme:
            problems.append(f"README.md: the pipeline usage does not list the preset {preset}")
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in {', '.join(DOCS)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
