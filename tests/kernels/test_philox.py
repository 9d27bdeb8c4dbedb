"""The Philox oracle: Random123's published answers, Triton's float mapping and seed split, and
bit-for-bit agreement with `tl.rand` on this run's target (the interpreter, or a CUDA/ROCm GPU)."""
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from portcheck.oracles import philox

# Random123 tests/kat_vectors, the three philox4x32 10 lines: counter[4] key[2] -> output[4]
KAT_PHILOX4X32_10 = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF),
     (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),   # digits of pi
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,expected", KAT_PHILOX4X32_10, ids=["zeros", "ones", "pi"])
def test_random123_known_answers(counter, key, expected):
    assert tuple(int(w) for w in philox.philox4x32(counter, key, rounds=10)) == expected


def test_vectorised_counters_match_one_at_a_time():
    counters = [kat[0] for kat in KAT_PHILOX4X32_10]
    key = (0xA4093822, 0x299F31D0)
    together = philox.philox4x32(tuple(np.array(c) for c in zip(*counters)), key)
    for i, c in enumerate(counters):
        assert tuple(int(w[i]) for w in together) == tuple(int(w) for w in philox.philox4x32(c, key))


def test_uniform_map_edges():
    words = np.array([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF], dtype=np.uint32)
    r = philox.uint_to_uniform_float(words)
    assert r.dtype == np.float32
    largest_below_one = np.nextafter(np.float32(1), np.float32(0))
    # 0 and ~0 both map to 0; 2^31 - 1 and its complement to the largest float32 below 1
    assert r.tolist() == [0.0, float(philox.UNIFORM_SCALE), float(largest_below_one),
                          float(largest_below_one), float(philox.UNIFORM_SCALE), 0.0]


def test_seed_split_and_64_bit_offsets():
    assert philox.split_seed(0x0000000500000007) == (7, 5)
    assert philox.split_seed(2**63 - 1) == (0xFFFFFFFF, 0x7FFFFFFF)
    # offset 2^32 + 3 is counter (3, 1, 0, 0): the high word carries into c1
    direct = philox.philox4x32((3, 1, 0, 0), philox.split_seed(99))[0]
    assert int(philox.randint(99, [2**32 + 3])[0]) == int(direct)


def test_lane_words_take_word_g_mod_4_of_counter_g_div_4():
    # seed 0 and counter 0 are Random123's all-zero vector: positions 0..3 are its four words
    assert [int(w) for w in philox.lane_words(0, np.arange(4))] == list(KAT_PHILOX4X32_10[0][2])
    # position g is word g % 4 at counter g // 4, whose high word carries into c1 past 2^32
    key = philox.split_seed(2**40 + 17)
    for g in (5, 4 * (2**32 - 1) + 3, 4 * 2**32 + 2, 2**63 - 1):
        n, k = divmod(g, 4)
        direct = philox.philox4x32((n & 0xFFFFFFFF, n >> 32, 0, 0), key)[k]
        assert int(philox.lane_words(2**40 + 17, [g])[0]) == int(direct)
    assert philox.rand_lanes(3, np.arange(8)).tolist() == \
        philox.uint_to_uniform_float(philox.lane_words(3, np.arange(8))).tolist()
    with pytest.raises(ValueError, match=">= 0"):
        philox.lane_words(0, [-1])


def test_a_stream_resumes_at_offset_plus_count():
    whole = philox.dropout_keep(11, np.arange(5, 5 + 1003), 0.5)
    parts = [philox.dropout_keep(11, np.arange(5, 5 + 401), 0.5),
             philox.dropout_keep(11, np.arange(5 + 401, 5 + 1003), 0.5)]
    np.testing.assert_array_equal(whole, np.concatenate(parts))


def test_dropout_keep_rate_and_p_zero():
    offsets = np.arange(200_000, dtype=np.int64)
    assert philox.dropout_keep(7, offsets, 0.0).all()            # p = 0 draws nothing, keeps all
    assert not philox.dropout_keep(7, offsets, 1.0).any()        # rand < 1 always
    kept = philox.dropout_keep(7, offsets, 0.3).mean()
    assert abs(kept - 0.7) < 5 * np.sqrt(0.3 * 0.7 / offsets.size)   # five binomial sigmas
    # the four lanes of one call are each uniform: every lane keeps at the rate
    lanes = philox.dropout_keep(7, offsets, 0.3).reshape(-1, 4).mean(axis=0)
    assert (abs(lanes - 0.7) < 5 * np.sqrt(0.3 * 0.7 / (offsets.size / 4))).all()


# ---- bit for bit against Triton's own tl.rand on this run's target -----------------------------

@triton.jit
def _rand_kernel(bits_ptr, uniform_ptr, seed, offset, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    counters = offset + i.to(tl.int64)
    tl.store(bits_ptr + i, tl.randint(seed, counters), mask=ok)
    tl.store(uniform_ptr + i, tl.rand(seed, counters), mask=ok)


@triton.jit
def _randint4x_kernel(words_ptr, seed, offset, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = i < n
    r0, r1, r2, r3 = tl.randint4x(seed, offset + i.to(tl.int64))
    tl.store(words_ptr + i, r0, mask=ok)
    tl.store(words_ptr + n + i, r1, mask=ok)
    tl.store(words_ptr + 2 * n + i, r2, mask=ok)
    tl.store(words_ptr + 3 * n + i, r3, mask=ok)


def _device() -> str:
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("no interpreter mode and no GPU: nothing runs tl.rand here")


@pytest.mark.parametrize("seed,offset", [
    (0, 0), (1, 5), (2**32 - 1, 2**32 - 300),   # the counter's low word wraps inside the block
    (2**32 + 5, 2**40 + 3), (2**63 - 1, 12345), (0x243F6A8885A308D3, 0)])
def test_oracle_equals_tl_rand_bit_for_bit(seed, offset):
    device, n = _device(), 1000
    bits = torch.empty(n, dtype=torch.int32, device=device)
    uniform = torch.empty(n, dtype=torch.float32, device=device)
    _rand_kernel[(triton.cdiv(n, 256),)](bits, uniform, seed, offset, n, BLOCK=256)
    offsets = offset + np.arange(n, dtype=np.int64)
    np.testing.assert_array_equal(bits.cpu().numpy().view(np.uint32), philox.randint(seed, offsets))
    np.testing.assert_array_equal(uniform.cpu().numpy().view(np.uint32),
                                  philox.rand(seed, offsets).view(np.uint32))


@pytest.mark.parametrize("seed,offset", [(0, 0), (2**32 - 1, 2**32 - 300), (2**63 - 1, 2**61 + 7)])
def test_oracle_equals_tl_randint4x_bit_for_bit(seed, offset):
    device, n = _device(), 1000
    words = torch.empty(4 * n, dtype=torch.int32, device=device)
    _randint4x_kernel[(triton.cdiv(n, 256),)](words, seed, offset, n, BLOCK=256)
    expected = np.stack(philox.randint4x(seed, offset + np.arange(n, dtype=np.int64)))
    np.testing.assert_array_equal(words.cpu().numpy().view(np.uint32).reshape(4, n), expected)
