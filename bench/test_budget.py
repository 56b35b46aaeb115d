#!/usr/bin/python3
"""The test budget: how long a fresh clone's `make test` takes, the build's share and the slowest
tests. Clones the repository (its committed HEAD) next to it, so that ../shared resolves as for
the checkout, and runs there, with an empty ccache (as a CI machine's first build):

    make deps; make build (configure and compile, timed); make test (ctest only, timed)

then writes the <!-- test-budget:begin --> section of docs/benchmarks.md: the machine, the
commit, the build's and the tests' wall and CPU time, and the 15 slowest tests. About 25-45
minutes on 2 cores. `--from-build DIR` only reads the test times of a build tree's last ctest
run (Testing/Temporary/LastTest.log), to look at them without a new run.

Usage: bench/test_budget.py [--doc docs/benchmarks.md] [--no-doc] [--keep] [--from-build DIR]
"""
import argparse
import datetime
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from benchdoc import machine, write_section

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def timed(cmd, cwd, env, log):
    """Runs `cmd`, appending its output to `log`; (wall s, CPU s of its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if rc != 0:
        sys.exit(f"test_budget: {' '.join(cmd)} failed ({rc}); see {log}")
    return wall, cpu


def test_times(build):
    """{test name: seconds} from the build tree's last ctest run."""
    log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    times, name = {}, None
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r'"(.+)" start time:', line)
            if m:
                name = m.group(1)
            m = re.match(r'"(.+)" time elapsed: (\d+):(\d+):(\d+)', line)
            if m:
                h, mi, s = (int(x) for x in m.group(2, 3, 4))
                times[m.group(1)] = h * 3600 + mi * 60 + s
    return times


def clock(s):
    return f"{int(s) // 60}:{int(s) % 60:02d}"


def section(commit, build, tests, times):
    total = build[0] + tests[0]
    rows = sorted(times.items(), key=lambda kv: -kv[1])[:15]
    lines = [
        "<!-- test-budget:begin -->",
        f"Measured {datetime.date.today()} by `bench/test_budget.py` on {machine()}, commit "
        f"{commit}: a fresh clone with an empty ccache, `make build` then `make test` (ctest "
        f"-j {os.cpu_count()}).",
        "",
        "| step | wall | CPU | share of the wall |",
        "|---|---|---|---|",
        f"| configure and build | {clock(build[0])} | {clock(build[1])} | "
        f"{100 * build[0] / total:.0f}% |",
        f"| ctest ({len(times)} tests) | {clock(tests[0])} | {clock(tests[1])} | "
        f"{100 * tests[0] / total:.0f}% |",
        f"| **make test** | **{clock(total)}** | {clock(build[1] + tests[1])} | |",
        "",
        "The 15 slowest tests (wall seconds, each beside the others that ctest runs at once):",
        "",
        "| test | seconds |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {sec} |" for name, sec in rows]
    lines.append("<!-- test-budget:end -->")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its build")
    ap.add_argument("--from-build", help="only list the test times of this build tree")
    args = ap.parse_args()
    if args.from_build:
        for name, sec in sorted(test_times(args.from_build).items(), key=lambda kv: -kv[1])[:30]:
            print(f"{sec:6d}  {name}")
        return 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    clone = os.path.join(os.path.dirname(ROOT), f"tune-test-budget-{commit}")
    shutil.rmtree(clone, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", ROOT, clone], check=True)
    cache = tempfile.mkdtemp(prefix="tune-test-budget-ccache-")
    env = dict(os.environ, CCACHE_DIR=cache)
    log = os.path.join(clone, "test-budget.log")
    print(f"test_budget: {clone} (log: {log})", file=sys.stderr)
    try:
        timed(["make", "deps"], clone, env, log)
        build = timed(["make", "build", "CMAKE_FLAGS=-DTUNE_WERROR=ON"], clone, env, log)
        tests = timed(["make", "test", "CMAKE_FLAGS=-DTUNE_WERROR=ON"], clone, env, log)
        text = section(commit, build, tests, test_times(os.path.join(clone, "build")))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if not args.keep:  # a failed run keeps the clone, for its log
        shutil.rmtree(clone, ignore_errors=True)
    print(text)
    if not args.no_doc:
        write_section(args.doc, "test-budget", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
