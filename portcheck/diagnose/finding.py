"""One likely cause of a failure, with the evidence an experiment found for it."""
from __future__ import annotations

from dataclasses import asdict, dataclass

# How strongly an experiment's evidence points at its cause: the ranking of a diagnosis.
REPRODUCED = 0.95   # the cause, replayed, gives the kernel's output exactly (or a guard saw it)
EXPLAINED = 0.9     # the cause, modelled, brings the output within its tolerance
CORRELATED = 0.8    # the error follows the cause's signature (grows with K, with |x|)
LOCATED = 0.6       # where the error sits points at a cause
HINT = 0.3          # consistent with the cause, nothing more
FAILED = 0.0        # the experiment itself failed: said, never ranked above a finding


@dataclass(frozen=True)
class Finding:
    kind: str        # the experiment: position, magnitude, reduction, function, rng, vendors
    cause: str       # the likely cause, one line
    evidence: str    # what the experiment measured
    score: float     # REPRODUCED .. HINT: ranks the findings of one diagnosis
    output: str = ""   # the output it is about ("" for the whole case)

    def to_dict(self) -> dict:
        return asdict(self)

    def text(self) -> str:
        return f"{self.cause} ({self.output + ': ' if self.output else ''}{self.evidence})"


def ranked(findings: list[Finding]) -> list[Finding]:
    """Strongest first; one cause named for several outputs is kept once, with its best score."""
    best: dict[str, Finding] = {}
    for f in findings:
        if f.cause not in best or f.score > best[f.cause].score:
            best[f.cause] = f
    return sorted(best.values(), key=lambda f: -f.score)
