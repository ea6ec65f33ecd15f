"""recipes/an4/run.sh end to end on a miniature AN4 layout (the real corpus is too big for the suite)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.an4_fixture import make_an4

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "recipes" / "an4" / "run.sh"


def run(work, *args):
    env = dict(os.environ, ASRTRAIN=f"{sys.executable} -m asrtrain", OMP_NUM_THREADS="1")
    return subprocess.run(["bash", str(RUN), *map(str, args), "--work", str(work)], env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_an4_recipe_end_to_end(tmp_path):
    an4 = make_an4(tmp_path / "an4")
    work = tmp_path / "work"
    small = ["--dev-utts", "2", "--vocab-size", "20", "--set", "train.epochs=1", "--set", "model.num_layers=1",
             "--set", "model.hidden=16", "--set", "train.warmup_steps=1", "--set", "train.average_last=1",
             "--lm-weights", "0.5,1", "--word-bonuses", "0,2"]
    r = run(work, an4, "--stop-stage", "1", *small)
    assert r.returncode == 0, r.stderr[-3000:]
    sp = (work / "data" / "train_sp" / "utt2spk").read_text().split()
    assert "sp0.9-fbbh-an1-b" in sp and "sp1.1-mblb" in sp and not (work / "dump").exists()
    # a feature variant for a dev experiment: --fbank-conf and --dump put it beside the default features
    conf = tmp_path / "fbank_none.yaml"
    conf.write_text((ROOT / "recipes" / "an4" / "conf" / "fbank.yaml").read_text().replace("cmvn: speaker", "cmvn: none"))
    r = run(work, an4, "--stage", "2", "--stop-stage", "2", "--fbank-conf", conf, "--dump", work / "dump_none", *small)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "cmvn: none" in (work / "dump_none" / "dev" / "features.yaml").read_text()
    assert not (work / "dump_none" / "dev" / "cmvn.scp").exists() and not (work / "dump").exists()
    r = run(work, an4, "--stage", "2", *small)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [l for l in r.stdout.splitlines() if l.startswith(("%WER", "%CER"))]
    assert [l.split()[0] for l in lines] == ["%WER", "%CER"] * 4, r.stdout
    assert lines[-2].endswith("| blstm_lm_test") and " | 3 " in lines[-2]  # test: the 3 transcribed utterances
    assert (work / "exp" / "blstm" / "decode_lm_dev" / "scoring" / "cer_summary").is_file()
    assert (work / "dump" / "train_sp" / "cmvn.scp").is_file()  # the recipe's features: per-speaker CMVN
    # stages 1-7 are recipes/template/run.sh's: it ends with the packed model, LM and tuned weights inside
    pack = work / "exp" / "blstm" / "pack"
    assert r.stdout.rstrip().splitlines()[-1].startswith(f"packed model: {pack}")
    assert {"lm.arpa", "params.yaml", "MODEL.md"} <= {p.name for p in pack.iterdir()}
    # the LM weight, word bonus and attention rescoring weight were chosen on dev (a 2 x 2 grid at each of
    # --att-weights auto's 0,0.5,1,2: conf/train.yaml trains the attention decoder) and used unchanged on test
    tuned = work / "exp" / "blstm" / "tune_lm_dev"
    rows = [line.split("\t") for line in (tuned / "grid.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 16 and sorted({float(r[3]) for r in rows}) == [0, 0.5, 1, 2]
    assert (tuned / "text").read_text() == (work / "exp" / "blstm" / "decode_lm_dev" / "text").read_text()
    # a CTC-only model (model.att_weight 0): auto tries no rescoring instead of failing on the missing decoder
    r = run(work, an4, "--stage", "4", "--tag", "ctc", "--decode-sets", "dev", *small,
            "--set", "model.att_weight=0")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = (work / "exp" / "ctc" / "tune_lm_dev" / "grid.tsv").read_text().splitlines()[1:]
    assert len(rows) == 4 and {line.split("\t")[3] for line in rows} == {"0"}
    # without AN4_DIR stage 0 says what to give
    r = run(tmp_path / "w2")
    assert r.returncode == 1 and "give AN4_DIR" in r.stderr
