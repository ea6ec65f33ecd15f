"""Joint CTC/attention training (model.att_weight): the attention decoder's CE by hand, its independence
of batch mates, the mixed loss in training only, that it learns, and the refusals."""

import pytest
import torch
import torch.nn.functional as F

from asrtrain.config import ModelConfig
from asrtrain.errors import AsrError
from asrtrain.features.dataset import Batch
from asrtrain.model.attention import AttentionDecoder
from asrtrain.model.blstm import build_model
from asrtrain.train.loop import compute_loss
from tests.helpers.attention_model import small, two_orders_model


def test_without_att_weight_the_model_has_no_decoder():
    """att_weight 0 (the default) builds the model exactly as before: same parameters, same outputs."""
    torch.manual_seed(0)
    plain = build_model(ModelConfig(input_dim=4, num_targets=6, hidden=8, num_layers=2, stack=1, subsample=1))
    assert not hasattr(plain, "decoder") and all(not k.startswith("decoder") for k in plain.state_dict())
    joint = build_model(small())
    extra = {k for k in joint.state_dict() if k.startswith("decoder.")}
    assert extra and set(joint.state_dict()) - extra == set(plain.state_dict())


def test_the_ce_is_each_piece_then_the_end_token_given_the_pieces_before():
    """One utterance, targets [3, 1]: the CE is -log p(3 | start) - log p(1 | start 3) - log p(end | start 3 1),
    computed here step by step from the decoder's own layers (a single encoder frame: the context is it)."""
    torch.manual_seed(1)
    dec = AttentionDecoder(enc_dim=5, num_targets=6, dim=7).double()
    enc = torch.randn(1, 1, 5, dtype=torch.float64)
    got = dec(enc, torch.tensor([1]), torch.tensor([[3, 1, -1]]), torch.tensor([2]))
    h = c = torch.zeros(1, 7, dtype=torch.float64)
    ctx, want = torch.zeros(1, 5, dtype=torch.float64), 0.0
    for prev, gold in [(0, 3), (3, 1), (1, 0)]:
        h, c = dec.cell(torch.cat([dec.embed(torch.tensor([prev])), ctx], -1), (h, c))
        ctx = enc[:, 0]  # one frame: all the attention on it
        want = want - F.log_softmax(dec.out(torch.cat([h, ctx], -1)), -1)[0, gold]
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-6)  # the loss is float32


def test_an_utterances_ce_does_not_depend_on_its_batch_mates():
    """Padded encoder frames get no attention and padded targets no loss: the CE of a batch is the sum of
    its utterances' CEs alone."""
    torch.manual_seed(2)
    dec = AttentionDecoder(enc_dim=5, num_targets=6, dim=7).double().eval().requires_grad_(False)
    enc = torch.randn(2, 9, 5, dtype=torch.float64)
    enc_lens, targets, tlens = torch.tensor([9, 4]), torch.tensor([[1, 2, 3, 4], [5, 2, -1, -1]]), torch.tensor([4, 2])
    together = dec(enc, enc_lens, targets, tlens)
    alone = [dec(enc[i:i + 1, :enc_lens[i]], enc_lens[i:i + 1], targets[i:i + 1, :tlens[i]], tlens[i:i + 1])
             for i in range(2)]
    assert float(together) == pytest.approx(float(alone[0] + alone[1]), rel=1e-6)
    enc2 = enc.clone()
    enc2[1, 4:] = 1e3  # garbage in the padding changes nothing
    assert float(dec(enc2, enc_lens, targets, tlens)) == pytest.approx(float(together), rel=1e-6)


def batch_of(feats, lens, targets, tlens):
    return Batch([f"u{i}" for i in range(len(lens))], feats, lens, targets, tlens)


def test_joint_loss_mixes_the_ce_in_training_only_and_reaches_every_parameter():
    torch.manual_seed(3)
    model = build_model(small())
    feats, lens = torch.randn(2, 9, 4), torch.tensor([9, 6])
    targets, tlens = torch.tensor([[1, 2, 3], [4, 1, 0]]), torch.tensor([3, 2])
    batch = batch_of(feats, lens, targets, tlens)
    lp, out_lens, ce = model(feats, lens, att=(targets, tlens))
    ctc = F.ctc_loss(lp.transpose(0, 1), targets, out_lens, tlens, reduction="sum", zero_infinity=True)
    mixed, count = compute_loss(model.train(), batch, "ctc")
    assert count == 5 and float(ce.detach()) > 0
    assert torch.allclose(mixed, 0.6 * ctc + 0.4 * ce)
    mixed.backward()
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    plain, _ = compute_loss(model.eval(), batch, "ctc")  # the dev loss: CTC alone, comparable across runs
    assert torch.allclose(plain, ctc)
    # an empty slice (a learner with no utterances this step) still touches every parameter, with zeros
    model.train().zero_grad()
    empty = batch_of(torch.zeros(0, 1, 4), torch.zeros(0, dtype=torch.long), torch.zeros(0, 1, dtype=torch.long),
                     torch.zeros(0, dtype=torch.long))
    zero, n = compute_loss(model, empty, "ctc")
    zero.backward()
    assert n == 0 and float(zero.detach()) == 0.0
    assert all(p.grad is not None and not bool(p.grad.any()) for p in model.parameters())


def test_the_decoder_learns_to_predict_the_pieces_from_the_encoder():
    """The CE per piece of :func:`two_orders_model` must fall far below chance (log 6 = 1.79), and
    swapping the two utterances' features must make it much worse: which sequence to start comes only
    from the encoder (history alone cannot tell)."""
    model, feats, lens, targets, tlens = two_orders_model()
    with torch.no_grad():
        _, _, ce = model(feats, lens, att=(targets, tlens))
        _, _, swapped = model(feats.flip(0), lens, att=(targets, tlens))
    assert float(ce) / 12 < 0.2, float(ce)  # 5 pieces + the end, twice
    assert float(swapped) > float(ce) + 2.0, (float(swapped), float(ce))


@pytest.mark.parametrize("sets", [{"att_weight": 1.0}, {"att_weight": 0.3, "loss": "ce"}, {"att_weight": -0.1},
                                  {"att_weight": 0.3, "att_dim": 0}])
def test_att_weight_refuses_what_it_cannot_do(sets):
    with pytest.raises(AsrError, match="att_weight"):
        ModelConfig(**sets).validate()


def test_joint_training_runs_resumes_and_decodes_through_the_cli(tmp_path):
    """`asrtrain train --set model.att_weight=0.3`: the checkpoints hold the decoder, the final model is
    averaged with it, a resumed run ends where an uninterrupted one does, and `asrtrain decode` runs
    the CTC branch of the joint model."""

    from click.testing import CliRunner

    from asrtrain.cli import cli
    from tests.helpers.featfix import make_task
    tr, dev, tok = make_task(tmp_path / "feats", 24, 6)

    def train(exp, *extra):
        args = ["train", "--train-data", str(tr), "--dev-data", str(dev), "--tokenizer", str(tok), "--exp-dir",
                str(exp), "--set", "model.num_layers=1", "--set", "model.hidden=16", "--set", "model.subsample=2",
                "--set", "train.max_frames=1500", "--set", "train.epochs=2", "--set", "model.att_weight=0.3",
                "--set", "model.att_dim=12", "--set", "train.checkpoint_every_steps=3"]
        return CliRunner().invoke(cli, args + list(extra), catch_exceptions=False)

    assert train(tmp_path / "full").exit_code == 0
    r = train(tmp_path / "cut", "--stop-after-steps", "4")
    assert r.exit_code == 0, r.output
    r = train(tmp_path / "cut", "--resume")
    assert r.exit_code == 0, r.output
    a = torch.load(tmp_path / "full" / "final.pt", map_location="cpu", weights_only=True)["model"]
    b = torch.load(tmp_path / "cut" / "final.pt", map_location="cpu", weights_only=True)["model"]
    assert any(k.startswith("decoder.") for k in a) and a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6)
    out = tmp_path / "dec"
    r = CliRunner().invoke(cli, ["decode", str(tmp_path / "full"), str(dev), str(out)])
    assert r.exit_code == 0, r.output
    assert len((out / "text").read_text().splitlines()) == len((dev / "text").read_text().splitlines())
    # attention rescoring: tune-lm's grid gains the weights (0 first), decode --params repeats the winner
    r = CliRunner().invoke(cli, ["lm", "train", "--text", str(tr / "text"), "--out", str(tmp_path / "lm")])
    assert r.exit_code == 0, r.output
    lm = str(tmp_path / "lm" / "lm.arpa")
    tuned = tmp_path / "tune"
    r = CliRunner().invoke(cli, ["tune-lm", str(tmp_path / "full"), str(dev), str(tuned), "--lm", lm, "--lm-weights",
                                 "0.5", "--word-bonuses", "0,2", "--att-weights", "1,0", "--nbest", "4",
                                 "--beam-size", "6"])
    assert r.exit_code == 0, r.output
    grid = [line.split("\t") for line in (tuned / "grid.tsv").read_text().splitlines()]
    assert grid[0][3] == "att_rescore" and [g[2:4] for g in grid[1:]] == [["0", "0"], ["0", "1"], ["2", "0"],
                                                                           ["2", "1"]]
    r = CliRunner().invoke(cli, ["tune-lm", str(tmp_path / "full"), str(dev), str(tmp_path / "auto"), "--lm",
                                 lm, "--lm-weights", "0.5", "--word-bonuses", "0", "--nbest", "4",
                                 "--beam-size", "6"])
    assert r.exit_code == 0, r.output  # --att-weights auto (the default): the model has a decoder
    rows = (tmp_path / "auto" / "grid.tsv").read_text().splitlines()[1:]
    assert [row.split("\t")[3] for row in rows] == ["0", "0.5", "1", "2"]
    best = (tuned / "best.yaml").read_text()
    assert "nbest: 4" in best and ("att_rescore: 1.0" in best or "att_rescore: 0.0" in best)
    r = CliRunner().invoke(cli, ["decode", str(tmp_path / "full"), str(dev), str(tmp_path / "dec_att"), "--lm", lm,
                                 "--params", str(tuned / "best.yaml")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "dec_att" / "text").read_text() == (tuned / "text").read_text()
    r = CliRunner().invoke(cli, ["decode", str(tmp_path / "full"), str(dev), str(tmp_path / "d2"), "--lm", lm,
                                 "--att-rescore", "0.5", "--nbest", "3"])
    assert r.exit_code == 0, r.output
    for bad, says in ((["--att-rescore", "0.5"], "n-best of our lexicon search"),
                      (["--lm", lm, "--att-rescore", "-1"], "--att-rescore -1"),
                      (["--lm", lm, "--nbest", "3"], "--nbest is the n-best"),
                      (["--lm", lm, "--att-rescore", "0.5", "--engine", "flashlight"], "n-best of our lexicon")):
        r = CliRunner().invoke(cli, ["decode", str(tmp_path / "full"), str(dev), str(tmp_path / "bad")] + bad)
        assert r.exit_code == 1 and says in r.output and "Traceback" not in r.output, (bad, r.output)
