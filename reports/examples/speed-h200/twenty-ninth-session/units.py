"""Issue 17: each unit's cost in a traced whole run against the same unit in the traced halves
(events of ../twenty-seventh-session/trace/sitecustomize.py): its wall, its process's CPU seconds
(threads, and children once they end), the kernels it compiled and their summed compile seconds
(wall per compile, so concurrency inflates them), and whether it was a long pole.
    python3 units.py EVENTS_WHOLE EVENTS_HALF1 EVENTS_HALF2 [N]   (the N units that differ most)"""
import json
import sys
from pathlib import Path


def units(folder: Path) -> dict:
    out = {}
    for f in folder.glob("*.jsonl"):
        unit = None
        for line in f.read_text().splitlines():
            e = json.loads(line)
            if e["ev"] == "check":
                unit, start, cpu, pole, n, seconds = f"{e['case']}:{e['dtype']}", e["t"], e["cpu"], e.get("pole"), 0, 0.0
            elif e["ev"] == "compile" and unit and not e["hit"]:
                n, seconds = n + 1, seconds + (e.get("us") or 0) / 1e6
            elif e["ev"] == "check-end" and unit:
                out[unit] = {"wall": e["t"] - start, "cpu": e["cpu"] - cpu, "pole": pole, "kernels": n, "compile_s": seconds}
                unit = None
    return out


def main(whole: Path, halves: list[Path], top: int) -> None:
    w = units(whole)
    h = {k: v for d in halves for k, v in units(d).items()}
    for name, d in (("whole", w), ("halves", h)):
        print(f"{name}: {len(d)} units, CPU {sum(v['cpu'] for v in d.values()):.0f} s, "
              f"{sum(v['kernels'] for v in d.values())} kernels compiled in {sum(v['compile_s'] for v in d.values()):.0f} s")
    print(f"{'unit':34} {'whole: wall   cpu kernels compile pole':40} halves: wall   cpu kernels compile pole")
    row = lambda v: f"{v['wall']:6.1f} {v['cpu']:6.1f} {v['kernels']:4d} {v['compile_s']:7.1f} {str(v['pole'])[:5]:5}"   # noqa: E731
    for k in sorted(set(w) & set(h), key=lambda k: -abs(w[k]["cpu"] - h[k]["cpu"]))[:top]:
        print(f"{k:34}        {row(w[k])}            {row(h[k])}")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(Path(a[0]), [Path(a[1]), Path(a[2])], int(a[3]) if len(a) > 3 else 15)
