"""A miniature CMU AN4 (an4_sphere) layout for tests: a few short SPHERE files and CMU's list files."""

from pathlib import Path

from tests.helpers.sphere_fixture import tone, write_sphere

# (AN4 file name, transcript) as CMU writes them; the last test speaker has audio but no transcript
TRAIN = [("an251-fash-b", "YES"), ("cen1-fash-b", "ONE TWO"), ("an60-mblb-b", "GO"),
         ("cen2-mblb-b", "ENTER FIVE"), ("an1-fbbh-b", "NO"), ("cen7-fbbh-b", "RUBOUT A B")]
TEST = [("an416-fjlp-b", "NO"), ("cen3-fjlp-b", "SIX"), ("an10-mjwl-b", "STOP")]
UNTRANSCRIBED = ["an406-fcaw-b"]


def make_an4(root: Path) -> Path:
    """CMU's layout: etc/an4_{train,test}.{fileids,transcription}, wav/an4{,test}_clstk/SPK/NAME.sph."""
    etc = root / "etc"
    etc.mkdir(parents=True)
    for split, rows, sub, extra in (("train", TRAIN, "an4_clstk", []),
                                    ("test", TEST, "an4test_clstk", UNTRANSCRIBED)):
        names = [n for n, _ in rows] + extra
        for i, name in enumerate(names):
            spk = name.split("-")[1]
            (root / "wav" / sub / spk).mkdir(parents=True, exist_ok=True)
            write_sphere(root / "wav" / sub / spk / f"{name}.sph", tone(0.3 + 0.05 * i, 16000, seed=i), rate=16000)
        (etc / f"an4_{split}.fileids").write_text("".join(f"{sub}/{n.split('-')[1]}/{n}\n" for n in names))
        if split == "train":  # train has <s> ... </s>; test has none and starts with a blank line (as CMU's)
            body = "".join(f"<s> {t} </s> ({n})\n" for n, t in rows)
        else:
            body = "\n" + "".join(f"{t} ({n})\n" for n, t in rows)
        (etc / f"an4_{split}.transcription").write_text(body)
    return root
