"""Where a run's time went: each runtime record's seconds per phase, slowest first, and the totals.

    python3 tools/slowest.py reports/<run> [--top N]
"""
import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from portcheck import results

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("run", help="run directory or results.jsonl")
p.add_argument("--top", type=int, default=30)
args = p.parse_args()
path = Path(args.run)
path = path / "results.jsonl" if path.is_dir() else path
if not path.exists():
    sys.exit(f"slowest: no {path}")
records = [r for r in results.read(path) if r.get("kind") == "runtime"]
phases = [ph for ph in results.PHASES if any((r.get("phases") or {}).get(ph) for r in records)]
rows = sorted(([r["case"], r["dtype"], r.get("arch", "-"), r["verdict"], sum((r.get("phases") or {}).values()),
                *[(r.get("phases") or {}).get(ph, 0.0) for ph in phases]] for r in records),
              key=lambda row: -row[4])
print(tabulate(rows[:args.top], headers=["case", "dtype", "arch", "verdict", "total s", *phases], floatfmt=".1f"))
totals = results.phase_totals(records)
print(f"\n{len(records)} records, {sum(totals.values()):.1f} s in phases: "
      + ", ".join(f"{ph} {s:.1f} s" for ph, s in totals.items()))
