"""Philox4x32-10 in exact uint32 arithmetic, and the draws Triton's `tl.rand` makes from it.

Philox4x32 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11;
the Random123 library) maps a 128-bit counter and a 64-bit key through R rounds of
    (c0, c1, c2, c3) -> (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))
with the key bumped by the Weyl constants (W0, W1) between rounds. Written from the paper, with
numpy uint64 products; tests/kernels/test_philox.py checks it against Random123's known-answer vectors.

How Triton draws from it (triton/language/random.py as of 3.9; tests/kernels/test_philox.py checks the
running Triton's tl.rand against this bit for bit):
- `tl.randint(seed, offset)`: counter = (lo32(offset), hi32(offset) if offset is 64-bit else 0,
  0, 0), key = (lo32(seed), hi32(seed)) after `seed.to(uint64)`; 10 rounds; returns word 0.
- `tl.randint4x(seed, offset)`: the same call, all four words (c0, c1, c2, c3) in that order.
- `tl.rand`: that word through `uint_to_uniform_float`: bitcast to int32, `x = ~x if x < 0`, then
  `float32(x) * float32(4.6566127342e-10)`, two fp32 roundings (int -> float, then the product);
  the result lies in [0, 1).

Dropout here draws one Philox call per FOUR stream positions (`lane_words`): position g takes
word g % 4 of `tl.randint4x(seed, g // 4)`, so a kernel spends a quarter of the Philox work that
`tl.rand` per position costs. The stream is a function of g alone: resuming it at offset + n
continues where n positions ended.
"""
from __future__ import annotations

import numpy as np

ROUNDS = 10
M0, M1 = 0xD2511F53, 0xCD9E8D57          # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85          # key bumps (golden ratio, sqrt(3) - 1)
_MASK32 = np.uint64(0xFFFFFFFF)
UNIFORM_SCALE = np.float32(4.6566127342e-10)   # Triton's constant: largest s with (2^31-1)*s < 1 in fp32


def _u32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64) & _MASK32


def _mulhilo(m: int, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    prod = np.uint64(m) * c                       # < 2^64: exact in uint64
    return prod >> np.uint64(32), prod & _MASK32


def philox4x32(counter, key, rounds: int = ROUNDS) -> tuple[np.ndarray, ...]:
    """Philox4x32-R of counters (c0, c1, c2, c3) under key (k0, k1); arrays broadcast together.

    Returns four uint32 arrays.
    """
    c0, c1, c2, c3 = (_u32(c) for c in counter)
    k0, k1 = (_u32(k) for k in key)
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(c0, c1, c2, c3, k0, k1)
    for r in range(rounds):
        if r:
            k0 = (k0 + np.uint64(W0)) & _MASK32
            k1 = (k1 + np.uint64(W1)) & _MASK32
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def split_seed(seed: int) -> tuple[int, int]:
    """Triton's key from a seed: (low 32 bits, high 32 bits) of the seed as uint64."""
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return s & 0xFFFFFFFF, s >> 32


def randint4x(seed: int, offsets, rounds: int = ROUNDS) -> tuple[np.ndarray, ...]:
    """`tl.randint4x(seed, offsets)` for int64 offsets: the four words of Philox at (lo, hi, 0, 0)."""
    off = np.asarray(offsets, dtype=np.int64).astype(np.uint64)   # two's complement bits
    return philox4x32((off & _MASK32, off >> np.uint64(32), 0, 0), split_seed(seed), rounds)


def randint(seed: int, offsets, rounds: int = ROUNDS) -> np.ndarray:
    """`tl.randint(seed, offsets)`: word 0 of `randint4x`."""
    return randint4x(seed, offsets, rounds)[0]


def lane_words(seed: int, positions, rounds: int = ROUNDS) -> np.ndarray:
    """Word g % 4 of `randint4x(seed, g // 4)` for each stream position g >= 0 (int64)."""
    g = np.asarray(positions, dtype=np.int64)
    if (g < 0).any():
        raise ValueError("stream positions must be >= 0")
    words = np.stack(randint4x(seed, g // 4, rounds))          # (4, *g.shape)
    return np.take_along_axis(words, (g % 4)[None], axis=0)[0]


def uint_to_uniform_float(u: np.ndarray) -> np.ndarray:
    """Triton's uint32 -> [0, 1) float32 map, with its two fp32 roundings."""
    x = np.asarray(u, dtype=np.uint32).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * UNIFORM_SCALE     # numpy rounds each step to nearest in fp32


def rand(seed: int, offsets, rounds: int = ROUNDS) -> np.ndarray:
    """`tl.rand(seed, offsets)`: float32 uniforms in [0, 1)."""
    return uint_to_uniform_float(randint(seed, offsets, rounds))


def rand_lanes(seed: int, positions, rounds: int = ROUNDS) -> np.ndarray:
    """float32 uniforms in [0, 1), one per stream position: uint_to_uniform_float(lane_words)."""
    return uint_to_uniform_float(lane_words(seed, positions, rounds))


def dropout_keep(seed: int, positions, p: float) -> np.ndarray:
    """The keep mask of a dropout that keeps stream position g when rand_lanes(seed, g) > p,
    i.e. uniform(Philox4x32-10(seed, counter = g // 4)[g % 4]) > p.

    p is compared in float32 (the kernel receives it as an fp32 scalar). p == 0 means no dropout:
    everything is kept and no random numbers are drawn (a uniform can be exactly 0.0).
    """
    positions = np.asarray(positions, dtype=np.int64)
    if p == 0:
        return np.ones(positions.shape, dtype=bool)
    return rand_lanes(seed, positions) > np.float32(p)
