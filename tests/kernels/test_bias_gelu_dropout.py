"""The dropout stream of the fused bias + GELU + dropout kernel, on this run's target (the
interpreter, or a GPU):

- the packed draw (one tl.randint4x call per four elements, interleaved back into element order)
  and the per-element draw give the same mask and output bit for bit, equal to the oracle's
  uniform(Philox(seed, g // 4)[g % 4]) > p;
- the stream depends only on the flat position g = offset + index: launches of any shapes that
  continue at offset + numel give the mask of one launch over the concatenation;
- on a GPU, the speed goal: the bf16 bench shape moves its bytes at >= 95% of copy bandwidth.
"""
import numpy as np
import pytest
import torch

from tests.support.launching import DEVICE, needs_device
from portcheck.oracles import gelu as oracle

P = 0.4


def _run(rows, cols, offset, seed=1234, p=P, approximate="none", tile=None):
    from portcheck.kernels.bias_gelu_dropout import bias_gelu_dropout
    g = torch.Generator().manual_seed(rows * 1000 + cols)
    x = torch.randn(rows, cols, generator=g).to(DEVICE)
    b = torch.randn(cols, generator=g).to(DEVICE)
    y, keep = bias_gelu_dropout(x, b, p, seed, offset, approximate, tile=tile)
    return x, b, y.cpu(), keep.cpu()


def _packed(cols, offset, tile=None):
    from portcheck.kernels import bias_gelu_dropout as K
    return K.packed(cols, offset, (tile or K.config(cols, K.warp_size()))["BLOCK_N"])


# aligned: offset and cols multiples of 4. (5, 12) crosses the counter's low-word wrap at
# g = 2^34; (2, 1028) has a second column tile holding one group of four; 2^62 uses c1's top bits
ALIGNED = [(3, 8, 0), (5, 12, 2**34 - 24), (2, 1028, 4), (7, 36, 2**40), (4, 64, 2**62)]
UNALIGNED = [(3, 7, 0), (4, 8, 3), (1, 3, 1), (6, 10, 2**34 - 7)]


@needs_device
@pytest.mark.parametrize("rows,cols,offset", ALIGNED)
def test_packed_and_per_element_draws_agree_with_the_oracle(rows, cols, offset, monkeypatch):
    from portcheck.kernels import bias_gelu_dropout as K
    assert _packed(cols, offset)
    x, b, y, keep = _run(rows, cols, offset)
    expected = oracle.keep_mask((rows, cols), P, 1234, offset, "cpu").to(torch.uint8)
    assert torch.equal(keep, expected), f"{int((keep != expected).sum())} of {keep.numel()} differ"
    monkeypatch.setattr(K, "packed", lambda *_: False)      # the same launch, drawing per element
    _, _, y1, keep1 = _run(rows, cols, offset)
    assert torch.equal(keep, keep1)
    assert torch.equal(y.view(torch.int32), y1.view(torch.int32))


@needs_device
@pytest.mark.parametrize("tile", [{"BLOCK_M": 4, "BLOCK_N": 2, "num_warps": 1},
                                  {"BLOCK_M": 1, "BLOCK_N": 4, "num_warps": 1},
                                  {"BLOCK_M": 2, "BLOCK_N": 16, "num_warps": 1}])
def test_the_mask_does_not_depend_on_the_tile(tile):
    # BLOCK_N = 2 cannot hold a group of four: that launch draws per element
    assert _packed(12, 8, tile) == (tile["BLOCK_N"] >= 4)
    assert torch.equal(_run(3, 12, 8, tile=tile)[3], _run(3, 12, 8)[3])


@needs_device
@pytest.mark.parametrize("rows,cols,offset", UNALIGNED)
def test_unaligned_launches_take_the_per_element_draw(rows, cols, offset):
    assert not _packed(cols, offset)
    _, _, _, keep = _run(rows, cols, offset)
    assert torch.equal(keep, oracle.keep_mask((rows, cols), P, 1234, offset, "cpu").to(torch.uint8))


@needs_device
@pytest.mark.parametrize("start", [0, 2])
def test_a_stream_resumes_at_offset_plus_numel_whatever_the_shapes(start):
    # (2, 4) then (1, 6) then (3, 8): 38 positions; packed and per-element launches when start = 0
    parts, offset = [], start
    for rows, cols in ((2, 4), (1, 6), (3, 8)):
        parts.append(_run(rows, cols, offset)[3].flatten())
        offset += rows * cols
    whole = torch.cat(parts)
    for rows, cols in ((1, 38), (19, 2)):
        assert torch.equal(_run(rows, cols, start)[3].flatten(), whole)
    assert 0 < int(whole.sum()) < whole.numel()


@needs_device
def test_the_four_words_of_one_call_land_on_four_consecutive_elements():
    # seed 0 at counter 0 is Random123's all-zero vector 6627E8D5 E169C58D BC57AC4C 9B00DBD8: as
    # int32 its words are +, -, -, -, so uniform(word) is 0.80, 0.24, 0.53, 0.79 (the map folds
    # negatives with ~x). p = 0.5 drops element 1 only; p = 0.78 keeps 0 and 3 only. Words in
    # another order (w0 w2 w1 w3, say) would drop element 2 at p = 0.5.
    assert _run(1, 4, 0, seed=0, p=0.5)[3].flatten().tolist() == [1, 0, 1, 1]
    assert _run(1, 4, 0, seed=0, p=0.78)[3].flatten().tolist() == [1, 0, 0, 1]
    words = np.array([0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8], dtype=np.uint32)
    from portcheck.oracles import philox
    assert (philox.uint_to_uniform_float(words) > np.float32(0.5)).tolist() == [True, False, True, True]


def test_bad_tiles_are_refused_before_launch():
    from portcheck.kernels.bias_gelu_dropout import bias_gelu_dropout
    x = torch.zeros(4, 8)
    for tile in ({"BLOCK_M": 4, "BLOCK_N": 6, "num_warps": 1}, {"BLOCK_M": 4, "BLOCK_N": 8},
                 {"BLOCK_M": 4, "BLOCK_N": 8, "num_warps": 0}):
        with pytest.raises(ValueError, match="tile must be"):
            bias_gelu_dropout(x, p=0.5, tile=tile)
