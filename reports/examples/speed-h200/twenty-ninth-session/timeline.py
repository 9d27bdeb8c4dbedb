"""Issue 17: where a traced run's workers spend its first and last seconds. Reads the event files
of ../twenty-seventh-session/trace/sitecustomize.py (TRACE_COMPILES) and prints, per process, in
seconds since the first process started: its start, its Session (start and length), its CUDA
context's making (start and length), its first check's start (and its CPU seconds by then), its last check's end, how many
checks it made and kernels it compiled, and the C modules it built with the host compiler (Triton's
driver utilities and launchers) and their seconds, and its CPU seconds at its last event (its exit where it exits normally); then the medians over the checking workers and
the host compiler's and the long poles' warm-ups' totals.
    python3 timeline.py EVENTS_DIR"""
import json
import statistics
import sys
from pathlib import Path


def role(cmd: str) -> str:
    if "--time-only" in cmd:
        return "timing"
    if "--worker" in cmd or "--standby" in cmd:
        return "worker"
    return "supervisor" if " run " in f"{cmd} " else "other"


def main(folder: Path) -> None:
    procs, compiles, warmups = [], {}, []   # compiles: kernel hash -> seconds of each process's compile of it
    for f in folder.glob("*.jsonl"):
        events = [json.loads(line) for line in f.read_text().splitlines()]
        for e in events:
            if e["ev"] == "compile" and not e["hit"] and e.get("hash"):
                compiles.setdefault(e["hash"], []).append((e.get("us") or 0) / 1e6)
        first = {}
        for e in events:
            first.setdefault(e["ev"], e["t"])
        last_end = max((e["t"] for e in events if e["ev"] == "check-end"), default=None)
        cmd = next((e["cmd"] for e in events if e["ev"] == "start"), "")
        cpu_first = next((e.get("cpu") for e in events if e["ev"] == "check"), None)
        begun = None
        for e in events:   # each long pole's warm-up: wall, CPU seconds, kernels its threads compiled
            if e["ev"] == "warmup":
                begun = e
            elif e["ev"] == "warmup-end" and begun is not None:
                warmups.append((e["t"] - begun["t"], e["cpu"] - begun["cpu"], sum(
                    x["ev"] == "compile" and not x["hit"] and x["thread"].startswith("portcheck-precompile")
                    and begun["t"] <= x["t"] <= e["t"] for x in events)))
                begun = None
        procs.append({"pid": f.stem, "role": role(cmd), "first": first, "last_end": last_end,
                      "checks": sum(e["ev"] == "check" for e in events),
                      "cpu_start": cpu_first, "cpu": max((e.get("cpu") or 0 for e in events), default=0),
                      "compiled": sum(e["ev"] == "compile" and not e["hit"] for e in events),
                      "cc": sum(e["ev"] == "cc" for e in events), "cc_s": round(sum(e["s"] for e in events if e["ev"] == "cc"), 1),
                      "cc_names": [e["name"] for e in events if e["ev"] == "cc"]})
    t0 = min(p["first"].get("start", min(p["first"].values())) for p in procs)
    rel = lambda t: None if t is None else round(t - t0, 2)   # noqa: E731
    span = lambda p, a: None if a not in p["first"] or a + "-end" not in p["first"] else round(   # noqa: E731
        p["first"][a + "-end"] - p["first"][a], 2)
    cols = ("pid", "role", "start", "session", "session_s", "cuda", "cuda_s", "first check", "last end", "checks", "compiled", "cc", "cc_s", "cpu_start", "cpu")
    print(" ".join(f"{c:>11}" for c in cols))
    rows = []
    for p in sorted(procs, key=lambda p: p["first"].get("start", 0)):
        f = p["first"]
        row = (p["pid"], p["role"], rel(f.get("start")), rel(f.get("session")), span(p, "session"), rel(f.get("cuda-init")),
               span(p, "cuda-init"), rel(f.get("check")), rel(p["last_end"]), p["checks"], p["compiled"], p["cc"], p["cc_s"], p["cpu_start"], p["cpu"])
        rows.append((p["role"], dict(zip(cols, row))))
        print(" ".join(f"{str(x):>11}" for x in row))
    workers = [r for role_, r in rows if role_ == "worker" and r["first check"] is not None]
    for c in ("start", "session", "cuda", "cuda_s", "first check", "last end", "cpu_start", "cpu"):
        v = [r[c] for r in workers if r[c] is not None]
        if v:
            print(f"checking workers ({len(workers)}), {c}: median {statistics.median(v):.2f}, min {min(v)}, max {max(v)}")
    cpu = {r: sum(p["cpu"] for p in procs if p["role"] == r) for r in ("supervisor", "worker", "timing")}
    # the supervisor's figure holds its children's, the workers', once they end
    print(f"CPU seconds: checking workers {cpu['worker']:.1f}, timing worker {cpu['timing']:.1f}, "
          f"supervisor {cpu['supervisor'] - cpu['worker'] - cpu['timing']:.1f} (its own: less its workers')")
    if warmups:
        wall, cpu_s, kernels = (sum(w[i] for w in warmups) for i in range(3))
        print(f"long poles' warm-ups: {len(warmups)}, {wall:.1f} s of wall, {cpu_s:.1f} CPU-s ({cpu_s / wall:.2f} cores), "
              f"{kernels} kernels, {cpu_s / max(1, kernels):.2f} CPU-s a kernel")
    again = {h: v for h, v in compiles.items() if len(v) > 1}
    print(f"kernels: {len(compiles)} compiled, {len(again)} of them by more than one process "
          f"({sum(len(v) - 1 for v in again.values())} extra compiles, {sum(sum(sorted(v)[:-1]) for v in again.values()):.1f} s)")
    names = [n for p in procs for n in p["cc_names"]]
    print(f"host compiler: {len(names)} builds ({names.count('cuda_utils')} of the driver's utilities) in "
          f"{sum(p['cc_s'] for p in procs):.1f} s")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
