"""Every number in an ``--edit`` spec is finite: NaN or infinity in any kind's number (a head scale, a
neuron value, a steering coefficient, an attention ``add=``, an SAE clamp value or scale) is one
``WhiteboxError`` line when the spec is read, before any model or file is touched (an edit by NaN
leaves no logit a number, and the run would still report an accuracy)."""

from __future__ import annotations

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.internals.edit_specs import parse_edit

CASES = {
    "scale": ["scale:1.0=nan", "scale:L0H1=inf", "scale:1.0=-Infinity@last"],
    "neurons": ["neurons:1:2,3=nan", "neurons:0:1=-inf"],
    "steer": ["steer:resid:1:no_such_file.pt*nan", "steer:blocks.1.hook_resid_post:v.npy*1e999"],
    "attn": ["attn:1.0:last>first:add=nan", "attn:1.0:all>prev:add=inf,renorm"],
    "sae": ["sae:1,2=nan:1=no/such/sae", "sae:3*inf:1=no/such/sae", "sae:3=-1e400:1=no/such/sae"],
}


@pytest.mark.parametrize("spec", [s for specs in CASES.values() for s in specs])
def test_a_non_finite_number_is_one_line(spec):
    with pytest.raises(WhiteboxError) as got:
        parse_edit(spec)
    message = str(got.value)
    assert message.startswith(f"--edit {spec}: ") and "is not a finite number" in message
    assert "\n" not in message


def test_every_spec_kind_that_takes_a_number_is_covered():
    from whitebox_eval.internals.edit_registry import spec_kinds

    numbered = set(spec_kinds()) - {"ablate", "patch"}  # ablate and patch take no number
    assert numbered == set(CASES)


@pytest.mark.parametrize("spec, value", [("scale:1.0=-0.5", -0.5), ("neurons:1:2=1e3", 1000.0),
                                         ("attn:1.0:last>first:add=-2", -2.0)])
def test_finite_numbers_still_read(spec, value):
    assert parse_edit(spec).value == value
