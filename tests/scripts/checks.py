"""The Python tests' checks: check() prints an "ok"/"FAIL" line for each and keeps the failures
in FAILURES, which the test's exit status reads."""

FAILURES = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILURES.append(what)
