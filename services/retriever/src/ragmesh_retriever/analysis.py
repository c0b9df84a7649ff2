"""Language-aware lexical analysis for the PostgreSQL BM25 leg.

PostgreSQL analyses chunk text with `to_tsvector(<regconfig>, text)`: the snowball configurations stem
and drop stop words for one language each, and the default parser does not segment Chinese, Japanese or
Korean (a run of Han characters becomes one token). This module decides which configuration to use and
prepares the text so that `to_tsvector` produces useful lexemes:

- `detect_language`: Unicode script ranges for CJK, Hangul, Kana and other scripts with one configuration;
  Latin, Cyrillic and Devanagari text goes to py3langid (langid.py's byte n-gram naive Bayes model, bundled
  with the wheel), restricted to the languages PostgreSQL has a configuration for. Text too short
  (`MIN_WORDS`) or identified with too little confidence (`MIN_CONFIDENCE`) gets the default configuration:
  a short English sentence must never be stemmed as French or Danish.
- `prepare_lexical_text`: CJK runs become overlapping character bigrams (Lucene's CJKAnalyzer /
  CJKBigramFilter scheme: "信息检索" → "信息 息检 检索", a lone character stays a unigram), separated by spaces
  so the parser sees each bigram as a token; other text is left as it is.
- `query_analyses`: the (regconfig, prepared text) pairs a query is analysed with: its own language (or the
  default), never the languages of the corpus; the caller unions the lexemes of `to_tsvector(cfg, text)`.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from typing import Any

SIMPLE = "simple"
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})

# ISO 639-1 → the PostgreSQL text search configuration shipped with PostgreSQL 18 (pg_ts_config).
REGCONFIGS: dict[str, str] = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "et": "estonian", "eu": "basque", "fi": "finnish", "fr": "french", "ga": "irish",
    "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian",
    "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian", "nb": "norwegian", "nn": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish", "ta": "tamil",
    "tr": "turkish", "yi": "yiddish",
    "zh": SIMPLE, "ja": SIMPLE, "ko": SIMPLE,
}

# The languages py3langid chooses among: every Latin, Cyrillic and Devanagari language with a configuration
# (the other scripts are decided by script alone).
_IDENTIFIED_LANGS = ("en", "de", "fr", "es", "it", "pt", "nl", "sv", "no", "da", "fi", "hu", "ro", "tr", "ca",
                     "id", "et", "eu", "ga", "lt", "ru", "sr", "hi", "ne")

# Han (CJK Unified Ideographs + Extension A + compatibility + extensions B..), 々 and 〇.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3007\U00020000-\U0002fa1f"
_KANA = "\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
_HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\ud7b0-\ud7ff"
_CJK_RUN = re.compile(f"[{_HAN}{_KANA}{_HANGUL}]+")
# CJK symbols and punctuation (、。「」…), minus 々 and 〇 which are letters; they separate runs.
_CJK_PUNCT = re.compile("[\u3000-\u3004\u3006\u3008-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")
_HAN_CHAR = re.compile(f"[{_HAN}]")
_KANA_CHAR = re.compile(f"[{_KANA}]")
_HANGUL_CHAR = re.compile(f"[{_HANGUL}]")
_HANGUL_WORD = re.compile(f"[{_HANGUL}]+")
_WORD = re.compile(r"[^\W\d_]+")

# Other scripts with exactly one configuration (Hebrew is left to "simple": Yiddish is the only
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
# Below either, the default configuration. py3langid's probabilities (normalised over the candidate
# languages) stay under 0.5 for the SciFact abstracts cut to a sentence that it gets wrong ("Preface 1.",
# "Summary."), and are above 0.94 for a plain question of four words ("When was IBM founded?").
MIN_WORDS = 3
MIN_CONFIDENCE = 0.9
# identification is linear in the text's length; its first characters tell the language as well
_IDENTIFY_CHARS = 2000


@functools.cache
def _identifier() -> Any:
    """py3langid's model restricted to `_IDENTIFIED_LANGS` (loaded once, ~1 s: `warm_up` at start)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(_IDENTIFIED_LANGS))
    return identifier


def warm_up() -> None:
    """Loads the language-identification model now rather than on the first text."""
    _identifier()


def identify(text: str) -> tuple[str, float]:
    """py3langid's best language among `_IDENTIFIED_LANGS` and its probability."""
    lang, confidence = _identifier().classify(text[:_IDENTIFY_CHARS])
    return str(lang), float(confidence)


def _cjk_language(han: int, kana: int, hangul: int) -> str:
    if hangul >= han + kana:
        return "ko"
    # Japanese prose always carries kana; Chinese never does.
    return "ja" if kana > 0 else "zh"


def detect_language(text: str, default: str = SIMPLE) -> str:
    """The ISO 639-1 code of `text`'s language, `default` when unknown, too short or unclear.

    CJK, Hangul, Kana, Greek, Arabic, Armenian and Tamil are decided by script alone (any length).
    Latin, Cyrillic and Devanagari text with at least `MIN_WORDS` words goes to the language py3langid
    identifies with a probability of at least `MIN_CONFIDENCE`; otherwise `default`.
    """
    han = len(_HAN_CHAR.findall(text))
    kana = len(_KANA_CHAR.findall(text))
    hangul_words = len(_HANGUL_WORD.findall(text))
    rest = _CJK_RUN.sub(" ", text)
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


def regconfig_for(lang: str) -> str:
    """The PostgreSQL text search configuration for an ISO 639-1 code ("en", "en-US", or a config name).

    CJK languages and unknown codes map to "simple" (lower-casing, no stemming, no stop words).
    """
    code = lang.strip().lower().replace("_", "-")
    if code in REGCONFIGS.values():
        return code
    return REGCONFIGS.get(code.split("-", 1)[0], SIMPLE)


def cjk_bigrams(run: str) -> list[str]:
    """Overlapping character bigrams of a CJK run; a single character is kept as a unigram."""
    if len(run) < 2:
        return [run] if run else []
    return [run[i:i + 2] for i in range(len(run) - 1)]


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def prepare_lexical_text(text: str, lang: str) -> str:
    """Text for `to_tsvector(regconfig_for(lang), ...)`: CJK runs as space-separated bigrams.

    For a CJK language the text is NFKC-normalised first (full-width Latin letters and digits become
    ASCII, half-width katakana full-width), and CJK punctuation becomes spaces. Latin words are kept as
    they are. Text of other languages is returned unchanged unless it contains CJK runs, which are
    bigrammed too, so a Chinese term quoted in an English document still matches a Chinese query.
    """
    if lang in CJK_LANGUAGES:
        text = unicodedata.normalize("NFKC", text)
    elif not has_cjk(text):
        return text
    text = _CJK_PUNCT.sub(" ", text)
    out = _CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group(0))) + " ", text)
    return re.sub(r"[ \t]{2,}", " ", out).strip()


def query_analyses(query: str, default: str = SIMPLE, language: str | None = None) -> list[tuple[str, str]]:
    """(regconfig, prepared text) pairs to analyse `query` with; the caller unions the lexemes.

    In order, deduplicated: the query's own language (`language` when given, else detected; `default`, a
    language code or configuration name, when the query is short or unclear), and, when the query contains
    CJK characters, ("simple", CJK bigram form). Never the languages of the corpus: a configuration that some
    documents were stemmed with must not decide how every query is stemmed (a stray French or Danish one
    keeps "the" and "of" as rare, heavily weighted terms).
    """
    lang = language or detect_language(query, default=default)
    pairs: list[tuple[str, str]] = []

    def add(cfg: str, text: str) -> None:
        if text.strip() and (cfg, text) not in pairs:
            pairs.append((cfg, text))

    add(regconfig_for(lang), prepare_lexical_text(query, lang))
    if has_cjk(query):
        add(SIMPLE, prepare_lexical_text(query, "zh"))
    return pairs
