"""Issue 17: read a traced run's files (sitecustomize.py) and say, per unit, how many kernels its
process compiled and in how many seconds, by the step that asked for them: the warm-up (a long
pole's, on its threads), the search's examples, the steps after it (strided inputs, other regimes,
far and many rows, autotune), and what the worker launches after the check (digests, the timing
spec's warm launch).
    python3 compiles.py TRACE_DIR [N]   (the N units that compiled longest after their warm-up)"""
import collections
import json
import sys
from pathlib import Path


def step_of(spec: dict) -> str:
    if "strided_input" in spec:
        return "strided"
    if spec.get("layout") == "far" or spec.get("rows", 0) > 65535:
        return "far/many rows"
    if "autotune" in spec or "autotune_cached" in spec:
        return "autotune"
    return "examples"


def main(trace: Path, top: int) -> None:
    units: dict = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0.0]))
    poles = {}
    for f in sorted(trace.glob("*.jsonl")):
        unit, step = None, "outside a check"
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e["ev"] == "check":
                unit, step = f"{e['case']}:{e['dtype']}", "examples"
                poles[unit] = e.get("pole")
            elif e["ev"] == "check-end":
                step = "after the check"
            elif e["ev"] == "eval" and unit is not None and step != "after the check":
                step = step_of(e["spec"])
            elif e["ev"] == "compile" and not e["hit"]:
                where = "warm-up" if e["thread"].startswith("portcheck-precompile") else step
                cell = units[unit or f"pid {f.stem}"][where]
                cell[0] += 1
                cell[1] += (e["us"] or 0) / 1e6
    steps = ["warm-up", "examples", "autotune", "strided", "far/many rows", "after the check", "outside a check"]
    late = lambda u: sum(units[u][s][1] for s in steps[1:] if s in units[u])   # noqa: E731
    print(f"{'unit':34} pole  " + "  ".join(f"{s[:13]:>15}" for s in steps))
    for u in sorted(units, key=late, reverse=True)[:top]:
        cells = [f"{units[u][s][0]:4d} {units[u][s][1]:6.1f}s" if s in units[u] else " " * 12 for s in steps]
        print(f"{u:34} {str(poles.get(u, '-'))[:5]:5} " + "  ".join(f"{c:>15}" for c in cells))
    total = collections.defaultdict(lambda: [0, 0.0])
    for u in units:
        for s, (n, sec) in units[u].items():
            total[s][0] += n
            total[s][1] += sec
    print("all units: " + ", ".join(f"{s} {n} kernels {sec:.1f} s" for s, (n, sec) in total.items()))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 25)
