"""diagnose.approximate: an exact output a step off in a few elements, from approximate
instructions in the GPU code (an H200 gave 2 of 4,128,831 fp8 codes one step off for a quantizer
that divides with `/`, div.full.f32)."""
import torch

from portcheck.diagnose import approximate
from portcheck.diagnose.rerun import OutputMap
from portcheck.tolerance import exact


def _map(out: torch.Tensor, ref: torch.Tensor) -> OutputMap:
    """An exact output's map as rerun makes it: inf where the bits differ."""
    same = out.view(torch.uint8) == ref.view(torch.uint8)   # one-byte codes here: int8, fp8
    ratio = torch.where(same, 0.0, float("inf")).double()
    return OutputMap("q", out, ref, exact("codes"), None, ratio, torch.zeros_like(same))


def test_int8_codes_one_step_off_in_a_few_elements():
    ref = torch.arange(-100, 100, dtype=torch.int8).repeat(20)   # 4,000 codes
    out = ref.clone()
    out[7] += 1
    out[1234] -= 1
    assert approximate.one_step_off(_map(out, ref))
    out[2000] += 2   # two steps: not a boundary effect
    assert not approximate.one_step_off(_map(out, ref))


def test_fp8_codes_one_step_off_are_neighbouring_codes_of_one_sign():
    ref = torch.linspace(-400, 400, 4000).to(torch.float8_e4m3fn)
    out = ref.clone()
    bits = out.view(torch.uint8)
    bits[10] += 1          # the next code away from zero, sign kept
    assert approximate.one_step_off(_map(out, ref))
    zero = torch.zeros(4000, dtype=torch.float8_e4m3fn)
    flipped = zero.clone()
    flipped.view(torch.uint8)[3] = 0x80 | 0x01   # -min subnormal against +0: the sign differs
    assert not approximate.one_step_off(_map(flipped, zero))


def test_many_elements_off_is_a_wrong_formula_not_a_boundary():
    ref = torch.arange(0, 100, dtype=torch.int8)
    assert not approximate.one_step_off(_map(ref + 1, ref))


def test_the_approximate_instructions_are_read_from_ptx_and_amdgcn():
    ptx = "div.full.f32 %r1, %r2, %r3;\nex2.approx.ftz.f32 %f1, %f2;\ndiv.rn.f32 %f3, %f4, %f5;\nfma.rn.f32 ..."
    gcn = "v_rcp_f32 v1, v2\nv_div_scale_f32 v3, ...\nv_exp_f32 v4, v5"
    found = [m.group(1) for m in approximate.APPROXIMATE.finditer(ptx + "\n" + gcn)]
    assert found == ["div.full.f32", "ex2.approx.ftz.f32", "v_rcp_f32", "v_exp_f32"]   # not div.rn, v_div_scale


def test_the_interpreter_computes_exactly_so_no_finding_there():
    ref = torch.arange(-100, 100, dtype=torch.int8).repeat(20)
    out = ref.clone()
    out[7] += 1
    assert approximate.boundary_codes(None, "interpreter", None, [_map(out, ref)]) == []


def test_codes_one_step_off_on_the_ties_regime_name_the_rounding_of_ties():
    from portcheck.diagnose.rerun import Run
    ref = torch.tensor([0, 2, 2, -2, 4, 5], dtype=torch.int8)     # 0.5, 1.5, 2.5, -2.5, 3.5 half to even; 5
    away = torch.tensor([1, 2, 3, -3, 4, 5], dtype=torch.int8)    # half away from zero: half the codes
    on_ties = Run({"regime": "ties"}, {}, {}, {})
    found = approximate.tie_rounding(on_ties, [_map(away, ref)])
    assert [f.kind for f in found] == ["approximate"] and "half to even" in found[0].cause
    assert "3 of 6 elements" in found[0].evidence
    assert approximate.tie_rounding(Run({"regime": "normal"}, {}, {}, {}), [_map(away, ref)]) == []
    assert approximate.tie_rounding(on_ties, [_map(ref + 2, ref)]) == []   # two steps: not a tie


def test_a_few_ties_off_are_an_approximation_many_are_a_rounding_rule(monkeypatch):
    """On the ties regime a quantizer that divides with `/` (div.full.f32) put 1 of 228 int8 codes
    a step off on the H200; a rule that rounds ties half away puts a quarter or more of a row off."""
    from portcheck.diagnose.rerun import Run
    on_ties = Run({"regime": "ties"}, {}, {}, {})
    ref = torch.arange(-114, 114, dtype=torch.int8)     # 228 codes
    few = ref.clone()
    few[3] += 1
    monkeypatch.setattr(approximate, "instructions", lambda case, args: {"div.full.f32": 2})
    assert approximate.tie_rounding(on_ties, [_map(few, ref)]) == []
    found = approximate.boundary_codes(None, "cuda", on_ties, [_map(few, ref)])
    assert len(found) == 1 and "div.full.f32 x2" in found[0].cause and "1 of 228" in found[0].evidence
    # off the ties regime 1 in 228 is too many for a boundary effect
    assert approximate.boundary_codes(None, "cuda", Run({"regime": "normal"}, {}, {}, {}), [_map(few, ref)]) == []
    many = ref.clone()
    many[::8] += 1                                       # 29 of 228: a rule
    assert approximate.boundary_codes(None, "cuda", on_ties, [_map(many, ref)]) == []
    assert len(approximate.tie_rounding(on_ties, [_map(many, ref)])) == 1
