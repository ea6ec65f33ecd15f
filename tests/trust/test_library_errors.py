"""Errors raised inside libraries reach the user as one line naming our option and a fix (issue 57)."""

import pytest

from asrtrain.errors import AsrError


def test_opacus_budget_too_low_names_the_dp_keys():
    from asrtrain.distributed.dp import noise_multiplier_for
    with pytest.raises(AsrError) as err:
        noise_multiplier_for(epsilon=1e-9, delta=1e-12, sample_rate=1.0, steps=100000)
    text = err.value.render()
    assert "dp.epsilon = 1e-09" in text and "dp.delta" in text and "fix:" in text, text
