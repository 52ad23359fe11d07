#!/usr/bin/env python3
"""Every shipped scenario opened by attnres-lab --dump-state computes what `attnres report` computes.

usage: check_dump_state.py ATTNRES_LAB ATTNRES SCENARIOS_DIR

The dump validates against docs/schema/lab_state.schema.json (when python3-jsonschema is there).
For each scenario: the GUI's state of the cost explorer and the Pipeline view (model, hardware,
pipeline settings) equals the report's "inputs"; where the report has the section, the Memory
tab's analytic bound (total, capacity, verdict), the simulated step (seconds, overhead) and the
Decision tab's recommendation equal the report's. Both come from the same engine calls on the same
machine, so the figures must agree to the bit (exact comparison). Exit 0, or 1 with every
difference listed.
"""
import json
import tomllib
import pathlib
import subprocess
import sys
import tempfile

try:  # the schema check needs Debian's python3-jsonschema; the comparisons do not
    import jsonschema
except ImportError:
    jsonschema = None


def validator(repo: pathlib.Path):
    if jsonschema is None:
        return None
    store = {p.name: json.loads(p.read_text()) for p in (repo / "docs" / "schema").glob("*.json")}
    resolver = jsonschema.RefResolver.from_schema(store["lab_state.schema.json"], store=store)
    return jsonschema.Draft202012Validator(store["lab_state.schema.json"], resolver=resolver)


def main() -> int:
    lab, cli, scenarios = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    problems, checked = [], 0
    schema = validator(scenarios.parent)
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in sorted(scenarios.glob("*.toml")):
            name = scenario.stem
            dump_path = pathlib.Path(tmp) / f"{name}.json"
            out = pathlib.Path(tmp) / f"{name}-report"
            run = subprocess.run([lab, "--scenario", str(scenario), "--dump-state", str(dump_path)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                problems.append(f"{name}: --dump-state exited {run.returncode}: {run.stderr}")
                continue
            # Training runs cut to one step: the cost figures do not depend on them.
            train = ["--train-steps", "1"] if "\n[train]" in scenario.read_text() else []
            run = subprocess.run([cli, "report", str(scenario), "--out", str(out)] + train,
                                 capture_output=True, text=True)
            if run.returncode != 0:
                problems.append(f"{name}: attnres report exited {run.returncode}: {run.stderr}")
                continue
            dump = json.loads(dump_path.read_text())
            report = json.loads((out / "report.json").read_text())
            if dump["schema"] != {"name": "attnres.lab_state", "version": 1}:
                problems.append(f"{name}: schema {dump['schema']}")
            if schema is not None:
                for error in schema.iter_errors(dump):
                    problems.append(f"{name}: lab_state.schema.json: {error.json_path}: {error.message}")
            views = dump["views"]
            inputs = report.get("provenance", {}).get("inputs", report.get("inputs", {}))

            def same(what, gui, cli_value):
                nonlocal checked
                checked += 1
                if gui != cli_value:
                    problems.append(f"{name}: {what}: GUI {gui!r} != CLI {cli_value!r}")

            # The Scaling view: the scenario's [scaling] table and the report's multipliers.
            if "scaling" in report:
                scaling = views["scaling"]
                same("scaling state", scaling["state"], inputs["scaling"])
                for scheme in ("block", "full"):
                    same(f"scaling {scheme} multiplier", scaling["results"][f"{scheme}_multiplier"],
                         report["scaling"]["compute_multiplier"][scheme])
            # The Training view: its form holds the [train] table's values (the losses need a run).
            train_table = tomllib.loads(scenario.read_text()).get("train")
            if train_table is not None:
                form = views["training"]["state"]
                for key in ("layers", "d_model", "heads", "ffn", "steps", "seq", "batch", "lr",
                            "precision"):
                    if key in train_table:
                        same(f"training {key}", form[key], train_table[key])
                if "seeds" in train_table:
                    same("training first seed", form["seed"], train_table["seeds"][0])
                    same("training seed count", form["seeds"], len(train_table["seeds"]))
            elif "training" in views:
                problems.append(f"{name}: no [train] but the training view was dumped")
            if "model" not in inputs:
                cost_views = sorted(set(views) & {"cost", "pipeline"})
                if cost_views:
                    problems.append(f"{name}: no [model] but cost views dumped: {cost_views}")
                continue

            for view in ("cost", "pipeline"):
                state = views[view]["state"]
                same(f"{view} model", state["model"], inputs["model"])
                if "hardware" in inputs:
                    same(f"{view} hardware", state["hardware"], inputs["hardware"])
                if "pipeline" in inputs:
                    same(f"{view} pipeline", state["pipeline"], inputs["pipeline"])
            results = views["cost"]["results"]
            if "hardware" in inputs:
                same("capacity", results["hardware"]["capacity_bytes"],
                     inputs["hardware"].get("memory_bytes"))
            if "memory" in report:
                gui, cli_memory = results["memory"], report["memory"]
                same("memory kind", results["memory_kind"], "analytic bound (docs/math.md §3.7)")
                for key in ("total_bytes", "capacity_bytes", "fits", "verdict", "rank"):
                    same(f"memory {key}", gui["per_rank"][key], cli_memory["per_rank"][key])
            sim = report.get("pipeline") if "step_seconds" in report.get("pipeline", {}) else None
            for view in ("cost", "pipeline"):
                step = views[view]["results"]["step"]
                if sim is not None:
                    same(f"{view} step seconds", step["step_seconds"], sim["step_seconds"])
                    same(f"{view} overhead", step["attnres_overhead_fraction"],
                         sim["attnres_overhead_fraction"])
                if "step" in report:
                    same(f"{view} step seconds (step section)", step["step_seconds"],
                         report["step"]["attnres"]["step_seconds"])
                    same(f"{view} overhead (step section)", step["attnres_overhead_fraction"],
                         report["step"]["overhead_fraction"]["step"])
            if "decision" in report:
                decision, cli_decision = results["decision"], report["decision"]
                same("decision summary", decision["summary"], cli_decision["summary"])
                index = cli_decision["recommended"]
                cli_n = cli_decision["candidates"][index]["blocks"] if index is not None else None
                gui_n = decision["recommended"]["blocks"] if decision["recommended"] else None
                same("recommended N", gui_n, cli_n)
    for problem in problems:
        print(problem)
    print(f"{checked} figures compared, {len(problems)} differences")
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
