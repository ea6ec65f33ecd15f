"""`asrtrain simulate`: its table, plot, units, machine-readable output and refusals."""

import json

import pytest

from tests.helpers.cli_helpers import one_error, run


def test_simulate_command(tmp_path):
    png = tmp_path / "speedup.png"
    res = run("simulate", "--learners", "1,2,4,16", "--batches", "2000", "--strategies", "ssgd,h-adpsgd",
              "--plot", png)
    assert res.exit_code == 0, res.output
    assert "predictions" in res.output and "h-adpsgd" in res.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "unknown strategy" in one_error(run("simulate", "--strategies", "hogwild"))
    # CPU learners sharing 2 cores: SSGD on 4 learners is no faster than on 2
    res = run("simulate", "--learners", "2,4", "--strategies", "ssgd", "--step-s", "0.1", "--batches", "400",
              "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
              "--intra-latency-us", "0")
    assert res.exit_code == 0, res.output
    assert "2 shared cores/node" in res.output
    speedups = [float(line.split()[3]) for line in res.output.splitlines() if line.startswith("ssgd ")]
    assert speedups == pytest.approx([2.0, 2.0], rel=1e-3), res.output
    # ... and gossip exchanges that take CPU from those cores make ADPSGD slower than free ones
    args = ["simulate", "--learners", "4", "--strategies", "adpsgd", "--step-s", "0.1", "--batches", "400",
            "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
            "--intra-latency-us", "0"]
    rows = [next(line.split() for line in run(*a).output.splitlines() if line.startswith("adpsgd "))
            for a in (args, args + ["--exchange-cpu-ms", "20"])]
    assert float(rows[1][3]) < float(rows[0][3]), rows
    bad = run(*args, "--exchange-cpu-ms", "-1")
    assert bad.exit_code == 2 and "'--exchange-cpu-ms': -1.0 is not in the range" in bad.output


def test_simulate_command_oversubscription():
    args = ["simulate", "--learners", "4", "--strategies", "ssgd", "--step-s", "0.1", "--batches", "400",
            "--params", "1000", "--learners-per-node", "4", "--cores-per-node", "2", "--intra-gbps", "1000",
            "--intra-latency-us", "0"]
    rows = [next(line.split() for line in run(*a).output.splitlines() if line.startswith("ssgd "))
            for a in (args, args + ["--oversub-overhead", "0.5"])]
    assert [float(r[3]) for r in rows] == pytest.approx([2.0, 2.0 / 1.5], abs=0.006), rows  # 2 decimals
    bad = run(*args, "--oversub-overhead", "-1")
    assert bad.exit_code == 2 and "'--oversub-overhead': -1.0 is not in the range" in bad.output


def test_simulate_refuses_a_strategy_with_no_count_it_can_run():
    """adpsgd on 3 learners only used to print an empty table with rc 0; topology refuses 3 too."""
    err = one_error(run("simulate", "--learners", "3", "--strategies", "adpsgd", "--batches", "400"))
    assert "--strategies adpsgd --learners 3: adpsgd needs an even number of groups" in err, err
    assert "(fix: give learner counts it can run on" in err


def test_simulate_names_the_counts_a_strategy_skipped():
    res = run("simulate", "--learners", "1,3,4", "--strategies", "ssgd,adpsgd", "--batches", "400",
              "--step-s", "0.1", "--params", "1000")
    assert res.exit_code == 0, res.output
    rows = [ln.split()[:2] for ln in res.output.splitlines() if ln.startswith(("ssgd ", "adpsgd "))]
    assert rows == [["ssgd", "1"], ["ssgd", "3"], ["ssgd", "4"], ["adpsgd", "1"], ["adpsgd", "4"]], rows
    assert "# not simulated: adpsgd on 3 learners" in res.output


def test_simulate_max_learners_has_help():
    res = run("simulate", "--help")
    assert "--max-learners INTEGER Largest learner count of the default" in " ".join(res.output.split())


def test_simulate_command_units_and_machine_readable_output_by_hand():
    # two learners, no latency, 16,000 B/s: a 4,000-byte model's all-reduce of two takes exactly 0.25 s, so
    # SSGD's 5 steps of 1 s take 5 x 1.25 s, whether the link is inside a node (GB/s) or between (Gbit/s)
    common = ["simulate", "--learners", "1,2", "--strategies", "ssgd", "--step-s", "1", "--batches", "10",
              "--params", "1000", "--epochs", "36"]
    for link in (["--intra-gbps", "1.6e-5", "--intra-latency-us", "0"],
                 ["--learners-per-node", "1", "--inter-gbit", "1.28e-4", "--inter-latency-us", "0"]):
        res = run(*common, *link, "--format", "json")
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        two = out["results"][1]
        assert two["epoch_s"] == pytest.approx(6.25) and two["hours"] == pytest.approx(36 * 6.25 / 3600)
        assert two["bytes_per_learner"] == pytest.approx(5 * 4000) and out["one_learner_epoch_s"] == 10.0
    tsv = run(*common, "--format", "tsv")
    assert tsv.exit_code == 0, tsv.output
    rows = [line.split("\t") for line in tsv.stdout.splitlines()]
    assert rows[0] == ["strategy", "learners", "epoch_s", "speedup", "bytes_per_learner", "staleness",
                       "steps", "hours"]
    assert [r[:2] for r in rows[1:]] == [["ssgd", "1"], ["ssgd", "2"]] and float(rows[2][2]) > 0
    assert "predictions" in tsv.stderr and "predictions" not in tsv.stdout  # notes off the data
    table = run(*common)
    row = next(ln.split() for ln in table.output.splitlines() if ln.startswith("ssgd ") and " 2 " in ln)
    assert float(row[6]) == pytest.approx(36 * float(row[2]) / 3600, abs=0.01)  # the hours column


@pytest.mark.parametrize("args,fragment", [
    (["--strategies", ","], "--strategies ',' names no strategy"),
    (["--learners", ","], "--learners ',' names no learner count"),
    (["--slow-factor", "0.5", "--slow-learners", "1"], "--slow-factor 0.5 must be >= 1"),
    (["--exchange-cpu-ms", "5"], "--exchange-cpu-ms applies only to CPU learners"),
    (["--oversub-overhead", "0.5"], "--oversub-overhead applies only to CPU learners"),
    (["--plot", "/dev/null/speedup.png"], "--plot /dev/null/speedup.png: cannot write in /dev/null"),
])
def test_simulate_refuses_options_it_would_ignore_or_misread(args, fragment):
    err = one_error(run("simulate", "--learners", "2", "--batches", "40", *args))
    assert fragment in err and "(fix: " in err, err


def test_simulate_sorts_learner_counts_and_names_why_a_count_was_skipped():
    res = run("simulate", "--learners", "4,2,2,1", "--strategies", "ssgd,ssgd,single", "--batches", "40",
              "--step-s", "0.1", "--params", "1000", "--slow-learners", "2", "--slow-factor", "3")
    assert res.exit_code == 0, res.output
    rows = [ln.split()[:2] for ln in res.output.splitlines() if ln.startswith(("ssgd ", "single "))]
    assert rows == [["ssgd", "1"], ["ssgd", "2"], ["ssgd", "4"], ["single", "1"]], rows
    assert "# not simulated: single on 2, 4 learners: strategy single runs on one learner" in res.output
    assert "# slow learners: the last 2 step 3x slower where a normal learner remains (none on 2" \
        in res.output
