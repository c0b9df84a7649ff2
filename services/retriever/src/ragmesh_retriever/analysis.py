"""Language-aware lexical analysis for the PostgreSQL BM25 leg.

PostgreSQL analyses chunk text with `to_tsvector(<regconfig>, text)`: the snowball configurations stem
and drop stop words for one language each, and the default parser does not segment Chinese, Japanese or
Korean (a run of Han characters becomes one token). This module decides which configuration to use and
prepares the text so that `to_tsvector` produces useful lexemes:

- `detect_language` (from `ragmesh_common.text.language`, shared with the other services): Unicode scripts,
  then py3langid restricted to the languages PostgreSQL has a configuration for; text too short or unclear
  gets the default configuration: a short English sentence must never be stemmed as French or Danish.
- `prepare_lexical_text`: CJK runs become overlapping character bigrams (Lucene's CJKAnalyzer /
  CJKBigramFilter scheme: "信息检索" → "信息 息检 检索", a lone character stays a unigram), separated by spaces
  so the parser sees each bigram as a token; other text is left as it is.
- `query_analyses`: the (regconfig, prepared text) pairs a query is analysed with: its own language (or the
  default), never the languages of the corpus; the caller unions the lexemes of `to_tsvector(cfg, text)`.
"""

from __future__ import annotations

import re
import unicodedata

from ragmesh_common.text.language import CJK_RUN, MIN_CONFIDENCE, MIN_WORDS, detect_language, has_cjk, identify, warm_up

__all__ = [
    "MIN_CONFIDENCE",
    "MIN_WORDS",
    "REGCONFIGS",
    "SIMPLE",
    "cjk_bigrams",
    "detect_language",
    "has_cjk",
    "identify",
    "prepare_lexical_text",
    "query_analyses",
    "regconfig_for",
    "warm_up",
]

SIMPLE = "simple"
CJK_LANGUAGES = frozenset({"zh", "ja", "ko"})

# ISO 639-1 → the PostgreSQL text search configuration shipped with PostgreSQL 18 (pg_ts_config).
REGCONFIGS: dict[str, str] = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "nb": "norwegian",
    "nn": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
    "zh": SIMPLE,
    "ja": SIMPLE,
    "ko": SIMPLE,
}

# CJK symbols and punctuation (、。「」…), minus 々 and 〇 which are letters; they separate runs.
_CJK_PUNCT = re.compile("[\u3000-\u3004\u3006\u3008-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65]")


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
    return [run[i : i + 2] for i in range(len(run) - 1)]


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
    out = CJK_RUN.sub(lambda m: " " + " ".join(cjk_bigrams(m.group(0))) + " ", text)
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
