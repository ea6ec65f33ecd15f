import logging

from asrtrain.progress import Progress


def test_off_a_terminal_progress_logs_every_fraction_and_caps_an_estimate(caplog):
    log = logging.getLogger("asrtrain.test.progress")
    with caplog.at_level(logging.INFO, logger=log.name):
        p = Progress(8, "synth", log, every_frac=0.25, every_s=float("inf"))
        for _ in range(10):  # the total was an estimate: two more than it came
            p.update(1)
        p.close()
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["synth: 2/8 utt (25%)", "synth: 4/8 utt (50%)", "synth: 6/8 utt (75%)",
                     "synth: 8/8 utt (100%)", "synth: 10/8 utt (100%)"]
