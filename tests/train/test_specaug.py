"""SpecAugment: the spans drawn from the generator give the tensor of the span-by-span reference (the
implementation before 2026-11-25, kept here as the oracle) on the CPU path and on the accelerator path
(its masks, applied in one masked_fill), and mask what they should."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from asrtrain.config import SpecAugConfig
from asrtrain.train.specaug import draw_spans, masked, spec_augment, warp_sources, warped


def reference(x, lengths, cfg, gen):
    """Span by span on ``x``: the earlier implementation, one slice assignment per mask."""
    x = x.clone()
    n, _, d = x.shape
    for i in range(n):
        t = int(lengths[i])
        for _ in range(cfg.freq_masks):
            w = int(torch.randint(0, cfg.freq_width + 1, (1,), generator=gen))
            f0 = int(torch.randint(0, max(1, d - w), (1,), generator=gen))
            x[i, :, f0:f0 + w] = 0.0
        max_t = max(1, int(cfg.time_width * t))
        for _ in range(cfg.time_masks):
            w = int(torch.randint(0, max_t + 1, (1,), generator=gen))
            t0 = int(torch.randint(0, max(1, t - w), (1,), generator=gen))
            x[i, t0:t0 + w, :] = 0.0
    return x


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 6), t_max=st.integers(1, 40), d=st.integers(1, 20), seed=st.integers(0, 2**31),
       freq_masks=st.integers(0, 3), freq_width=st.integers(0, 25), time_masks=st.integers(0, 3),
       time_width=st.floats(0.0, 1.5))
def test_equals_the_span_by_span_reference(n, t_max, d, seed, freq_masks, freq_width, time_masks, time_width):
    cfg = SpecAugConfig(enabled=True, freq_masks=freq_masks, freq_width=freq_width, time_masks=time_masks,
                        time_width=time_width)
    torch.manual_seed(seed)
    x = torch.randn(n, t_max, d)
    lengths = torch.randint(1, t_max + 1, (n,))
    lengths[0] = t_max
    got = spec_augment(x, lengths, cfg, torch.Generator().manual_seed(seed))
    want = reference(x, lengths, cfg, torch.Generator().manual_seed(seed))
    assert torch.equal(got, want)
    assert torch.equal(got.signbit(), want.signbit())  # +0.0 fills, as the assignment gave
    # The accelerator path's masks, applied on the CPU: the same tensor.
    bands, spans = draw_spans(lengths.tolist(), d, cfg, torch.Generator().manual_seed(seed))
    on_masks = masked(x, bands, spans)
    assert torch.equal(on_masks, want) and torch.equal(on_masks.signbit(), want.signbit())


def test_masks_whole_bands_and_spans_and_leaves_the_rest_alone():
    cfg = SpecAugConfig(enabled=True, freq_masks=2, freq_width=15, time_masks=2, time_width=0.05)
    x = torch.rand(32, 600, 80) + 1.0  # no zeros of its own
    lengths = torch.randint(300, 601, (32,))
    gen = torch.Generator().manual_seed(7)
    y = spec_augment(x, lengths, cfg, gen)
    assert y.data_ptr() != x.data_ptr() and (x > 0).all()  # the input is not changed
    zero = y == 0
    assert torch.equal(y[~zero], x[~zero])
    band = zero.all(dim=1)  # (N, D): bins zero over all frames
    span = zero.all(dim=2)  # (N, T): frames zero over all bins
    assert torch.equal(zero, band.unsqueeze(1) | span.unsqueeze(2))  # nothing but bands and spans
    assert band.sum(dim=1).max() <= 2 * 15 and band.any()
    assert (span.sum(dim=1) <= 2 * (0.05 * lengths).long()).all() and span.any()


def test_disabled_returns_the_input():
    x = torch.randn(2, 5, 3)
    assert spec_augment(x, torch.tensor([5, 4]), SpecAugConfig(enabled=False), torch.Generator()) is x


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run pytest -m gpu on a GPU machine)")
def test_cuda_masks_equal_the_cpu_masks():
    cfg = SpecAugConfig(enabled=True)
    x = torch.randn(16, 300, 80)
    lengths = torch.randint(100, 301, (16,))
    got = spec_augment(x.cuda(), lengths, cfg, torch.Generator().manual_seed(3))
    assert got.device.type == "cuda"
    assert torch.equal(got.cpu(), spec_augment(x, lengths, cfg, torch.Generator().manual_seed(3)))


def test_warp_of_one_is_the_identity_and_keeps_the_ends():
    src = warp_sources(torch.tensor([1.0, 0.9, 1.1]), 80)
    assert torch.equal(src[0], torch.arange(80, dtype=torch.float64))
    assert (src[:, 0] == 0).all() and (src[:, -1] == 79).all()
    assert (src[:, 1:] > src[:, :-1]).all()  # monotone: no bin read twice, none skipped backwards
    x = torch.randn(2, 7, 80)
    assert torch.allclose(warped(x, torch.tensor([1.0, 1.0])), x)


def test_warp_moves_a_spectral_peak_by_its_factor():
    """A peak at bin 20 (below the knee) moves to bin 20 a: up for a > 1 (a shorter vocal tract)."""
    x = torch.zeros(3, 4, 80)
    x[:, :, 20] = 1.0
    got = warped(x, torch.tensor([1.0, 1.2, 0.85]))
    assert got[:, 0].argmax(dim=1).tolist() == [20, 24, 17]
    assert torch.equal(got[:, 1:], got[:, :1].expand(3, 3, 80))  # every frame alike


def test_warp_off_draws_the_same_masks_and_on_changes_only_the_values():
    x = torch.randn(4, 50, 80)
    lengths = torch.tensor([50, 40, 30, 20])
    plain = spec_augment(x, lengths, SpecAugConfig(enabled=True), torch.Generator().manual_seed(5))
    ref = reference(x, lengths, SpecAugConfig(enabled=True), torch.Generator().manual_seed(5))
    assert torch.equal(plain, ref)
    warp = spec_augment(x, lengths, SpecAugConfig(enabled=True, freq_warp=0.1), torch.Generator().manual_seed(5))
    assert torch.equal(warp == 0, plain == 0)  # the same bands and spans are masked
    assert not torch.allclose(warp, plain)


@pytest.mark.parametrize("value", [-0.1, 0.5, float("nan")])
def test_freq_warp_out_of_range_is_refused(value):
    from asrtrain.errors import AsrError
    with pytest.raises(AsrError, match="specaug.freq_warp"):
        SpecAugConfig(freq_warp=value).validate()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run pytest -m gpu on a GPU machine)")
def test_cuda_warp_equals_the_cpu_warp():
    cfg = SpecAugConfig(enabled=True, freq_warp=0.1)
    x = torch.randn(16, 300, 80)
    lengths = torch.randint(100, 301, (16,))
    got = spec_augment(x.cuda(), lengths, cfg, torch.Generator().manual_seed(3))
    assert got.device.type == "cuda"
    assert torch.allclose(got.cpu(), spec_augment(x, lengths, cfg, torch.Generator().manual_seed(3)), atol=1e-6)
