"""recipes/swbd/run.sh on the miniature LDC layout: stage 0 outputs, --stage/--stop-stage, .done markers,
and the asrtrain command sequence of all stages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from asrtrain.config import FeatureConfig
from asrtrain.config.file import load_config, load_section
from asrtrain.data.table import read_table
from tests.helpers.swbd_fixture import make_hub5, make_swbd

pytestmark = pytest.mark.slow  # the recipe's bash scripts in subprocesses

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "swbd"


def _run(recipe: Path, *args: str, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["ASRTRAIN"] = f"{sys.executable} -m asrtrain"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    res = subprocess.run(["bash", str(recipe / "run.sh"), *args], env=env, capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


@pytest.fixture()
def recipe(tmp_path):
    """A copy of recipes/swbd (run.sh works inside its own directory) and the corpus options for it."""
    dest = tmp_path / "swbd"
    shutil.copytree(RECIPE, dest, ignore=shutil.ignore_patterns("data", "dump", "exp"))
    swbd, hub5 = make_swbd(tmp_path / "ldc"), make_hub5(tmp_path / "ldc")
    opts = ["--swbd-dir", str(swbd.swbd_dir), "--hub5-audio-dir", str(hub5.audio_dir),
            "--hub5-text-dir", str(hub5.text_dir)]
    return dest, opts


def test_stage0_prepares_all_data_dirs(recipe):
    dest, opts = recipe
    res = _run(dest, "--stage", "0", "--stop-stage", "0", *opts)
    for name in ("train", "train_dev", "train_nodev", "train_nodup", "eval2000"):
        for f in ("text", "segments", "utt2spk", "spk2utt", "wav.scp", "reco2file_and_channel"):
            assert (dest / "data" / name / f).is_file(), (name, f)
    assert len(read_table(dest / "data" / "train" / "text")) == 15
    assert len(read_table(dest / "data" / "train_dev" / "text")) == 15  # dev takes the first 4000
    assert len(read_table(dest / "data" / "eval2000" / "text")) == 4
    assert (dest / "data" / "eval2000" / "stm").is_file() and (dest / "data" / "eval2000" / "glm").is_file()
    assert (dest / "data" / ".stage0.done").is_file()
    assert "stage 0: data preparation" in res.stdout and "stage 1" not in res.stdout
    assert not (dest / "dump").exists()  # --stop-stage 0 stopped before features

    # the marker skips the stage on a second run
    (dest / "data" / "train" / "text").write_text("kept\n")
    res = _run(dest, "--stage", "0", "--stop-stage", "0", *opts)
    assert "done already" in res.stdout
    assert (dest / "data" / "train" / "text").read_text() == "kept\n"

    # a stage range that excludes 0 runs nothing of it; deleting the marker redoes it
    (dest / "data" / ".stage0.done").unlink()
    res = _run(dest, "--stage", "6", *opts)
    assert "stage 0" not in res.stdout and not (dest / "data" / ".stage0.done").exists()
    # corpus paths relative to the caller's directory work although run.sh works in its own directory
    rel = [o if o.startswith("--") else os.path.relpath(o, dest.parent) for o in opts]
    _run(dest, "--stop-stage", "0", *rel, cwd=dest.parent)
    assert read_table(dest / "data" / "train" / "text")["sw02005-A_000020-000150"] == "uh-huh"


def test_stage0_passes_drop_noise_and_no_acronyms_to_prepare(recipe):
    """The transcript options the README documents reach `asrtrain prepare swbd` through run.sh."""
    dest, opts = recipe
    _run(dest, "--stage", "0", "--stop-stage", "0", *opts)
    kept = " ".join(read_table(dest / "data" / "train" / "text").values())
    assert "[laughter]" in kept and "i._b._m.'s" in kept
    (dest / "data" / ".stage0.done").unlink()
    _run(dest, "--stage", "0", "--stop-stage", "0", "--drop-noise", "--no-acronyms", *opts)
    dropped = " ".join(read_table(dest / "data" / "train" / "text").values())
    assert "[laughter]" not in dropped and "[noise]" not in dropped and "ibm's" in dropped


def test_stage0_error_on_misnamed_corpus(recipe, tmp_path):
    dest, opts = recipe
    opts[1] = opts[3]  # the Hub5 audio directory given as Switchboard's
    res = _run(dest, "--stage", "0", "--stop-stage", "0", *opts, check=False)
    assert res.returncode != 0
    assert "swb1_d1/data/swNNNNN.sph" in res.stderr and "Traceback" not in res.stderr
    assert not (dest / "data" / ".stage0.done").exists()


def test_run_sh_options_and_help(recipe):
    dest, _ = recipe
    res = _run(dest, "--help")
    assert "LDC97S62" in res.stdout and "hub5e00.english.000405.stm" in res.stdout
    res = _run(dest, "--no-such-option", "1", check=False)
    assert res.returncode != 0 and "unknown option" in res.stderr
    res = _run(dest, "--stage", "x", check=False)
    assert res.returncode != 0


def test_configs_load():
    conf = RECIPE / "conf"
    feats = load_section(FeatureConfig, conf / "fbank.yaml")
    assert feats.sample_rate == 8000 and feats.num_mel_bins == 40 and feats.cmvn == "speaker"
    sizes = {}
    for path in sorted(conf.glob("train_*.yaml")):
        cfg = load_config(path)
        sizes[path.name] = (cfg.model.num_layers, cfg.model.hidden)
        assert cfg.features == feats  # the training config agrees with the features the recipe computes
        assert cfg.tokenizer.model_type == "bpe" and cfg.tokenizer.vocab_size == 2000
    assert sizes == {"train_blstm2x128.yaml": (2, 128), "train_blstm4x320.yaml": (4, 320),
                     "train_blstm6x512.yaml": (6, 512)}
    strategies = {}
    for path in sorted((conf / "strategy").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        assert list(data) == (["dist", "dp"] if path.stem.endswith("-dp") else ["dist"]), path
        cfg = load_config(path)
        strategies[path.stem] = (cfg.dist.strategy, cfg.dist.learners)
        assert cfg.dist.learners % 2 == 0 or cfg.dist.strategy == "ssgd"
    assert strategies == {"ssgd": ("ssgd", 4), "adpsgd": ("adpsgd", 4), "h-adpsgd": ("h-adpsgd", 8),
                          "adpsgd-dp": ("adpsgd", 4), "periodic": ("periodic", 4),
                          "periodic-adaptive": ("periodic", 4)}
    h = load_config(conf / "strategy" / "h-adpsgd.yaml").dist
    assert (h.learners // h.learners_per_node) % 2 == 0  # the leaders' ring must be bipartite


def test_all_stages_call_asrtrain_as_documented(recipe, tmp_path):
    """Stages 0-5 with a stand-in asrtrain that records its arguments: the exact command sequence."""
    dest, opts = recipe
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "fake-asrtrain"
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    fake.chmod(0o755)
    env = dict(os.environ, ASRTRAIN=str(fake))
    args = ["--nj", "3", "--strategy", "h-adpsgd", "--fisher-dirs", "f1 /abs/f2", "--sph2pipe", "/x/sph2pipe",
            *opts]
    res = subprocess.run(["bash", str(dest / "run.sh"), *args], env=env, capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    swbd_dir, audio, text = opts[1], opts[3], opts[5]
    assert calls.read_text().splitlines() == [
        f"prepare swbd {swbd_dir} data --force --sph2pipe /x/sph2pipe",
        f"prepare eval2000 {audio} {text} data/eval2000 --force --sph2pipe /x/sph2pipe",
        f"prepare fisher {tmp_path}/f1 /abs/f2 data/train_fisher --combine-with data/train_nodup "
        "--combined-dir data/train_nodup_fisher --sph2pipe /x/sph2pipe",
        "features data/train_nodup_fisher dump/train_nodup_fisher --nj 3 --conf conf/fbank.yaml",
        "features data/train_dev dump/train_dev --nj 3 --conf conf/fbank.yaml",
        "features data/eval2000 dump/eval2000 --nj 3 --conf conf/fbank.yaml",
        "tokenizer train --text dump/train_nodup_fisher/text --model-type bpe --vocab-size 2000 "
        "--out exp/tokenizer",
        "train --config conf/train_blstm6x512.yaml --strategy-config conf/strategy/h-adpsgd.yaml "
        "--train-data dump/train_nodup_fisher --dev-data dump/train_dev "
        "--tokenizer exp/tokenizer/tokenizer.model --exp-dir exp/blstm",
        "decode exp/blstm dump/eval2000 exp/blstm/decode_eval2000",
        "score --stm data/eval2000/stm --ctm exp/blstm/decode_eval2000/ctm --glm data/eval2000/glm "
        "--out-dir exp/blstm/decode_eval2000/scoring",
    ]
    for marker in ("data/.stage0.done", "dump/.stage1.done", "exp/tokenizer/.stage2.done",
                   "exp/blstm/.stage3.done", "exp/blstm/decode_eval2000/.stage4.done",
                   "exp/blstm/decode_eval2000/scoring/.stage5.done"):
        assert (dest / marker).is_file(), marker
    # a rerun does nothing; removing stage 3's marker and running 3..4 redoes training only
    calls.unlink()
    (dest / "exp/blstm/.stage3.done").unlink()
    res = subprocess.run(["bash", str(dest / "run.sh"), "--stage", "3", "--stop-stage", "4",
                          "--strategy", "single"], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert calls.read_text().splitlines() == [
        "train --config conf/train_blstm6x512.yaml --train-data dump/train_nodup --dev-data dump/train_dev "
        "--tokenizer exp/tokenizer/tokenizer.model --exp-dir exp/blstm"]
