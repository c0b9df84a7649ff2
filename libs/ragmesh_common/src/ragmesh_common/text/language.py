"""Language identification: Unicode scripts first, py3langid for the scripts that many languages share.

- CJK, Hangul, Kana, Greek, Arabic, Armenian and Tamil text is decided by script alone (any length).
- Latin, Cyrillic and Devanagari text goes to py3langid (langid.py's byte n-gram naive Bayes model, bundled
  with the wheel), restricted to `IDENTIFIED_LANGS`. Text too short (`MIN_WORDS`) or identified with too
  little confidence (`MIN_CONFIDENCE`) gets the caller's default: a short English sentence must never be
  treated as French or Danish.

The script ranges (`CJK_RUN`, `has_cjk`) are shared with the retriever's lexical analysis.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

UNKNOWN = "simple"

# The languages py3langid chooses among: every Latin, Cyrillic and Devanagari language PostgreSQL has a
# text search configuration for (the other scripts are decided by script alone).
IDENTIFIED_LANGS = (
    "en",
    "de",
    "fr",
    "es",
    "it",
    "pt",
    "nl",
    "sv",
    "no",
    "da",
    "fi",
    "hu",
    "ro",
    "tr",
    "ca",
    "id",
    "et",
    "eu",
    "ga",
    "lt",
    "ru",
    "sr",
    "hi",
    "ne",
)

# Han (CJK Unified Ideographs + Extension A + compatibility + extensions B..), 々 and 〇.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3007\U00020000-\U0002fa1f"
KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff"
CJK_RUN = re.compile(f"[{HAN}{KANA}{HANGUL}]+")
_HAN_CHAR = re.compile(f"[{HAN}]")
_KANA_CHAR = re.compile(f"[{KANA}]")
_HANGUL_CHAR = re.compile(f"[{HANGUL}]")
_HANGUL_WORD = re.compile(f"[{HANGUL}]+")
_WORD = re.compile(r"[^\W\d_]+")

# Other scripts with exactly one configuration (Hebrew is left to the default: Yiddish is the only
# Hebrew-script configuration and would mis-stem Hebrew).
_SCRIPT_LANGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("el", re.compile("[\u0370-\u03ff\u1f00-\u1fff]")),
    ("ar", re.compile("[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff]")),
    ("hy", re.compile("[\u0530-\u058f]")),
    ("ta", re.compile("[\u0b80-\u0bff]")),
)
_CYRILLIC = re.compile("[\u0400-\u04ff]")
_DEVANAGARI = re.compile("[\u0900-\u097f]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")

# An average Chinese/Japanese word is about 1.5 characters, so a run of n Han/Kana characters weighs
# n / 1.5 words against the space-separated words around it.
_CHARS_PER_CJK_WORD = 1.5
# Below either, the default. py3langid's probabilities (normalised over the candidate languages) stay
# under 0.5 for one-word headings it gets wrong ("Preface 1.", "Summary."), and are above 0.94 for a
# plain question of four words ("When was IBM founded?").
MIN_WORDS = 3
MIN_CONFIDENCE = 0.9
# identification is linear in the text's length; its first characters tell the language as well
_IDENTIFY_CHARS = 2000


@functools.cache
def _identifier() -> Any:
    """py3langid's model restricted to `IDENTIFIED_LANGS` (loaded once, ~1 s: `warm_up` at start)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(IDENTIFIED_LANGS))
    return identifier


def warm_up() -> None:
    """Loads the language-identification model now rather than on the first text."""
    _identifier()


def identify(text: str) -> tuple[str, float]:
    """py3langid's best language among `IDENTIFIED_LANGS` and its probability."""
    lang, confidence = _identifier().classify(text[:_IDENTIFY_CHARS])
    return str(lang), float(confidence)


def rank_languages(text: str, languages: Sequence[str]) -> list[tuple[str, float]]:
    """py3langid's probabilities of `text` over `languages` (those of `IDENTIFIED_LANGS`), renormalised to sum
    to 1 over them, most probable first; empty when none of them is identified or the text has no letters."""
    wanted = set(languages).intersection(IDENTIFIED_LANGS)
    if not wanted or not _WORD.search(text):
        return []
    ranked = [(str(lang), float(p)) for lang, p in _identifier().rank(text[:_IDENTIFY_CHARS]) if lang in wanted]
    total = sum(p for _, p in ranked)
    if total <= 0:
        return []
    return [(lang, p / total) for lang, p in ranked]


def has_cjk(text: str) -> bool:
    return CJK_RUN.search(text) is not None


def _cjk_language(han: int, kana: int, hangul: int) -> str:
    if hangul >= han + kana:
        return "ko"
    # Japanese prose always carries kana; Chinese never does.
    return "ja" if kana > 0 else "zh"


def detect_language(text: str, default: str = UNKNOWN) -> str:
    """The ISO 639-1 code of `text`'s language, `default` when unknown, too short or unclear.

    CJK, Hangul, Kana, Greek, Arabic, Armenian and Tamil are decided by script alone (any length).
    Latin, Cyrillic and Devanagari text with at least `MIN_WORDS` words goes to the language py3langid
    identifies with a probability of at least `MIN_CONFIDENCE`; otherwise `default`.
    """
    han = len(_HAN_CHAR.findall(text))
    kana = len(_KANA_CHAR.findall(text))
    hangul_words = len(_HANGUL_WORD.findall(text))
    rest = CJK_RUN.sub(" ", text)
    words = _WORD.findall(rest)
    cjk_units = (han + kana) / _CHARS_PER_CJK_WORD + hangul_words
    if cjk_units > 0 and cjk_units >= len(words):
        return _cjk_language(han, kana, len(_HANGUL_CHAR.findall(text)))
    letters = "".join(words)
    if not letters:
        return default
    scripts = {
        "latin": len(_LATIN.findall(letters)),
        "cyrillic": len(_CYRILLIC.findall(letters)),
        "devanagari": len(_DEVANAGARI.findall(letters)),
    }
    for lang, pattern in _SCRIPT_LANGS:
        scripts[lang] = len(pattern.findall(letters))
    script = max(scripts, key=lambda s: scripts[s])
    if scripts[script] == 0:
        return default
    if script not in ("latin", "cyrillic", "devanagari"):
        return script
    if len(words) + cjk_units < MIN_WORDS:
        return default
    lang, confidence = identify(rest)
    return lang if confidence >= MIN_CONFIDENCE else default
