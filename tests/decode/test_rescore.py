"""Attention rescoring of the lexicon n-best: the decoder's per-hypothesis log-probability, the choice it
makes, and the refusals."""

import pytest
import torch

from asrtrain.decode.rescore import attention_scores, check_rescorable, pick
from asrtrain.errors import AsrError
from asrtrain.model.attention import AttentionDecoder
from asrtrain.model.blstm import build_model

from tests.helpers.attention_model import small, two_orders_model


def test_sequence_logprob_is_minus_each_utterances_ce():
    torch.manual_seed(0)
    dec = AttentionDecoder(enc_dim=5, num_targets=6, dim=7).double().eval().requires_grad_(False)
    enc = torch.randn(3, 8, 5, dtype=torch.float64)
    enc_lens, tlens = torch.tensor([8, 5, 3]), torch.tensor([4, 0, 2])
    targets = torch.tensor([[1, 2, 3, 4], [-1, -1, -1, -1], [5, 2, -1, -1]])
    lp = dec.sequence_logprob(enc, enc_lens, targets, tlens)
    assert lp.shape == (3,) and bool((lp < 0).all())
    for i in range(3):
        alone = dec(enc[i:i + 1, :enc_lens[i]], enc_lens[i:i + 1], targets[i:i + 1, :max(1, tlens[i])],
                    tlens[i:i + 1])
        assert float(lp[i]) == pytest.approx(-float(alone), rel=1e-6)
    assert float(lp.sum()) == pytest.approx(-float(dec(enc, enc_lens, targets, tlens)), rel=1e-6)


def test_attention_scores_batch_the_hypotheses_of_one_utterance():
    torch.manual_seed(1)
    model = build_model(small()).eval().requires_grad_(False)
    enc, lens, _ = model.encode(torch.randn(1, 7, 4), torch.tensor([7]))
    hyps = [[1, 2, 3], [], [4]]
    got = attention_scores(model, enc[0], hyps)
    for h, g in zip(hyps, got):
        t = torch.tensor([h or [0]])
        want = model.decoder.sequence_logprob(enc, lens, t, torch.tensor([len(h)]))
        assert g == pytest.approx(float(want), rel=1e-5)
    assert attention_scores(model, enc[0], []) == []


def test_a_trained_decoder_reorders_the_nbest_and_weight_zero_keeps_the_search():
    """The decoder learns which order the pieces of each utterance come in; an n-best whose search favours
    the wrong order is put right by rescoring at weight 1, and left as the search had it at weight 0."""
    model, feats, lens, _, _ = two_orders_model()
    with torch.no_grad():
        enc, _, _ = model.encode(feats, lens)
    right, wrong = [1, 2, 3, 4, 5], [5, 4, 3, 2, 1]
    nbest = [(wrong, [0] * 5, -3.0), (right, [0] * 5, -4.0)]  # the search prefers the wrong order by 1 nat
    att = attention_scores(model, enc[0], [h[0] for h in nbest])
    assert att[1] > att[0] + 2.0, att
    assert pick(nbest, att, 1.0)[0] == right
    assert pick(nbest, att, 0.0)[0] == wrong


def test_pick_keeps_the_search_order_among_equals():
    nbest = [([1], [0], -1.0), ([2], [0], -2.0), ([3], [0], -2.0)]
    assert pick(nbest, [0.0, 0.0, 0.0], 1.0)[0] == [1]
    assert pick(nbest, [-2.0, 0.0, 0.0], 1.0)[0] == [2]


def test_a_model_without_a_decoder_is_refused_in_one_line(tmp_path):
    with pytest.raises(AsrError, match="att_weight") as err:
        check_rescorable(build_model(small(att_weight=0.0)), tmp_path)
    assert "config.yaml" in str(err.value)
    check_rescorable(build_model(small()), tmp_path)
