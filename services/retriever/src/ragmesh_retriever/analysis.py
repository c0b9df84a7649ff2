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
- `choose_languages`: the languages a query's BM25 leg searches. A query detected clearly (by script, or with
  enough words and confidence) or a long one is searched in one language; a short unclear one in the user's
  language (the hint: Accept-Language or the request's `language`, else the default) and every configured
  language py3langid finds close to the most probable one; the lexical leg searches each apart and merges the
  scores (`ranking.merge_languages`). "Haus kaufen" from a German user is stemmed as German, not English.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragmesh_common.text.language import (
    CJK_RUN,
    MIN_CONFIDENCE,
    MIN_WORDS,
    detect_language,
    has_cjk,
    identify,
    rank_languages,
    warm_up,
)
from ragmesh_retriever.ranking import language_alpha

if TYPE_CHECKING:
    from ragmesh_retriever.config import Settings

__all__ = [
    "MIN_CONFIDENCE",
    "MIN_WORDS",
    "REGCONFIGS",
    "SIMPLE",
    "LanguageChoice",
    "LanguagePolicy",
    "choose_languages",
    "cjk_bigrams",
    "detect_language",
    "has_cjk",
    "identify",
    "language_code",
    "prepare_lexical_text",
    "query_analyses",
    "regconfig_for",
    "warm_up",
]

SIMPLE = "simple"
_WORD = re.compile(r"[^\W\d_]+")
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


def language_code(lang: str) -> str | None:
    """The ISO 639-1 code of a code ("de-AT") or configuration name ("german") that has a configuration, else
    None ("xx", "simple")."""
    code = lang.strip().lower().replace("_", "-").split("-", 1)[0]
    if code in REGCONFIGS:
        return code
    return next((c for c, cfg in REGCONFIGS.items() if cfg == code and cfg != SIMPLE), None)


@dataclass(frozen=True)
class LanguageChoice:
    """The languages a query's lexical leg searches, the first one the query's language (its alpha's too), and
    how they were chosen: "detected" (clearly one language), "hint" or "default" (long but unclear: the hint or
    the default alone), "close" (short and unclear: the hint or default and the close detections)."""

    languages: tuple[str, ...]
    reason: str
    ignored_hint: str = ""  # a hint without a text search configuration, not used


def choose_languages(
    query: str,
    *,
    default: str,
    hint: str = "",
    configured: Sequence[str] = (),
    margin: float = 0.0,
    short_words: int = 0,
) -> LanguageChoice:
    """The languages to search `query` in (ISO codes, or the default configuration name when it has no code).

    A query detected clearly (`detect_language`) is searched in its language alone, whatever the hint. Otherwise
    the hint (a language code or Accept-Language tag with a configuration) or else the default is searched, and a
    query of fewer than `short_words` words adds each `configured` language whose py3langid probability
    (renormalised over `configured`) is within `margin` of the most probable one's. The first language is the
    query's own (its alpha's): the hint, else the most probable one of a short query, else the default.
    """
    detected = detect_language(query, default="")
    if detected:
        return LanguageChoice((detected,), "detected")
    hinted = language_code(hint) if hint else None
    ignored = hint if hint and hinted is None else ""
    first = hinted or language_code(default) or default
    words = len(_WORD.findall(CJK_RUN.sub(" ", query)))
    if words >= short_words or not configured:
        return LanguageChoice((first,), "hint" if hinted else "default", ignored)
    ranked = rank_languages(query, configured)
    best = ranked[0][1] if ranked else 0.0
    close = [lang for lang, p in ranked if p >= best - margin]
    languages = tuple(dict.fromkeys([first, *close] if hinted else [*close[:1], first, *close[1:]]))
    return LanguageChoice(languages, "close" if len(languages) > 1 else ("hint" if hinted else "default"), ignored)


@dataclass(frozen=True)
class LanguagePolicy:
    """The retriever's language settings: the default (a code or configuration name), the languages a short
    query may be searched in, the detection margin and the word count below which a query is short, the
    embedder's languages and the alpha of a query in another."""

    default: str = "english"
    configured: tuple[str, ...] = ()
    margin: float = 0.0
    short_words: int = 0
    embedder: tuple[str, ...] = ("*",)
    uncovered_alpha: float = 1.0

    @classmethod
    def of(cls, settings: Settings) -> LanguagePolicy:
        return cls(
            default=settings.text_search_config,
            configured=tuple(settings.query_language_list),
            margin=settings.language_margin,
            short_words=settings.short_query_words,
            embedder=tuple(settings.embedder_language_list),
            uncovered_alpha=settings.uncovered_alpha,
        )

    def choose(self, query: str, hint: str = "") -> LanguageChoice:
        return choose_languages(
            query,
            default=self.default,
            hint=hint,
            configured=self.configured,
            margin=self.margin,
            short_words=self.short_words,
        )

    def covers(self, language: str) -> bool:
        return "*" in self.embedder or language in self.embedder

    def alpha(self, alpha: float, language: str) -> float:
        return language_alpha(alpha, language, self.embedder, self.uncovered_alpha)


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
