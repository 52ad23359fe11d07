#!/usr/bin/env python3
"""Random SIGKILLs across train, report, sweep and init-model (docs/output-safety.md).

The suite's kill tests (tests/cli/test_kill.cpp) hit every commit step once with a test hook;
this campaign kills at random wall-clock moments instead, as a power cut or the OOM killer would,
and counts what it finds after each kill:
  in commit  the kill left a commit record (it landed inside a commit's switch)
  loadable   the next command (resume / rerun) succeeded without --force
  identical  the directory then equals an uninterrupted run's (train: bit-identical weights,
             optimizer state and log)
  mixed      the directory, once looked at, held neither the old nor the new set (a defect)
  refused    the next command failed (a defect unless the message explains it)

usage: scripts/kill-campaign.py BUILD/app/cli/attnres [--kills 200] [--seed 1]
"""
import argparse
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


def user_files(directory):
    """Relative path -> bytes of the files a user sees (attnres's bookkeeping left out)."""
    files = {}
    if not directory.exists():
        return files
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if relative.startswith(".attnres") or not path.is_file():
            continue
        files[relative] = path.read_bytes()
    return files


def run(binary, args, kill_after=None):
    """Runs attnres; kills it with SIGKILL after `kill_after` seconds. True when it was killed."""
    process = subprocess.Popen([binary] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = process.communicate(timeout=kill_after)
        return False, process.returncode, err.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.communicate()
        return True, -9, ""


def train_args(data, out):
    return ["train", "--layers", "1", "--d-model", "16", "--heads", "2", "--ffn", "24", "--mode",
            "block", "--block-size", "1", "--data", str(data), "--steps", "12", "--seq", "16",
            "--batch", "2", "--eval-every", "2", "--threads", "1", "--out", str(out)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    options.binary = str(pathlib.Path(options.binary).resolve())
    rng = random.Random(options.seed)
    work = pathlib.Path(tempfile.mkdtemp(prefix="attnres-kill-"))
    data = work / "data.txt"
    data.write_text((ROOT / "resources" / "data" / "lab-corpus.txt").read_text()[:20000]
                    if (ROOT / "resources" / "data" / "lab-corpus.txt").exists()
                    else "the quick brown fox jumps over the lazy dog. " * 400)
    scenarios = ROOT / "scenarios"
    jobs = {
        "train": (None, train_args(data, work / "T")),
        "report": (["report", str(scenarios / "paper-table1.toml"), "--out", "R"],
                   ["report", str(scenarios / "pipeline-cache.toml"), "--out", "R"]),
        "sweep": (["sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x",
                   "blocks", "--values", "1,2", "--metric", "io_multiples_of_d.block_two_phase",
                   "--name", "io", "--out", "S"],
                  ["sweep", "--sublayers", "8", "--blocks", "2", "--d-model", "16", "--x",
                   "blocks", "--values", "1,2,4,8", "--metric",
                   "io_multiples_of_d.block_two_phase", "--name", "io", "--out", "S"]),
        "init-model": (["init-model", "--layers", "1", "--d-model", "8", "--heads", "2", "--ffn",
                        "8", "--vocab", "20", "--out", "M"],
                       ["init-model", "--layers", "2", "--d-model", "64", "--heads", "4",
                        "--ffn", "96", "--vocab", "256", "--mode", "full", "--out", "M"]),
    }
    counts = {name: {"kills": 0, "in_commit": 0, "loadable": 0, "identical": 0, "mixed": 0,
                     "refused": 0} for name in jobs}
    os.chdir(work)
    # Uninterrupted references and how long each command takes.
    reference, duration = {}, {}
    for name, (first, second) in jobs.items():
        start = time.monotonic()
        if name == "train":
            killed, status, err = run(options.binary, train_args(data, work / "straight"))
            reference[name] = user_files(work / "straight")
        else:
            run(options.binary, first)
            old = user_files(work / first[-1])
            shutil.copytree(work / first[-1], work / (first[-1] + ".old"))
            start = time.monotonic()
            killed, status, err = run(options.binary, second)
            reference[name] = (old, user_files(work / second[-1]))
        duration[name] = time.monotonic() - start
        if status != 0:
            sys.exit(f"{name}: the uninterrupted run failed: {err}")
    names = list(jobs)
    for kill in range(options.kills):
        name = names[kill % len(names)]
        c = counts[name]
        c["kills"] += 1
        delay = rng.uniform(0.0, duration[name] * 1.1)
        if name == "train":
            out = work / "T"
            shutil.rmtree(out, ignore_errors=True)
            killed, _, _ = run(options.binary, train_args(data, out), delay)
            c["in_commit"] += (out / ".attnres-commit.json").exists()
            # Resume (or start over when no checkpoint was switched in), killing again at random
            # half of the time: chains of kills.
            ok = True
            for _ in range(20):
                has_state = (out / "train_state.json").exists()
                args = (["train", "--data", str(data), "--resume", str(out), "--out", str(out)]
                        if has_state or (out / ".attnres-commit.json").exists()
                        else train_args(data, out))
                again = rng.random() < 0.5
                killed, status, err = run(options.binary, args,
                                          rng.uniform(0, duration[name]) if again else None)
                if not killed:
                    ok = status == 0
                    break
            if not ok:
                c["refused"] += 1
                print(f"train: refused after a kill at {delay:.2f} s: {err.strip()}")
                continue
            c["loadable"] += 1
            if user_files(out) == reference[name]:
                c["identical"] += 1
            else:
                c["mixed"] += 1
                print(f"train: not identical after a kill at {delay:.2f} s")
        else:
            first, second = jobs[name]
            out = work / second[-1]
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(work / (second[-1] + ".old"), out)
            run(options.binary, second, delay)
            c["in_commit"] += (out / ".attnres-commit.json").exists()
            # Without a commit record the directory must be exactly the old or the new set; with
            # one, the next command completes it (then it must be the new set).
            old, new = reference[name]
            if not (out / ".attnres-commit.json").exists() and user_files(out) not in (old, new):
                c["mixed"] += 1
                print(f"{name}: a kill at {delay:.2f} s left a mix without a commit record")
            killed, status, err = run(options.binary, second)
            if status != 0:
                c["refused"] += 1
                print(f"{name}: refused after a kill at {delay:.2f} s: {err.strip()}")
                continue
            c["loadable"] += 1
            if user_files(out) == new:
                c["identical"] += 1
            else:
                c["mixed"] += 1
                print(f"{name}: the rerun after a kill at {delay:.2f} s did not give the new set")
    print(f"{'command':12} {'kills':>6} {'in commit':>10} {'loadable':>9} {'identical':>10} "
          f"{'mixed':>6} {'refused':>8}")
    for name, c in counts.items():
        print(f"{name:12} {c['kills']:6} {c['in_commit']:10} {c['loadable']:9} {c['identical']:10} "
              f"{c['mixed']:6} {c['refused']:8}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if all(c["mixed"] == 0 and c["refused"] == 0 for c in counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
