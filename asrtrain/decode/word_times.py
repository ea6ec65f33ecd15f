"""Word times from CTC token emissions, written as a NIST ctm relative to the recording."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from asrtrain.text.tokenizer import UNK_WORD

Word = Tuple[str, float, float]  # (word, start_s, dur_s) relative to the utterance


def words_with_times(pieces: Sequence[str], frames: Sequence[int], frame_s: float,
                     unk_piece: Optional[str] = None) -> List[Word]:
    """Group sentencepiece pieces into words ('▁' starts a word); a word spans from its first piece's
    frame to one frame past its last piece's frame. ``unk_piece`` (the tokenizer's unknown piece) is a
    word of its own, written ``<unk>``, as :meth:`asrtrain.text.tokenizer.Tokenizer.decode` writes it."""
    words: List[Word] = []
    cur, start, end = "", None, None
    for piece, f in zip(pieces, frames):
        if piece == unk_piece:
            if cur:
                words.append((cur, start * frame_s, (end + 1 - start) * frame_s))
                cur, start = "", None
            words.append((UNK_WORD, f * frame_s, frame_s))
            continue
        if piece.startswith("\u2581") and cur:
            words.append((cur, start * frame_s, (end + 1 - start) * frame_s))
            cur, start = "", None
        text = piece.lstrip("\u2581")
        if not text and not cur:
            continue
        if start is None:
            start = f
        cur += text
        end = f
    if cur:
        words.append((cur, start * frame_s, (end + 1 - start) * frame_s))
    return words


def ctm_lines(utt: str, words: List[Word], segments: Dict[str, Tuple[str, float, float]],
              reco2fc: Dict[str, Tuple[str, str]]) -> List[str]:
    """``<file> <channel> <begin> <dur> <word> <conf>`` lines, times made recording-relative."""
    rec, seg_start, seg_end = segments[utt]
    file_id, channel = reco2fc.get(rec, (rec, "1"))
    out = []
    for word, start, dur in words:
        begin = min(seg_start + start, seg_end)
        dur = max(0.01, min(dur, seg_end - begin)) if seg_end > begin else 0.01
        out.append(f"{file_id} {channel} {begin:.2f} {dur:.2f} {word} 1.00")
    return out
