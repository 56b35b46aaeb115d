#!/usr/bin/python3
"""Lists the longest C++ functions of the tree (Universal Ctags' function tags with their end).

    scripts/longest-functions.py                  the 15 longest under src/ and apps/
    scripts/longest-functions.py -n 30 src/memory  the 30 longest under src/memory
    scripts/longest-functions.py --max 60 src/memory
                                                   exit 1 when one under src/memory is longer
                                                   than 60 lines (each is listed)

Length is counted from the line of the function's name to its closing brace, both included, as
an editor shows it. Lambdas are counted inside the function that holds them.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys


def functions(paths):
    """(lines, file, start, name) for every function definition ctags finds under `paths`."""
    ctags = shutil.which("ctags")
    if ctags is None:
        sys.exit("longest-functions.py: ctags not found (Debian: apt-get install universal-ctags)")
    cmd = [ctags, "-R", "--languages=C++", "--kinds-C++=f", "--fields=+neS", "--output-format=json",
           "-f", "-"] + paths
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or "end" not in tag:
            continue
        scope = tag.get("scope", "")
        name = tag["name"]
        if name.startswith("__anon"):  # a lambda: counted in its function
            continue
        if scope and not scope.startswith("__anon") and tag.get("scopeKind") != "namespace":
            name = scope.split("::")[-1] + "::" + name
        found.append((tag["end"] - tag["line"] + 1, tag["path"], tag["line"], name))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=["src", "apps"])
    parser.add_argument("-n", type=int, default=15, help="how many to list (default 15)")
    parser.add_argument("--max", type=int, help="fail listing every function longer than this")
    args = parser.parse_args()
    for p in args.paths:
        if not os.path.exists(p):
            sys.exit(f"longest-functions.py: {p}: no such file or directory")
    found = functions(args.paths)
    shown = [f for f in found if f[0] > args.max] if args.max is not None else found[: args.n]
    for lines, path, start, name in shown:
        print(f"{lines:5d}  {path}:{start}  {name}")
    if args.max is not None:
        print(f"{len(shown)} function(s) longer than {args.max} lines under {' '.join(args.paths)}")
        return 1 if shown else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
