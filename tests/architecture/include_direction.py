#!/usr/bin/env python3
"""Every include points down the library stack (docs/architecture.md).

The build already refuses most wrong-way includes (each library sees only the include folders of
what it links); this test also catches what the build cannot: a header of a higher layer reached
through a relative path, a library that links more than it should, a test file that includes
above its library, and the report layer's engine-free part (attnres_report, which the fuzz build
links without the engines) including an engine header.

usage: include_direction.py REPO_ROOT      exit 0: every include allowed; 1: a list of offences
The script first checks itself on a small synthetic tree with one wrong-way include, so it cannot
pass by finding nothing.
"""
import os
import re
import sys
import tempfile

# Where each library's public headers live (relative to the repository root).
INCLUDE_DIRS = {
    "base": "core/base/include/attnres",
    "model": "core/model/include/attnres",
    "cost": "core/cost/include/attnres",
    "kernels": "kernels/include/attnres",
    "engine": "engine/include/attnres",
    "report": "report/include/attnres",
}
# Headers that are generated into the build tree, by the library that owns them.
GENERATED = {"version.hpp": "base"}
# What each layer may include (itself and what it stands on). train_report is the part of the
# report layer that runs the engine.
ALLOWED = {
    "base": {"base"},
    "model": {"base", "model"},
    "cost": {"base", "cost"},
    "core_cross": {"base", "model", "cost"},
    "kernels": {"base", "model", "kernels"},
    "engine": {"base", "model", "kernels", "engine"},
    "report": {"base", "model", "cost", "report"},
    "train_report": {"base", "model", "cost", "kernels", "engine", "report", "train_report"},
    "app": {"base", "model", "cost", "kernels", "engine", "report", "train_report"},
}
# Folders (most specific first) -> the layer their files belong to. Files elsewhere (bench/,
# fuzz/, the other test folders) may include anything public.
LAYER_OF_FOLDER = [
    ("core/base/", "base"),
    ("core/model/", "model"),
    ("core/cost/", "cost"),
    ("kernels/", "kernels"),
    ("engine/", "engine"),
    ("report/", "report"),
    ("app/", "app"),
    ("tests/core/base/", "base"),
    ("tests/core/model/", "model"),
    ("tests/core/cost/", "cost"),
    ("tests/core/", "core_cross"),
    ("tests/report/", "report"),
]
TRAIN_REPORT_FILES = {"report/src/train_report.cpp", "report/src/train_statistics.cpp",
                      "report/src/train_statistics.hpp", "report/include/attnres/train_report.hpp"}
SOURCE = re.compile(r"\.(cpp|hpp|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def layer_of(path):
    if path in TRAIN_REPORT_FILES:
        return "train_report"
    for folder, layer in LAYER_OF_FOLDER:
        if path.startswith(folder):
            return layer
    return None


def header_owner(root):
    owner = dict(GENERATED)
    for library, folder in INCLUDE_DIRS.items():
        directory = os.path.join(root, folder)
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if name in owner and owner[name] != library:
                raise SystemExit(f"attnres/{name} is in two libraries: {owner[name]} and {library}")
            owner[name] = "train_report" if name == "train_report.hpp" else library
    return owner


def offences(root):
    owner = header_owner(root)
    found = []
    for directory, folders, files in os.walk(root):
        folders[:] = [f for f in folders if f not in (".git", "build", "out", "corpus")]
        for name in files:
            if not SOURCE.search(name):
                continue
            full = os.path.join(directory, name)
            path = os.path.relpath(full, root).replace(os.sep, "/")
            layer = layer_of(path)
            with open(full, encoding="utf-8", errors="replace") as source:
                text = source.read()
            for match in INCLUDE.finditer(text):
                target = match.group(1)
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path}:{line}"
                if ".." in target.split("/"):
                    # A private header reached by a relative path: it belongs to the layer of
                    # the folder it is in.
                    resolved = os.path.relpath(os.path.normpath(os.path.join(directory, target)),
                                               root).replace(os.sep, "/")
                    library = layer_of(resolved)
                    if resolved.startswith("../") or library is None:
                        found.append(f'{where}: #include "{target}" leaves the project\'s layers')
                    elif layer is not None and library not in ALLOWED[layer]:
                        found.append(f'{where}: #include "{target}" ({library}) points the wrong '
                                     f"way from the {layer} layer")
                    continue
                if not target.startswith("attnres/"):
                    continue  # a private header of the file's own folder
                header = target[len("attnres/"):]
                library = owner.get(header)
                if library is None:
                    found.append(f'{where}: #include "{target}" is no library\'s public header')
                    continue
                if layer is not None and library not in ALLOWED[layer]:
                    allowed = ", ".join(sorted(ALLOWED[layer]))
                    found.append(f'{where}: #include "{target}" ({library}) points the wrong way '
                                 f"from the {layer} layer (allowed: {allowed})")
    return found


def self_check():
    with tempfile.TemporaryDirectory() as root:
        for library, folder in INCLUDE_DIRS.items():
            os.makedirs(os.path.join(root, folder))
        open(os.path.join(root, INCLUDE_DIRS["cost"], "cost.hpp"), "w").close()
        open(os.path.join(root, INCLUDE_DIRS["model"], "forward.hpp"), "w").close()
        os.makedirs(os.path.join(root, "core/model/src"))
        with open(os.path.join(root, "core/model/src/forward.cpp"), "w") as source:
            source.write('#include "attnres/forward.hpp"\n#include "attnres/cost.hpp"\n'
                         '#include "../../../report/src/private.hpp"\n')
        os.makedirs(os.path.join(root, "report/src"))
        open(os.path.join(root, "report/src/private.hpp"), "w").close()
        found = offences(root)
        if len(found) != 2 or "forward.cpp:2" not in found[0] or "forward.cpp:3" not in found[1]:
            raise SystemExit(f"self-check failed: expected offences at forward.cpp:2 and :3, got {found}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    self_check()
    found = offences(sys.argv[1])
    for offence in found:
        print(offence)
    if found:
        print(f"{len(found)} include(s) point the wrong way (docs/architecture.md)")
        return 1
    print("every include points down the library stack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
