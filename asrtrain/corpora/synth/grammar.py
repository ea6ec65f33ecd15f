"""The sentence grammar of the synthetic corpus: home-assistant commands, travel, weather, dates.

Every word is lower-case ASCII letters, with no punctuation and no digits (numbers are spelled out:
``twenty five``), so word-level WER is meaningful. The vocabulary avoids homophones (``to``/``two``,
``for``/``four``, ``hour``/``our``, ``write``/``right``): an acoustic model without a language model
cannot tell them apart, and the demo scores words. ``tests/corpora/test_synth.py`` checks with
espeak's own phonemes that no two words sound the same.

:func:`sentence` draws one sentence of 4 to 12 words from a ``numpy.random.Generator``; the result
depends only on the generator's state, so a seed reproduces the text.
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

MIN_WORDS, MAX_WORDS = 4, 12

UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
            "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth "
            "twentieth").split()
DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
MONTHS = ("january february march april may june july august september october november "
          "december").split()
PARTS_OF_DAY = "morning afternoon evening".split()
NAMES = ("anna james maria david sarah michael emma daniel laura thomas olivia peter sophie robert "
         "linda george helen frank alice kevin nina oscar julia victor diana henry simon rachel "
         "martin chloe lucas fiona").split()
CITIES = ("london paris berlin madrid rome vienna dublin lisbon oslo stockholm athens cairo tokyo "
          "sydney toronto chicago boston denver seattle miami houston montreal vancouver delhi "
          "bangkok singapore nairobi moscow amsterdam barcelona").split()
ROOMS = "kitchen bedroom bathroom garage garden office hallway basement attic balcony".split()
SWITCHABLE = "lights lamp heater fan radio television oven".split()
OPENABLE = "door window curtains blinds gate".split()
PLACES = ("station airport library museum park bank hospital school market stadium cinema "
          "pharmacy hotel restaurant").split()
COLORS = "green blue yellow orange purple white black pink".split()
GENRES = "jazz rock classical pop".split()
FOODS = "pizza salad soup bread milk eggs apples bananas cheese coffee tea juice rice pasta".split()
EVENTS = ("meeting appointment lesson class concert movie match party dinner lunch breakfast "
          "interview").split()
PEOPLE = "dentist doctor teacher manager mother father sister brother friend neighbor".split()
LANGUAGES = "french german spanish italian chinese japanese russian arabic".split()
WEATHER_ADJ = "sunny cloudy windy rainy foggy warm cold".split()
TRANSPORT = "flight train bus taxi ferry".split()
ITEMS = "message email note reminder song photo video document".split()
SIZES = "small medium large".split()
DIRECTIONS = "left straight".split()


def number(rng: np.random.Generator, low: int = 0, high: int = 99) -> List[str]:
    """A cardinal in ``[low, high]`` (at most 9999) spelled as words: ``forty two``."""
    n = int(rng.integers(low, high + 1))
    return spell(n)


def spell(n: int) -> List[str]:
    """Spell ``0 <= n <= 9999`` in words without ``and`` or hyphens: 342 -> three hundred forty two."""
    if not 0 <= n <= 9999:
        raise ValueError(f"cannot spell {n}")
    words: List[str] = []
    if n >= 1000:
        words += [UNITS[n // 1000], "thousand"]
        n %= 1000
        if n == 0:
            return words
    if n >= 100:
        words += [UNITS[n // 100], "hundred"]
        n %= 100
        if n == 0:
            return words
    if n < 20:
        return words + [UNITS[n]]
    words.append(TENS[n // 10 - 2])
    if n % 10:
        words.append(UNITS[n % 10])
    return words


def pick(rng: np.random.Generator, words: Sequence[str]) -> str:
    return words[int(rng.integers(len(words)))]


def clock(rng: np.random.Generator) -> List[str]:
    """A time of day: ``seven thirty``, ``half past six``, ``quarter past nine``, ``noon``..."""
    hour = UNITS[int(rng.integers(1, 13))]
    kind = int(rng.integers(6))
    if kind == 0:
        return [hour] + pick(rng, ["ten", "fifteen", "twenty", "thirty", "forty five", "fifty"]).split()
    if kind == 1:
        return ["half", "past", hour]
    if kind == 2:
        return ["quarter", pick(rng, ["past", "before"]), hour]
    if kind == 3:
        return [pick(rng, ["noon", "midnight"])]
    if kind == 4:
        return [hour, "in", "the", pick(rng, PARTS_OF_DAY)]
    return [hour, "sharp"]


def when(rng: np.random.Generator) -> List[str]:
    """A day reference: ``tomorrow``, ``on friday``, ``next week``, ``on march third``..."""
    kind = int(rng.integers(5))
    if kind == 0:
        return [pick(rng, ["today", "tomorrow", "tonight"])]
    if kind == 1:
        return ["on", pick(rng, DAYS)]
    if kind == 2:
        return ["next", pick(rng, DAYS + ["week", "month"])]
    if kind == 3:
        return ["on", pick(rng, MONTHS), pick(rng, ORDINALS)]
    return ["this", pick(rng, PARTS_OF_DAY + ["weekend"])]


def _maybe_when(rng: np.random.Generator) -> List[str]:
    """A day reference half of the time: multiplies the number of distinct sentences."""
    return when(rng) if rng.random() < 0.5 else []


def quantity(rng: np.random.Generator) -> List[str]:
    return number(rng, 2, 19) if rng.random() < 0.7 else [pick(rng, ["some", "more", "a few"])]


# Each template returns the words of one sentence. Written as small functions so that the
# structure is readable and every branch is exercised by sampling.
def _lights(r):
    if r.random() < 0.3:
        words = ["turn", "the", pick(r, ROOMS), "lights", pick(r, COLORS)]
    else:
        words = (["please"] if r.random() < 0.3 else []) + \
            ["turn", pick(r, ["on", "off"]), "the", pick(r, ROOMS), pick(r, SWITCHABLE)]
    return words + _maybe_when(r)


def _open(r):
    return [pick(r, ["open", "close", "lock", "unlock"]), "the", pick(r, ROOMS), pick(r, OPENABLE)] \
        + (when(r) if r.random() < 0.3 else [])


def _thermostat(r):
    return ["set", "the", pick(r, ROOMS), pick(r, ["heater", "thermostat", "temperature"]), "at"] \
        + number(r, 12, 30) + ["degrees"] + _maybe_when(r)


def _alarm(r):
    return ["set", "an", "alarm", "at"] + clock(r) + (when(r) if r.random() < 0.5 else [])


def _timer(r):
    if r.random() < 0.6:
        return ["start", "a"] + number(r, 2, 59) + ["minute", "and"] + number(r, 2, 59) + \
            ["second", "timer"]
    return ["start", "a"] + number(r, 2, 59) + [pick(r, ["minute", "second"]), "timer"]


def _call(r):
    tail = [["at", pick(r, ["home", "work"])], when(r), ["on", "speaker"], []][int(r.integers(4))]
    who = ["my", pick(r, PEOPLE)] if r.random() < 0.4 else [pick(r, NAMES)]
    return [pick(r, ["call", "text", "email"])] + who + tail + \
        (["please"] if r.random() < 0.2 else [])


def _weather(r):
    kind = int(r.integers(4))
    if kind == 0:
        return ["what", "is", "the", "weather", "in", pick(r, CITIES)] + when(r)
    if kind == 1:
        return ["will", "it", "be", pick(r, WEATHER_ADJ), "in", pick(r, CITIES)] + when(r)
    if kind == 2:
        return ["how", pick(r, ["cold", "warm", "hot"]), "is", "it", "in", pick(r, CITIES), "today"]
    a, b = r.choice(len(WEATHER_ADJ), size=2, replace=False)
    return ["it", "will", "be", WEATHER_ADJ[a], "and", WEATHER_ADJ[b], "in", pick(r, CITIES)] + \
        when(r)


def _travel(r):
    a, b = r.choice(len(CITIES), size=2, replace=False)
    kind = int(r.integers(4))
    if kind == 0:
        return ["book", "a", pick(r, TRANSPORT), "from", CITIES[a], "into", CITIES[b]] + when(r)
    if kind == 1:
        return ["when", "does", "the", "next", pick(r, TRANSPORT), "leave", "from", CITIES[a]]
    if kind == 2:
        return [pick(r, NAMES), "is", "flying", "from", CITIES[a], "into", CITIES[b]] + when(r)
    return ["my", pick(r, TRANSPORT), "arrives", "in", CITIES[b], "at"] + clock(r)


def _music(r):
    kind = int(r.integers(4))
    if kind == 0:
        return ["play", "some", pick(r, GENRES), "music", "in", "the", pick(r, ROOMS)] + \
            _maybe_when(r)
    if kind == 1:
        return ["play", pick(r, GENRES), "music", "until"] + clock(r)
    if kind == 2:
        return ["turn", "the", "volume", pick(r, ["up", "down"]), "in", "the", pick(r, ROOMS)] + \
            _maybe_when(r)
    return ["play", "the", pick(r, ["latest", "morning", "evening"]), pick(r, ["news", "podcast"]),
            "in", "the", pick(r, ROOMS)] + _maybe_when(r)


def _remind(r):
    who = ["the", pick(r, PEOPLE)] if r.random() < 0.4 else [pick(r, NAMES)]
    return ["remind", "me", "about", "the", pick(r, EVENTS), "with"] + who + when(r)


def _shopping(r):
    first = quantity(r) + [pick(r, FOODS)]
    more = (["and"] + quantity(r) + [pick(r, FOODS)]) if r.random() < 0.5 else []
    return ["add"] + first + more + ["on", "the", "shopping", "list"]


def _meet(r):
    return [pick(r, ["meet", "visit", "find"]), pick(r, NAMES), "at", "the", pick(r, PLACES)] + \
        (when(r) if r.random() < 0.6 else ["at"] + clock(r))


def _schedule(r):
    a, b = r.choice(len(NAMES), size=2, replace=False)
    return ["schedule", "a", pick(r, EVENTS), "with", NAMES[a], "and", NAMES[b]] + when(r)


def _nearest(r):
    a, b = r.choice(len(PLACES), size=2, replace=False)
    kind = int(r.integers(3))
    if kind == 0:
        return ["where", "is", "the", "nearest", PLACES[a], "in", pick(r, CITIES)]
    if kind == 1:
        return ["how", "far", "is", "the", PLACES[a], "from", "the", PLACES[b]]
    return ["turn", pick(r, DIRECTIONS + ["right"]), "after", "the", PLACES[a], "and", "stop", "at",
            "the", PLACES[b]]


def _math(r):
    op = pick(r, ["plus", "minus", "times"])
    return ["what", "is"] + number(r, 2, 9999) + [op] + number(r, 0, 99)


def _cancel(r):
    return ["cancel", "my", pick(r, EVENTS), "with", "the", pick(r, PEOPLE)] + when(r)


def _clock_query(r):
    a, b = r.choice(len(CITIES), size=2, replace=False)
    if r.random() < 0.5:
        return ["what", "time", "is", "it", "in", CITIES[a], "right", "now"]
    return ["what", "time", "is", "it", "in", CITIES[a], "at"] + clock(r) + ["in", CITIES[b]]


def _translate(r):
    if r.random() < 0.5:
        return ["does", pick(r, NAMES), "speak", pick(r, LANGUAGES), "or", pick(r, LANGUAGES)]
    return ["translate", "this", pick(r, ITEMS), "into", pick(r, LANGUAGES)]


def _send(r):
    return ["send", "the", pick(r, ITEMS), "from", pick(r, NAMES), "over", "email"] \
        if r.random() < 0.3 else \
        ["send", pick(r, NAMES), "a", pick(r, ["short", "long", "new"]), pick(r, ITEMS)] + \
        (when(r) if r.random() < 0.5 else [])


def _order(r):
    return ["order", "a", pick(r, SIZES), pick(r, ["pizza", "salad", "coffee", "juice"]),
            "with", pick(r, FOODS), "and", pick(r, FOODS)]


def _statement(r):
    return ["the", pick(r, COLORS), pick(r, ["car", "bike", "bag", "box", "jacket"]), "is",
            pick(r, ["in", "near"]), "the", pick(r, ROOMS + PLACES)]


def _birthday(r):
    return [pick(r, NAMES), "was", "born", "in", pick(r, CITIES), "on", pick(r, MONTHS),
            pick(r, ORDINALS)]


def _code(r):
    digits = [UNITS[int(d)] for d in r.integers(0, 10, size=4)]
    return ["the", pick(r, ROOMS + ["door", "gate"]), "code", "is"] + digits


def _show(r):
    return ["show", "me", "my", pick(r, ["photos", "videos", "messages", "notes"]), "with",
            pick(r, NAMES), "from", pick(r, ["last", "this"]),
            pick(r, ["week", "month", "weekend"] + DAYS)]


def _lights_level(r):
    return ["dim", "the", pick(r, ROOMS), "lights", "until", "they", "are"] + number(r, 10, 90) + \
        ["percent"]


# (weight, template). Weights favour templates that carry the large word classes (cities, names,
# foods, dates) so that every word turns up often even in a small training set.
TEMPLATES: Tuple[Tuple[float, Callable[[np.random.Generator], List[str]]], ...] = (
    (1.5, _lights), (0.7, _open), (0.6, _thermostat), (1.0, _alarm), (0.5, _timer), (1.0, _call),
    (2.5, _weather), (2.5, _travel), (1.5, _music), (1.2, _remind), (1.5, _shopping),
    (1.2, _meet), (1.2, _schedule), (1.2, _nearest), (0.6, _math), (0.8, _cancel),
    (1.2, _clock_query), (0.8, _translate), (1.0, _send), (1.0, _order), (0.8, _statement),
    (1.5, _birthday), (0.7, _show), (0.5, _lights_level), (0.6, _code),
)
_WEIGHTS = np.array([w for w, _ in TEMPLATES]) / sum(w for w, _ in TEMPLATES)


def sentence(rng: np.random.Generator) -> List[str]:
    """One sentence of ``MIN_WORDS``..``MAX_WORDS`` words; redraws until the length fits."""
    while True:
        words = TEMPLATES[int(rng.choice(len(TEMPLATES), p=_WEIGHTS))][1](rng)
        words = [w for part in words for w in part.split()]
        if MIN_WORDS <= len(words) <= MAX_WORDS:
            return words


def spoken_form(words: Sequence[str]) -> str:
    """The text handed to espeak: the words, with a question mark after questions.

    Punctuation only shapes intonation; the transcript stays ``" ".join(words)``.
    """
    question = words[0] in ("what", "where", "how", "when", "will")
    return " ".join(words) + ("?" if question else ".")


def vocabulary() -> List[str]:
    """Every word the grammar can produce, sorted (``LC_ALL=C`` order)."""
    words = set()
    for lst in (UNITS, TENS, ORDINALS, DAYS, MONTHS, PARTS_OF_DAY, NAMES, CITIES, ROOMS,
                SWITCHABLE, OPENABLE, PLACES, COLORS, GENRES, FOODS, EVENTS, PEOPLE, LANGUAGES,
                WEATHER_ADJ, TRANSPORT, ITEMS, SIZES, DIRECTIONS):
        words.update(lst)
    words.update(_FUNCTION_WORDS.split())
    return sorted(words)


# Words the templates use literally (kept in one place so vocabulary() is exact; a test checks
# that sampled sentences never leave the vocabulary and that every word here is reachable).
_FUNCTION_WORDS = (
    "please turn on off the open close lock unlock set at degrees heater thermostat temperature "
    "an alarm half past quarter before noon midnight in sharp today tomorrow tonight next week "
    "month this weekend start a minute second timer call text email home work speaker what is "
    "weather will it be how cold warm hot book from into when does leave my arrives play some "
    "music volume up down song and last one latest news podcast remind me about "
    "with add more few shopping list meet visit find schedule where nearest far right after "
    "plus minus times cancel time now translate send over short long new order car bike bag box "
    "jacket near was born show photos videos messages notes dim lights until they are percent "
    "hundred thousand flying code speak or stop"
)
