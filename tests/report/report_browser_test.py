#!/usr/bin/env python3
"""`tune report` in a real browser: Debian's headless Chromium loads each page.

  report_browser_test.py TUNE_BINARY OPTUNA49_DIR OUT_DIR [--big N]

Studies: (1) tune's own study of the 'mixed' function with simulated out-of-memory trials, a
median pruner and --jobs 2; (2) a study Optuna 4.9 wrote (make_optuna_study.py) with the memory
and schedule attributes, out-of-memory trials and predicted misfits; (3) the same with N trials
(default 5000; 0 skips it). For each page: it is self-contained (no http(s) address in a src or
href, no <link>), its data blob is valid JSON, and in Chromium (address ending in #selftest,
report.js checks itself and writes the result into <pre id="selftest">) no console error,
every canvas has coloured pixels, a click on the "value" header sorts the table ascending and
a second click descending, categorical slice plots and the OOM map label their ticks, and the OOM
map has one legend. The render time is performance.now() at the end of report.js.
Screenshots go to OUT_DIR. Exit 77 (skipped) without chromium.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TUNE = os.path.abspath(sys.argv[1])
OPTUNA49 = os.path.abspath(os.environ.get("TUNE_OPTUNA49_PATH", sys.argv[2]))
OUT = os.path.abspath(sys.argv[3])
BIG = int(sys.argv[sys.argv.index("--big") + 1]) if "--big" in sys.argv else 5000
HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--mute-audio"]

MIXED = {
    "direction": "minimize",
    "sampler": {"name": "random", "seed": 5},
    "pruner": {"name": "median", "n_startup_trials": 2, "n_warmup_steps": 1},
    "search_space": {
        "model": {"type": "model", "choices": ["bert-base-uncased", "bert-large-uncased"]},
        "batch_size": {"type": "categorical", "choices": [8, 16, 32, 64]},
        "max_length": {"type": "int", "low": 128, "high": 512, "step": 128},
        "lr": {"type": "float", "low": 1e-5, "high": 1e-3, "log": True}},
    "objective": {"type": "function", "name": "mixed", "oom_threshold": 6000, "n_steps": 6}}


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=900, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise AssertionError(f"{' '.join(args)}: exit {r.returncode}")
    return r


def report(url, study, path):
    out = run([TUNE, "report", "--study-name", study, "--storage", url, "--output", path]).stdout
    print(out.strip())
    page = open(path, encoding="utf-8").read()
    offline = re.findall(r'''(?:src|href)\s*=\s*["']?https?://''', page, re.I)
    assert not offline and "<link" not in page, f"{path}: not self-contained: {offline}"
    blob = re.search(r'<script id="tune-data" type="application/json">(.*?)</script>', page, re.S)
    data = json.loads(blob.group(1))
    return data


def browse(path, shot):
    address = "file://" + path + "#selftest"
    t = time.monotonic()
    r = subprocess.run([CHROMIUM, *FLAGS, "--enable-logging=stderr", "--v=0", "--dump-dom", address],
                       capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t
    console = [l for l in r.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    assert not console, f"console messages: {console}"
    found = re.search(r'<pre id="selftest">(.*?)</pre>', r.stdout, re.S)
    assert found, f"report.js did not finish (no #selftest): {r.stderr[-2000:]}"
    result = json.loads(html.unescape(found.group(1)))
    blank = [c["id"] for c in result["charts"] if c["coloured"] == 0]
    assert not blank, f"charts drawn blank: {blank}"
    assert result["sorted"]["ascending"] and result["sorted"]["descending"], result["sorted"]
    subprocess.run([CHROMIUM, *FLAGS, "--window-size=1280,4400", "--virtual-time-budget=5000",
                    "--screenshot=" + shot, "file://" + path], capture_output=True, timeout=300)
    assert os.path.getsize(shot) > 10000, f"{shot}: no screenshot"
    print(f"  chromium: {len(result['charts'])} charts drawn ({', '.join(c['id'] for c in result['charts'])}); "
          f"table sorted by a click (first value {result['sorted']['first_ascending']:.4g} ascending, "
          f"{result['sorted']['first_descending']:.4g} descending); no console error")
    print(f"  rendered in {result['render_ms']:.0f} ms (performance.now() at the end of report.js; "
          f"{result['script_start_ms']:.0f} ms to parse the page, Chart.js and the data, then "
          f"{json.dumps(result['section_ms'])}), {wall:.1f} s for chromium to start, load and exit; "
          f"a click sorts the table in {result['sort_ms']:.0f} ms")
    print(f"  screenshot {shot}")
    return result


def check_study(url, study, name, tmp, expect):
    path = os.path.join(tmp, name + ".html")
    data = report(url, study, path)
    cats = {t["category"] for t in data["trials"]}
    assert expect <= cats, f"{name}: categories {cats}, expected {expect}"
    result = browse(path, os.path.join(OUT, name + ".png"))
    ids = {c["id"] for c in result["charts"]}
    check_axes(data, result, name)
    return data, ids


def check_axes(data, result, name):
    """A categorical parameter's slice plot labels every choice on its axis; every OOM-map chart
    labels each batch size and length it shows, in ascending order; one legend serves the OOM
    map (its charts draw none)."""
    for i, param in enumerate(sorted(data.get("distributions", {}))):
        d = data["distributions"][param]
        if d["name"] != "CategoricalDistribution" or f"chart-slice-{i}" not in result["ticks"]:
            continue
        labels = result["ticks"][f"chart-slice-{i}"]["x"]
        choices = [c if isinstance(c, str) else json.dumps(c) for c in d["attributes"]["choices"]]
        assert labels == choices, f"{name}: slice plot of '{param}': ticks {labels}, expected {choices}"
    oom = [k for k in result["ticks"] if k.startswith("chart-oom-")]
    assert oom, f"{name}: no OOM map charts"
    for k in oom:
        for axis in ("x", "y"):
            labels = result["ticks"][k][axis]
            values = [float(v) for v in labels]  # every tick labelled with a number
            assert values and values == sorted(set(values)), f"{name}: {k} {axis} ticks {labels}"
    assert not [k for k in result["legends"] if k.startswith("chart-oom-")], result["legends"]
    assert result["oom_legend"] == 4, f"{name}: OOM map legend has {result['oom_legend']} entries"
    print(f"  axes: categorical slice plots label their choices; {len(oom)} OOM-map charts label "
          f"batch sizes and lengths; one OOM-map legend")


def main():
    if not CHROMIUM:
        print("SKIPPED: chromium is not installed (apt install chromium; scripts/install-deps.sh)")
        return 77
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        url = "sqlite:///" + os.path.join(tmp, "s.db")
        with open(os.path.join(tmp, "m.json"), "w") as f:
            json.dump(MIXED, f)
        run([TUNE, "--study", "mixed", "--config", "m.json", "--n-trials", "60", "--jobs", "2",
             "--log-level", "warn", "--storage", url], cwd=tmp)
        print("study 'mixed' (tune, function objective, --jobs 2):")
        _, ids = check_study(url, "mixed", "mixed", tmp, {"complete", "pruned", "oom"})
        assert {"chart-history", "chart-intermediate", "chart-importance", "chart-timeline",
                "chart-oom-0", "chart-oom-1"} <= ids, ids
        if not os.path.isdir(os.path.join(OPTUNA49, "optuna")):
            print(f"SKIPPED the studies Optuna 4.9 writes: no Optuna at {OPTUNA49} (TUNE_OPTUNA49_PATH)")
            return 0
        env = dict(os.environ, PYTHONPATH=OPTUNA49)
        make = ["/usr/bin/python3", os.path.join(HERE, "make_optuna_study.py")]
        run(make + [url, "optuna", "150"], env=env)
        print("study 'optuna' (written by Optuna 4.9, memory and schedule attributes):")
        _, ids = check_study(url, "optuna", "optuna", tmp, {"complete", "pruned", "oom", "predicted"})
        assert "chart-memory" in ids, ids
        if BIG:
            t = time.monotonic()
            run(make + [url, "big", str(BIG)], env=env)
            print(f"study 'big' ({BIG} trials, written by Optuna 4.9 in {time.monotonic() - t:.0f} s):")
            data, _ = check_study(url, "big", "big", tmp, {"complete", "oom"})
            assert len(data["trials"]) == BIG
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
