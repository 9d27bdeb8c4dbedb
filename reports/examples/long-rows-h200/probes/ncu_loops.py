"""Where a kernel's warp samples fall, from Nsight Compute's SASS source page: per loop (a backward
branch and the instructions it closes over) and per stall reason, with the instructions that hold
the most samples.

    ncu ... --section WarpStateStats --section SourceCounters -o REP python3 ...
    ncu -i REP.ncu-rep --page source --csv --print-source sass > SASS.csv
    python3 ncu_loops.py SASS.csv [TOP]
"""
import collections
import csv
import re
import sys


def summary(path: str, top: int = 12) -> str:
    rows = list(csv.reader(open(path)))
    hdr = rows[1]
    ix = {h: i for i, h in enumerate(hdr)}
    data = [r for r in rows[2:] if len(r) >= len(hdr)]
    addr = [int(r[ix["Address"]], 16) for r in data]
    base = addr[0]
    samples = [int(float(r[ix["Warp Stall Sampling (All Samples)"]] or 0)) for r in data]
    total = sum(samples)
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    out = [f"{path}: {total} warp samples, {len(data)} instructions"]
    for i, r in enumerate(data):
        m = re.search(r"BRA (0x[0-9a-f]+)", r[ix["Source"]])
        target = int(m.group(1), 16) if m else None
        if target is not None and target >= base:   # an absolute address: as an offset
            target -= base
        if target is not None and target < addr[i] - base:
            j = next(k for k in range(len(data)) if addr[k] - base >= target)
            out.append(f"  loop {addr[j] - base:#06x}..{addr[i] - base:#06x}: {i + 1 - j} instructions, "
                       f"{sum(samples[j:i + 1]) / total:.1%} of the samples")
    by_reason = collections.Counter()
    for r in data:
        for s in stalls:
            by_reason[s] += float(r[ix[s]] or 0)
    out.append("  stall reasons: " + ", ".join(f"{s[6:]} {v / total:.1%}" for s, v in by_reason.most_common(6)))
    order = sorted(range(len(data)), key=lambda i: -samples[i])[:top]
    for i in order:
        why = max(stalls, key=lambda s: float(data[i][ix[s]] or 0))
        out.append(f"  {samples[i] / total:5.1%} at {addr[i] - base:#06x} {data[i][ix['Source']].strip()[:48]:48s} ({why[6:]})")
    return "\n".join(out)


if __name__ == "__main__":
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 12))
