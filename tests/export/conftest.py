"""Tiny exp dirs exported once per session: ``stack`` (frame stacking 3, subsample 3, per-utterance CMVN)
and ``conv`` (the conv front-end, subsample 2, global CMVN, dither 1 as the AN4 recipe has it)."""

import pytest

VARIANTS = {
    "stack": dict(cmvn="speaker", frontend="stack", stack=3, subsample=3),
    "conv": dict(cmvn="global", dither=1.0, frontend="conv", stack=1, subsample=2, conv_channels=4),
}


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """``exported(variant, fmt="onnx")`` -> (exp dir, export dir), each made once."""
    from asrtrain.export.bundle import export
    from tests.helpers.tiny_exp import write_tiny_exp

    made = {}

    def get(variant, fmt="onnx"):
        if variant not in made:
            root = tmp_path_factory.mktemp(variant)
            made[variant] = {"exp": write_tiny_exp(root / "exp", **VARIANTS[variant])}
        if fmt not in made[variant]:
            exp = made[variant]["exp"]
            made[variant][fmt] = export(exp, exp.parent / f"export_{fmt}", fmt)
        return made[variant]["exp"], made[variant][fmt]

    return get


@pytest.fixture(scope="session")
def wavs(tmp_path_factory):
    """Three 16 kHz wav files of 1.3, 2.0 and 3.7 s."""
    import soundfile as sf
    from tests.helpers.tiny_exp import speechy

    root = tmp_path_factory.mktemp("wavs")
    out = []
    for i, seconds in enumerate((1.3, 2.0, 3.7)):
        sf.write(root / f"w{i}.wav", speechy(seconds, 16000, i), 16000)
        out.append(root / f"w{i}.wav")
    return out
