"""Shared by the bench/ scripts: the machine line and the marked sections of docs/benchmarks.md.

Each benchmark owns one section, `<!-- NAME:begin -->` ... `<!-- NAME:end -->`, which its script
replaces (or appends) so that one run never touches another benchmark's numbers.
"""
import os
import platform


def machine():
    """'2 cores (Intel(R) Xeon(R) Processor), 24 GiB RAM, Linux 6.1.0'."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f", {int(f.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){mem}, {platform.system()} {platform.release()}"


def markers(name):
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"


def write_section(doc_path, name, section):
    """Replaces the section NAME of doc_path with `section` (which starts and ends with the
    markers), or appends it; creates the document if it does not exist."""
    begin, end = markers(name)
    if not section.endswith("\n"):
        section += "\n"
    if os.path.exists(doc_path):
        with open(doc_path) as f:
            doc = f.read()
    else:
        doc = ("# Benchmarks\n\nMeasured results, each with the machine it ran on. "
               "How to reproduce: [bench/README.md](../bench/README.md).\n")
    b, e = doc.find(begin), doc.find(end)
    if b >= 0 and e > b:
        e += len(end)
        if doc[e:e + 1] == "\n":
            e += 1
        doc = doc[:b] + section + doc[e:]
    else:
        doc = doc.rstrip("\n") + "\n\n" + section
    with open(doc_path, "w") as f:
        f.write(doc)
