#!/usr/bin/env python3
"""Runs attnres as a script would and checks every machine-readable output against its JSON
Schema in docs/schema/ (docs/json.md):

  check_outputs.py ATTNRES REPO WORKDIR

- every command x --format json (and the JSON files sweep --out, forward --trace and report
  write, every shipped scenario's report.json included) validates against the schema its
  "schema" tag names, integers must be JSON integers (9, never 9.0);
- keys are snake_case (metric keys: group.name), a key that names a unit (_bytes, _seconds,
  _fraction, _flop, _per_second, ...) holds numbers, and no string holds a bare number ("1512");
- every CSV (--format csv, --table, the report's tables/*.csv, sweep NAME.csv) reads with
  csv.DictReader into rows of the header's width, with unique keys and no units inside values;
- for every cost metric (attnres metrics --format json), cost, sweep, pipeline and report.json
  give the same value under the same key.
Exit status 0 when all holds; otherwise every problem is printed and the status is 1.
"""
import csv
import io
import json
import math
import os
import re
import subprocess
import sys

import jsonschema

ATTNRES, REPO, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
SCHEMAS = os.path.join(REPO, "docs", "schema")
problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def load_schemas():
    store = {}
    for name in os.listdir(SCHEMAS):
        if name.endswith(".schema.json"):
            with open(os.path.join(SCHEMAS, name), encoding="utf-8") as f:
                store[name] = json.load(f)
    return store


STORE = load_schemas()
# Strict integers: 9.0 is a number, not an integer (json.loads keeps the difference).
checker = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
    "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=checker)

KEY = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
UNIT_KEY = re.compile(r"(_bytes|_seconds|_fraction|_flop|_per_second|_per_token|_per_sublayer)$")
BARE_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")
# Objects keyed by names rather than by fixed keys (scheme names, table ids).
NAME_KEYED = {"schemes", "tables"}
# Strings that are text even when they look like a number.
TEXT_KEYS = {"measured_text", "scenario_text", "ranks", "version", "text", "formula"}


def walk(where, value, key=None):
    if isinstance(value, dict):
        for k, v in value.items():
            if key not in NAME_KEYED and not KEY.match(k):
                problem(where, f"key {k!r} is not snake_case")
            walk(f"{where}.{k}", v, k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            walk(f"{where}[{i}]", v, key)
    elif isinstance(value, str):
        if key not in TEXT_KEYS and BARE_NUMBER.match(value.strip()):
            problem(where, f"a number written as a string: {value!r}")
    if key and UNIT_KEY.search(key) and not isinstance(value, (dict, list)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problem(where, f"{key} names a unit but holds {value!r}")


def check_json(where, text):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        problem(where, f"not JSON: {error}")
        return None
    tag = doc.get("schema") if isinstance(doc, dict) else None
    if not isinstance(tag, dict) or "name" not in tag:
        problem(where, "no schema tag")
        return doc
    name = tag["name"].removeprefix("attnres.") + ".schema.json"
    if name not in STORE:
        problem(where, f"no schema file docs/schema/{name}")
        return doc
    resolver = jsonschema.RefResolver(base_uri="", referrer=STORE[name], store=STORE)
    for error in Validator(STORE[name], resolver=resolver).iter_errors(doc):
        path = "/".join(str(p) for p in error.absolute_path)
        problem(where, f"{name} at /{path}: {error.message[:300]}")
    walk(where, doc)
    return doc


UNIT_IN_VALUE = re.compile(r"^[-+]?\d[\d.eE+-]*\s*(%|us|ms|s|MB|GB|GiB|B)$")


def check_csv(where, text):
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        problem(where, "empty CSV")
        return []
    header = rows[0]
    if len(set(header)) != len(header):
        problem(where, f"repeated keys in the header {header}")
    for k in header:
        if not KEY.match(k):
            problem(where, f"header key {k!r} is not snake_case")
    for i, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            problem(where, f"line {i} has {len(row)} cells for {len(header)} keys")
        for cell in row:
            if UNIT_IN_VALUE.match(cell.strip()):
                problem(where, f"line {i}: a unit inside a value: {cell!r}")
    return list(csv.DictReader(io.StringIO(text)))


def run(args, expect=0):
    result = subprocess.run([ATTNRES] + args, capture_output=True, text=True, cwd=WORK)
    if result.returncode != expect:
        problem(" ".join(args), f"exit status {result.returncode}: {result.stderr[:400]}")
    return result.stdout


MODEL = ["--layers", "24", "--blocks", "6", "--d-model", "1024"]
PIPE = ["--layers", "16", "--block-size", "4", "--d-model", "1024", "--pp", "4", "--vpp", "2",
        "--microbatches", "8"]
JSON_RUNS = [
    ["cost"] + MODEL,
    ["cost"] + MODEL + ["--pp", "4", "--vpp", "2"],
    ["cost"] + MODEL + ["--scheme", "block", "--compare", "full", "--compare", "mhc"],
    ["cost"] + MODEL + ["--scheme", "all"],
    ["strategies"] + MODEL,
    ["strategies"] + MODEL + ["--scheme", "block:query_source=input", "--calls", "stack"],
    ["strategies"] + MODEL + ["--mode", "full", "--hardware", "gb300"],
    ["layout"] + MODEL + ["--pp", "4", "--vpp", "2"],
    ["layout", "--sublayers", "16", "--block-sizes", "6,6,4", "--d-model", "64"],
    ["recompute"] + MODEL + ["--pp", "4"],
    ["calibrate"],
    ["calibrate", "--measure", "--quick"],
    ["scaling"],
    ["scaling", "--target-loss", "1.8"],
    ["validate"],
    ["pipeline"] + PIPE + ["--mode", "standard", "--margin", "4", "--reserve", "2"],
    ["metrics"],
    ["pipeline"] + PIPE,
    ["pipeline"] + PIPE + ["--experts", "8", "--active-experts", "2", "--expert-ffn", "512",
                          "--hardware", "b200", "--link", "intra-node", "--overlap", "off"],
    ["sweep", "--d-model", "1024", "--layers", "24", "--blocks", "6", "--x", "blocks", "--values", "divisors",
     "--metric", "io_elements_per_sublayer.block_two_phase",
     "--metric", "io_elements_per_sublayer.full_two_phase"],
    ["pipeline"] + PIPE + ["--stage-layers", "1,2,2,3,3,2,2,1", "--tp", "2", "--strategy", "arena",
                          "--overlap-comm", "none"],
    ["plan"] + PIPE + ["--max-overhead", "5", "--try-tp", "1,2", "--try-strategy", "stack,fused_two_phase"],
    ["plan"] + PIPE + ["--try-blocks", "1,3", "--try-hardware", "h100,b200", "--gpus", "16",
                       "--max-pipeline-gb", "1"],
    ["sweep"] + MODEL + ["--x", "hardware", "--values", "h100,b200", "--y", "strategy",
                         "--y-values", "arena,fused_two_phase",
                         "--metric", "time.prefill_overhead_block_two_phase"],
    ["memory"] + MODEL + ["--pp", "4", "--tp", "4", "--dp", "2", "--zero", "1"],
    ["memory"] + MODEL + ["--attention", "mla", "--heads", "8", "--head-dim", "128", "--experts", "16",
                          "--active-experts", "2", "--expert-ffn", "512", "--ep", "2", "--dp", "2",
                          "--workload", "inference", "--capacity", "24"],
]
CSV_RUNS = [
    ["cost"] + MODEL,
    ["cost"] + MODEL + ["--scheme", "all"],
    ["strategies"] + MODEL + ["--table", "strategies_block"],
    ["strategies"] + MODEL + ["--table", "decode_block"],
    ["strategies"] + MODEL + ["--calls", "arena", "--table", "calls_arena"],
    ["layout"] + MODEL + ["--pp", "4", "--table", "layout"],
    ["layout"] + MODEL + ["--pp", "4", "--table", "boundaries"],
    ["recompute"] + MODEL + ["--pp", "4"],
    ["calibrate"],
    ["calibrate", "--measure", "--quick"],
    ["scaling"],
    ["validate", "--table", "validation_runs"],
    ["sweep", "--d-model", "1024", "--layers", "24", "--blocks", "6", "--x", "blocks", "--values", "divisors",
     "--metric", "io_elements_per_sublayer.block_two_phase"],
    ["memory"] + MODEL + ["--pp", "4", "--table", "memory_per_rank"],
    ["plan"] + PIPE + ["--try-tp", "1,2", "--try-hardware", "h100,b200"],
]


def main():
    os.makedirs(WORK, exist_ok=True)
    outputs = {}
    for args in JSON_RUNS:
        outputs[" ".join(args)] = check_json(" ".join(args), run(args + ["--format", "json"]))
    for args in CSV_RUNS:
        check_csv(" ".join(args) + " --format csv", run(args + ["--format", "csv"]))
    # Errors under --format json are JSON too (attnres.error), the words on stderr.
    for args, status in ((["cost", "--layers", "24", "--d-model", "1024"], 2),
                         (["strategies"] + MODEL + ["--calls", "stak"], 2),
                         (["calibrate", "--table", os.path.join(WORK, "missing.toml")], 1)):
        doc = check_json(" ".join(args) + " (error)", run(args + ["--format", "json"], expect=status))
        if doc and doc.get("error", {}).get("exit_status") != status:
            problem(" ".join(args), f"error object says exit status {doc.get('error')}")
    # Several tables and no --table: refused, exit 2, nothing on stdout.
    refused = subprocess.run([ATTNRES, "strategies"] + MODEL + ["--format", "csv"],
                             capture_output=True, text=True)
    if refused.returncode != 2 or refused.stdout or "--table" not in refused.stderr:
        problem("strategies --format csv", f"not refused as expected: {refused.returncode} "
                f"{refused.stdout[:80]!r} {refused.stderr[:200]!r}")

    # The engine commands on a tiny model: train, bench (forward and train), forward --trace, mask,
    # read.
    model = os.path.join(WORK, "tiny-model")
    data = os.path.join(WORK, "tiny.txt")
    with open(data, "w", encoding="utf-8") as f:
        f.write("Attention residuals replace the fixed residual sum. " * 80)
    run(["init-model", "--layers", "2", "--d-model", "16", "--heads", "2", "--ffn", "32",
         "--vocab", "256", "--mode", "block", "--block-size", "2", "--out", model, "--force"])
    trained = os.path.join(WORK, "tiny-trained")
    check_json("train", run(["train", "--model", model, "--data", data, "--steps", "2", "--seq",
                             "16", "--batch", "2", "--eval-every", "1", "--out", trained,
                             "--force", "--format", "json"]))
    check_json("bench forward", run(["bench", "forward", "--model", model, "--seq", "16",
                                     "--repeat", "1", "--bandwidth", "off", "--format", "json"]))
    check_json("bench train", run(["bench", "train", "--model", model, "--seq", "16", "--batch",
                                   "2", "--steps", "2", "--format", "json"]))
    check_json("bench train --versus", run(["bench", "train", "--model", model, "--seq", "16",
                                            "--batch", "1", "--steps", "1", "--warmup", "0",
                                            "--precision", "bf16", "--versus", "f32",
                                            "--format", "json"]))
    check_json("bench forward --versus", run(["bench", "forward", "--model", model, "--seq", "16",
                                              "--repeat", "1", "--bandwidth", "off",
                                              "--precision", "bf16", "--versus", "f64",
                                              "--format", "json"]))
    trace = os.path.join(WORK, "trace.json")
    run(["forward", "--model", model, "--tokens", "1 2 3 4", "--trace", trace])
    if os.path.exists(trace):
        check_json(trace, open(trace, encoding="utf-8").read())
    else:
        problem(trace, "not written")
    check_json("mask", run(["mask", "--model", trained, "--data", data, "--drop", "embedding",
                            "--seq", "16", "--windows", "2", "--random", "2", "--format", "json"]))
    # One read step by step: a Block read with a partial sum, the first read (an empty phase 2,
    # its max written as null), a block's first read with the zero placeholder, and the standard
    # residual.
    for extra in (["--read", "3"], ["--read", "0"], ["--read", "2", "--zero-placeholder"],
                  ["--sublayer", "2", "--mode", "standard"]):
        check_json("read " + " ".join(extra),
                   run(["read", "--model", model, "--tokens", "1 2 3 4", "--token", "2"] + extra +
                       ["--format", "json"]))

    # A Kimi K3 checkpoint made outside the lab (tests/interop): static, and with routing
    # statistics over a text, also written by --out; inspect --format csv.
    k3 = os.path.join(REPO, "tests", "interop", "fixtures", "k3_qwen3_bf16_sharded")
    check_json("inspect", run(["inspect", k3, "--format", "json"]))
    inspect_dir = os.path.join(WORK, "inspect")
    check_json("inspect --text", run(["inspect", k3, "--text", os.path.join(REPO, "README.md"),
                                      "--max-tokens", "64", "--format", "json", "--out",
                                      inspect_dir, "--force"]))
    path = os.path.join(inspect_dir, "inspect.json")
    if os.path.exists(path):
        check_json(path, open(path, encoding="utf-8").read())
    else:
        problem(path, "not written")
    check_csv("inspect --format csv", run(["inspect", k3, "--tokens", "1 2 3", "--format", "csv"]))

    # The JSON files commands write.
    # animate's frames.json: the query-std sweep on the random lesson model, the block-size sweep
    # on the tiny model.
    for name, args in (("animate-query-std", ["--sweep", "query-std", "--frames", "3"]),
                       ("animate-block-size", ["--sweep", "block-size", "--model", model,
                                               "--tokens", "1 2 3 4"])):
        animate_dir = os.path.join(WORK, name)
        run(["animate"] + args + ["--out", animate_dir, "--force"])
        path = os.path.join(animate_dir, "frames.json")
        if os.path.exists(path):
            check_json(path, open(path, encoding="utf-8").read())
        else:
            problem(path, "not written")
    sweep_dir = os.path.join(WORK, "sweep-out")
    run(["sweep", "--scenario", os.path.join(REPO, "scenarios", "paper-overhead-claims.toml"),
         "--x", "microbatches", "--values", "8,16", "--metric", "pipeline.iteration_seconds",
         "--name", "pp", "--out", sweep_dir, "--force"])
    for name in ("pp.json",):
        path = os.path.join(sweep_dir, name)
        if os.path.exists(path):
            doc = check_json(path, open(path, encoding="utf-8").read())
            if doc and "hardware" not in doc.get("inputs", {}):
                problem(path, "a scenario sweep's inputs lack the hardware")
        else:
            problem(path, "not written")
    if os.path.exists(os.path.join(sweep_dir, "pp.csv")):
        check_csv("pp.csv", open(os.path.join(sweep_dir, "pp.csv"), encoding="utf-8").read())

    # Every shipped scenario's report.json and tables/*.csv.
    reports = {}
    scenarios = sorted(f for f in os.listdir(os.path.join(REPO, "scenarios")) if f.endswith(".toml"))
    # The block-size study trains 35 models at L = 32: its report has the shape of the main job's
    # and the tiny Table 4's training sections (checked here) and ShippedScenarios runs it.
    scenarios = [s for s in scenarios if s != "block-size-study.toml"]
    only = os.environ.get("ATTNRES_SCHEMA_SCENARIOS")
    if only:
        scenarios = [s for s in scenarios if s.removesuffix(".toml") in only.split(",")]
    for scenario in scenarios:
        out = os.path.join(WORK, "reports", scenario.removesuffix(".toml"))
        source = os.path.join(REPO, "scenarios", scenario)
        args = ["report", source, "--out", out, "--force"]
        # Scenarios that train tiny models are checked after a step or three (the shape of the
        # output does not depend on how long they train; a test never trains for minutes).
        if "\n[train]" in open(source, encoding="utf-8").read():
            args += ["--train-steps", "1" if scenario == "table4-tiny.toml" else "3"]
        run(args)
        path = os.path.join(out, "report.json")
        if not os.path.exists(path):
            problem(path, "not written")
            continue
        reports[scenario] = check_json(path, open(path, encoding="utf-8").read())
        for table_id, table in (reports[scenario] or {}).get("tables", {}).items():
            if table.get("typed_from_display"):
                problem(path, f"table {table_id} is typed from its displayed text, not built typed")
        tables = os.path.join(out, "tables")
        for name in sorted(os.listdir(tables)) if os.path.isdir(tables) else []:
            check_csv(os.path.join(tables, name), open(os.path.join(tables, name), encoding="utf-8").read())

    check_same_values(outputs, reports)
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s) in {len(JSON_RUNS)} JSON runs, {len(CSV_RUNS)} CSV runs, "
          f"{len(reports)} reports")
    return 1 if problems else 0


def at(doc, key):
    # group.name, or group.sub.name (memory.per_rank.total_bytes): one object per dot
    value = doc
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def same(a, b):
    if a is None or b is None:
        return a is b
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=1e-15))


def check_same_values(outputs, reports):
    """Every metric under one key: cost and sweep at the same setting, pipeline against
    report.json (pipeline-cache.toml) and its own cost metrics."""
    metrics = outputs.get("metrics")
    if not metrics:
        return
    cost = outputs.get("cost " + " ".join(MODEL))
    keys = [m["key"] for m in metrics["metrics"] if m["needs"] == "model"]
    args = ["sweep"] + MODEL + ["--x", "tokens", "--values", "4096"]
    by_unit = {}
    for m in metrics["metrics"]:
        if m["needs"] == "model":
            by_unit.setdefault(m["unit"], []).append(m["key"])
    for unit, group in by_unit.items():
        text = run(args + sum((["--metric", k] for k in group), []) + ["--format", "json"])
        sweep = json.loads(text) if text else {"points": [{}]}
        point = sweep["points"][0] if sweep.get("points") else {}
        for key in group:
            if cost is not None and not same(at(cost, key), point.get(key)):
                problem(key, f"cost gives {at(cost, key)!r}, sweep {point.get(key)!r}")
    for key in keys:
        if cost is not None and at(cost, key) is None:
            problem(key, "attnres metrics lists it but cost --format json has no value there")
    for scenario, report in reports.items():
        if report and "io_elements_per_sublayer" in report:
            for key in keys:
                if at(report, key) is None:
                    problem(scenario, f"report.json has no value at metric key {key}")
    pipeline = outputs.get("pipeline " + " ".join(PIPE))
    if pipeline:
        for m in metrics["metrics"]:
            if at(pipeline, m["key"]) is None:
                problem("pipeline --format json", f"no value at metric key {m['key']}")


if __name__ == "__main__":
    sys.exit(main())
