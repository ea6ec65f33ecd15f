"""A small ctypes binding to the libespeak-ng that the pip package ``espeakng-loader`` ships.

The wheel carries ``libespeak-ng.so`` and its ``espeak-ng-data`` directory, so nothing needs root or
a download. We drive the classic ``speak_lib.h`` API:

- ``espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, ...)``: retrieval without an audio device, and
  ``espeak_Synth`` returns only once every sample has gone through our callback, in the calling
  thread (plain ``AUDIO_OUTPUT_RETRIEVAL`` may hand synthesis to a background thread).
- ``espeak_SetSynthCallback``: collects the int16 samples.
- ``espeak_SetVoiceByName("en-us+m3")``: language plus voice variant.
- ``espeak_SetParameter``: rate (words per minute), pitch and pitch range (0-100), word gap.

libespeak-ng keeps global state, so there is one engine per process (one :class:`Espeak` per
worker process). Some of that state survives re-initialisation and synthesis draws random numbers,
so :meth:`Espeak.speak` reloads the library and reseeds before every utterance: its samples then
depend only on its text, voice, prosody and seed, not on what the process synthesised before.
"""

from __future__ import annotations

import _ctypes
import ctypes
import ctypes.util
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import List, Optional, Set

import numpy as np

from asrtrain.errors import AsrError

AUDIO_OUTPUT_SYNCHRONOUS = 2
ESPEAK_INITIALIZE_DONT_EXIT = 0x8000
ESPEAK_CHARS_UTF8 = 1
POS_CHARACTER = 1
EE_OK = 0
# espeak_PARAMETER
RATE, VOLUME, PITCH, RANGE, WORDGAP = 1, 2, 3, 4, 7

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.c_void_p)


def loader_paths() -> tuple:
    """``(library_path, data_path)`` of the installed ``espeakng-loader`` wheel."""
    try:
        import espeakng_loader
    except ImportError:
        raise AsrError("the Python package espeakng-loader is not installed",
                       fix="pip install espeakng-loader (it ships libespeak-ng and its data)") from None
    lib = Path(espeakng_loader.get_library_path())
    data = Path(espeakng_loader.get_data_path())
    if not lib.is_file():
        raise AsrError("libespeak-ng is missing from the espeakng-loader package", lib,
                       fix="reinstall espeakng-loader")
    return lib, data


def list_languages(data_path: Path) -> List[str]:
    """Language voice names shipped under ``espeak-ng-data/lang`` (e.g. ``en-US``, ``en-GB-x-rp``)."""
    return sorted(p.name for p in (Path(data_path) / "lang").rglob("*") if p.is_file())


def list_variants(data_path: Path) -> List[str]:
    """Voice variant names shipped under ``espeak-ng-data/voices/!v`` (e.g. ``m3``, ``klatt2``)."""
    return sorted(p.name for p in (Path(data_path) / "voices" / "!v").iterdir() if p.is_file())


def check_voice(name: str, data_path: Path, languages: Optional[Set[str]] = None,
                variants: Optional[Set[str]] = None) -> None:
    """Raise AsrError unless ``name`` (``lang`` or ``lang+variant``) exists in the shipped data.

    espeak falls back silently to a default for an unknown variant, so the files are checked.
    Matching is case-insensitive, as espeak's own is. ``languages`` and ``variants`` (lower-case
    names) spare a directory scan when checking many voices.
    """
    lang, _, variant = name.partition("+")
    if languages is None:
        languages = {n.lower() for n in list_languages(data_path)}
    if lang.lower() not in languages:
        raise AsrError(f"espeak language voice '{lang}' is not in {data_path}/lang",
                       fix=f"use one of: {', '.join(sorted(n for n in languages if n.startswith('en')))}")
    if variant:
        if variants is None:
            variants = {n.lower() for n in list_variants(data_path)}
        if variant.lower() not in variants:
            raise AsrError(f"espeak voice variant '{variant}' is not in {data_path}/voices/!v",
                           fix="pick a variant listed in that directory")


class Espeak:
    """One espeak-ng engine in this process, reloaded fresh for every utterance.

    libespeak-ng keeps static state that survives ``espeak_Initialize`` (the pitch-flutter index,
    the gain control, the glottal cycle counter), so the same call twice gives different samples.
    :meth:`speak` therefore unloads the library (``dlclose``) and loads it again before each
    utterance, which costs a few ms, and reseeds espeak's random generator and libc ``rand``.
    An utterance is then a pure function of its text, voice, prosody and seed; :meth:`check_fresh`
    proves it at start-up.

    The engine loads a private copy of the library (in a temp dir removed with the object): the
    dynamic loader shares one instance per file, so another user of the same ``.so`` in this
    process (a second Espeak, phonemizer...) would otherwise keep the statics alive.

    Args:
        library: path of libespeak-ng.so; default: the espeakng-loader wheel's.
        data: path of espeak-ng-data; default: the wheel's.
    """

    def __init__(self, library: Optional[Path] = None, data: Optional[Path] = None):
        lib_path, data_path = loader_paths()
        self.library = Path(library or lib_path)
        self.data = Path(data or data_path)
        self._libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        self._libc.srand.argtypes = [ctypes.c_uint]
        self._chunks: List[bytes] = []
        # Keep a reference: ctypes frees the trampoline if the Python object dies.
        self._callback = _CALLBACK(self._on_samples)
        self._lib = None
        self._tmp = tempfile.mkdtemp(prefix="asrtrain-espeak-")
        weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self._private = Path(self._tmp) / self.library.name
        try:
            shutil.copyfile(self.library, self._private)
        except OSError as err:
            raise AsrError(f"cannot copy libespeak-ng: {err}", self.library,
                           fix="check that the file is readable and TMPDIR is writable") from None
        self.voice: Optional[str] = None
        self.sample_rate = 0
        self.languages = {n.lower() for n in list_languages(self.data)}
        self.variants = {n.lower() for n in list_variants(self.data)}
        self._load()

    def _load(self) -> None:
        """(Re)load libespeak-ng with fresh static state and initialise it."""
        if self._lib is not None:
            self._lib.espeak_Terminate()  # frees the phoneme data and dictionary (~1 MB)
            handle = self._lib._handle
            self._lib = None
            _ctypes.dlclose(handle)  # refcount 0: the next dlopen maps fresh statics
        try:
            lib = ctypes.CDLL(str(self._private))
        except OSError as err:
            raise AsrError(f"cannot load libespeak-ng: {err}", self.library,
                           fix="reinstall espeakng-loader") from None
        _declare(lib)
        rate = lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, str(self.data).encode(),
                                     ESPEAK_INITIALIZE_DONT_EXIT)
        if rate <= 0:
            raise AsrError(f"espeak_Initialize failed (returned {rate})", self.data,
                           fix="check that espeak-ng-data is complete; reinstall espeakng-loader")
        lib.espeak_SetSynthCallback(self._callback)
        self._lib = lib
        self.sample_rate = rate  # 22050 Hz for the shipped data
        self.voice = None

    def _on_samples(self, wav, numsamples, events) -> int:
        if wav and numsamples > 0:
            self._chunks.append(ctypes.string_at(wav, numsamples * 2))
        return 0  # 0 = continue

    def set_voice(self, name: str, rate: int = 175, pitch: int = 50, pitch_range: int = 50,
                  word_gap: int = 0) -> None:
        """Select ``lang[+variant]`` and the prosody parameters on the loaded engine.

        Args:
            name: e.g. ``en-us+m3`` (checked against the shipped data).
            rate: words per minute (espeak: 80-450, default 175).
            pitch: base pitch 0-100 (default 50).
            pitch_range: intonation range 0-100 (default 50; 0 is monotone).
            word_gap: extra pause between words, in units of 10 ms.
        """
        check_voice(name, self.data, self.languages, self.variants)
        err = self._lib.espeak_SetVoiceByName(name.encode())
        if err != EE_OK:
            raise AsrError(f"espeak_SetVoiceByName('{name}') failed with code {err}",
                           fix="pick a voice listed in espeak-ng-data/lang and voices/!v")
        for param, value in ((RATE, rate), (PITCH, pitch), (RANGE, pitch_range),
                             (WORDGAP, word_gap)):
            if self._lib.espeak_SetParameter(param, int(value), 0) != EE_OK:
                raise AsrError(f"espeak_SetParameter({param}, {value}) failed")
        self.voice = name

    def synthesize(self, text: str, seed: int = 0) -> np.ndarray:
        """Speak ``text`` with the current voice on the current engine state (not reloaded).

        Returns:
            int16 samples, shape (num_samples,), at :attr:`sample_rate`.
        """
        if self.voice is None:
            raise AsrError("Espeak.synthesize called before set_voice")
        seed = int(seed) & 0x7FFFFFFF
        self._lib.espeak_ng_SetRandSeed(seed)
        self._libc.srand(seed)
        self._chunks = []
        data = text.encode("utf-8") + b"\0"
        buf = ctypes.create_string_buffer(data, len(data))
        err = self._lib.espeak_Synth(buf, len(data), 0, POS_CHARACTER, 0, ESPEAK_CHARS_UTF8, None,
                                     None)
        if err != EE_OK:
            raise AsrError(f"espeak_Synth failed with code {err} for text {text!r}")
        samples = np.frombuffer(b"".join(self._chunks), dtype=np.int16).copy()
        self._chunks = []
        return samples

    def speak(self, text: str, voice: str, rate: int = 175, pitch: int = 50,
              pitch_range: int = 50, word_gap: int = 0, seed: int = 0) -> np.ndarray:
        """Reload the engine, select the voice and speak: a pure function of the arguments.

        Returns:
            int16 samples, shape (num_samples,), at :attr:`sample_rate`.
        """
        self._load()
        self.set_voice(voice, rate=rate, pitch=pitch, pitch_range=pitch_range, word_gap=word_gap)
        return self.synthesize(text, seed=seed)

    def check_fresh(self, voice: str = "en-us+m3") -> None:
        """Raise AsrError unless reloading really resets espeak (same call, same samples)."""
        probe = "check one two three"
        first = self.speak(probe, voice, seed=1)
        self.synthesize(probe, seed=2)  # disturb the static state
        second = self.speak(probe, voice, seed=1)
        if not np.array_equal(first, second):
            raise AsrError("libespeak-ng did not reset on reload, so synthesis would not be "
                           "deterministic", self.library,
                           fix="report this: the private copy of the library was not unloaded")

    def phonemes(self, text: str) -> str:
        """espeak's phoneme mnemonics for ``text`` with the current voice (used to find homophones)."""
        if self.voice is None:
            raise AsrError("Espeak.phonemes called before set_voice")
        data = text.encode("utf-8") + b"\0"
        buf = ctypes.create_string_buffer(data, len(data))
        ptr = ctypes.c_void_p(ctypes.addressof(buf))
        parts = []
        # espeak_TextToPhonemes returns one clause per call and advances the pointer (NULL at end).
        while ptr.value:
            out = self._lib.espeak_TextToPhonemes(ctypes.byref(ptr), ESPEAK_CHARS_UTF8, 0)
            if out:
                parts.append(out.decode("utf-8", "replace").strip())
        return " ".join(p for p in parts if p)


def _declare(lib) -> None:
    """Set the ctypes signatures of the speak_lib.h functions we call."""
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                 ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_uint),
                                 ctypes.c_void_p]
    lib.espeak_Synth.restype = ctypes.c_int
    lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                                          ctypes.c_int]
    lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
    lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
    lib.espeak_ng_SetRandSeed.restype = None
    lib.espeak_Terminate.argtypes = []
    lib.espeak_Terminate.restype = ctypes.c_int
    lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
    lib.espeak_Info.restype = ctypes.c_char_p
