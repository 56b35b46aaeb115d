#!/usr/bin/python3
"""Checks that every include of the tree points down: each folder of src/ and apps/ includes only
its own files and the folders (or public headers) that docs/design.md's layering table lets it.

    scripts/check-layering.py               check the tree (exit 1, listing each wrong include)
    scripts/check-layering.py --root DIR    check another checkout
    scripts/check-layering.py --graph       print the folder graph the tree has (arrows, counts)
    scripts/check-layering.py --self-test   show that a wrong include fails (a copy of the tree)

The table is the one between <!-- layering:begin --> and <!-- layering:end --> in
docs/design.md; its rows are, in floor order from the bottom:

    | `src/util/` | tune_core | `status.h`, `json.h` | |
    | `src/trial/` | tune_core | `trial.h`, ... | `src/util/` |

Folder, library, the public headers (under include/tune/; `samplers/` = every header of that
folder) whose home is that folder, and what it may include: folders (`src/util/`) or single
public headers (`memory_guard.h`). Including a public header counts as including its home folder.
A row may include only rows listed before it (the floors below it): every arrow points down. The
check also fails when a folder of src/ or apps/ or a public header has no row, when a row names
something that does not exist, and when CMakeLists.txt builds a source of a folder into another
library than the folder's row says (every file in its library's folder).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

BEGIN, END = "<!-- layering:begin -->", "<!-- layering:end -->"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
CODE = re.compile(r"`([^`]+)`")


class Layering:
    def __init__(self, rows):
        self.rows = rows  # [(folder, library, public, allowed)], bottom first
        self.folders = {r[0]: r for r in rows}
        self.home = {}  # public header (relative to include/) -> folder
        self.public_dirs = {}  # "tune/samplers/" -> folder
        for folder, _lib, public, _allowed in rows:
            for h in public:
                if h.endswith("/"):
                    self.public_dirs["tune/" + h] = folder
                else:
                    self.home["tune/" + h] = folder

    def home_of_public(self, header):
        if header in self.home:
            return self.home[header]
        for d, folder in self.public_dirs.items():
            if header.startswith(d) and "/" not in header[len(d):]:
                return folder
        return None


def read_table(design):
    text = open(design, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"check-layering.py: {design}: no {BEGIN} ... {END} table")
    body = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].startswith("`"):
            continue
        folder = CODE.findall(cells[0])[0]
        library = CODE.findall(cells[1])[0] if "`" in cells[1] else cells[1]
        public = CODE.findall(cells[2])
        allowed = CODE.findall(cells[3])
        rows.append((folder, library, public, allowed))
    if not rows:
        sys.exit(f"check-layering.py: {design}: the layering table has no rows")
    return Layering(rows)


def sources(root):
    """Every .h/.cpp under src/, apps/ and include/, relative to root."""
    found = []
    for top in ("src", "apps", "include"):
        for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
            for f in files:
                if f.endswith((".h", ".cpp")):
                    found.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(found)


def folder_of(path):
    return os.path.dirname(path) + "/"


def resolve(root, including, target):
    """The file an #include "target" in `including` names (relative to root), or None for a
    header outside the tree (a generated one, or a library's)."""
    for base in (os.path.dirname(including), "src", "include", "apps/tune"):
        p = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def includes(root, layering):
    """(from_folder, to, file, line, target) for every include that leaves its folder; `to` is a
    folder, or for a public header its home folder and the header."""
    out = []
    for path in sources(root):
        text = open(os.path.join(root, path), encoding="utf-8", errors="replace").read()
        src_folder = folder_of(path)
        if path.startswith("include/"):
            src_folder = layering.home_of_public(path[len("include/"):]) or src_folder
        for m in INCLUDE.finditer(text):
            target = resolve(root, path, m.group(1))
            if target is None:
                continue
            line = text.count("\n", 0, m.start()) + 1
            if target.startswith("include/"):
                header = target[len("include/"):]
                to = layering.home_of_public(header) or folder_of(target)
                out.append((src_folder, to, path, line, header))
            else:
                out.append((src_folder, folder_of(target), path, line, None))
    return [i for i in out if i[0] != i[1]]


def allowed(layering, src, dst, header):
    row = layering.folders.get(src)
    if row is None:
        return False
    if dst in row[3]:
        return True
    return header is not None and header[len("tune/"):] in row[3]


def cmake_libraries(root):
    """source path -> the targets CMakeLists.txt builds it into (a library, and maybe a compile
    check beside it)."""
    text = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    built = {}
    for m in re.finditer(r"add_(?:library|executable)\((\w+)([^)]*)\)", text):
        target, body = m.group(1), m.group(2)
        for token in body.split():
            if token.endswith(".cpp") and (token.startswith("src/") or token.startswith("apps/")):
                built.setdefault(token, set()).add(target)
    return built


def check(root, layering):
    problems = []
    below = set()
    for folder, _lib, public, allowed_list in layering.rows:
        for a in allowed_list:
            if a.endswith("/") and a in layering.folders and a not in below:
                problems.append(f"docs/design.md: layering table: {folder} may include {a}, "
                                f"which is not listed before it (the rows go from the bottom floor up)")
        below.add(folder)
        if not os.path.isdir(os.path.join(root, folder)):
            problems.append(f"docs/design.md: layering table: {folder}: no such folder")
        for h in public:
            if not os.path.exists(os.path.join(root, "include/tune", h)):
                problems.append(f"docs/design.md: layering table: {folder}: public header "
                                f"include/tune/{h} does not exist")
        for a in allowed_list:
            if a.endswith("/") and a not in layering.folders:
                problems.append(f"docs/design.md: layering table: {folder} may include {a}, "
                                f"which has no row")
    seen_folders = {folder_of(p) for p in sources(root) if not p.startswith("include/")}
    for f in sorted(seen_folders - set(layering.folders)):
        problems.append(f"{f}: a folder with no row in docs/design.md's layering table")
    for p in sources(root):
        if p.startswith("include/") and layering.home_of_public(p[len("include/"):]) is None:
            problems.append(f"{p}: a public header with no home folder in docs/design.md's "
                            f"layering table")
    for src, dst, path, line, header in includes(root, layering):
        if not allowed(layering, src, dst, header):
            what = f"{header} (home {dst})" if header else dst
            problems.append(f"{path}:{line}: includes {what}; the layering table lets {src} "
                            f"include only: {', '.join(layering.folders[src][3]) or 'nothing'}"
                            if src in layering.folders else
                            f"{path}:{line}: includes {what} from {src}, which has no row")
    for source, targets in sorted(cmake_libraries(root).items()):
        row = layering.folders.get(folder_of(source))
        if row is not None and row[1] not in targets:
            problems.append(f"CMakeLists.txt: {source} is built into {', '.join(sorted(targets))}"
                            f", but its folder {row[0]} belongs to {row[1]}")
    return problems


def graph(root, layering):
    counts = {}
    for src, dst, _path, _line, _header in includes(root, layering):
        counts[(src, dst)] = counts.get((src, dst), 0) + 1
    for (src, dst), n in sorted(counts.items()):
        mark = "" if allowed(layering, src, dst, None) or src not in layering.folders else \
            "  (header-level or not allowed)"
        print(f"{src:28s} -> {dst:28s} {n:3d}{mark}")


def self_test(root):
    """A copy of the tree with one include that points up must fail, the copy itself pass."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "tree")
        for part in ("src", "apps", "include", "docs"):
            shutil.copytree(os.path.join(root, part), os.path.join(copy, part))
        shutil.copy(os.path.join(root, "CMakeLists.txt"), copy)
        me = os.path.abspath(__file__)
        ok = subprocess.run([sys.executable, me, "--root", copy], capture_output=True, text=True)
        if ok.returncode != 0:
            print("self-test: the copied tree should pass:\n" + ok.stdout + ok.stderr)
            return 1
        victim = os.path.join(copy, "src/util/text.h")
        with open(victim, "a", encoding="utf-8") as f:
            f.write('\n#include "study/study_summary.h"  // points up: must fail\n')
        bad = subprocess.run([sys.executable, me, "--root", copy], capture_output=True, text=True)
        print(bad.stdout, end="")
        if bad.returncode == 0 or "src/util/text.h" not in bad.stdout:
            print("self-test: an include from src/util/ up to src/study/ was not caught")
            return 1
        print("self-test: the wrong include above was caught (exit "
              f"{bad.returncode}); the tree without it passes")
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--graph", action="store_true")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    if args.self_test:
        return self_test(root)
    layering = read_table(os.path.join(root, "docs/design.md"))
    if args.graph:
        graph(root, layering)
        return 0
    problems = check(root, layering)
    for p in problems:
        print(p)
    n_inc = len(includes(root, layering))
    print(f"check-layering.py: {len(layering.rows)} folders, {n_inc} includes across folders, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
