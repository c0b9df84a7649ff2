"""Stop words, one list per language: the function words that say nothing about what a text is about.

Each list holds function words only (articles, pronouns, prepositions, conjunctions, auxiliaries, question
words). Words that are noise only for one purpose (the verbs of asking a question, an answer's boilerplate,
a document's "figure" and "table") are added by the module that needs them, next to its reason.
"""
from __future__ import annotations

ENGLISH: frozenset[str] = frozenset("""
a about above after again against all also although am among an and another any are as at be because been
before being below besides between both but by can cannot could did do does doing done down during each either
else etc every few for from further had has have having he her here hers herself him himself his how however
i if in into is it it's its itself just least less let many may me might more most much must my myself
neither no nor not now of off on once only onto or other ought our ours ourselves out over own per
same shall she should since so some such than that the their theirs them themselves then there therefore
these they this those through thus to too under until up upon very via was we were what when where whether
which while who whom whose why will with within without would yes yet you your yours yourself yourselves
""".split())

GERMAN: frozenset[str] = frozenset("""
der die das den dem des ein eine einen einem einer und oder im in zu zur zum von vom mit für auf aus bei
nach ist sind war waren hat haben wird werden es sie er wer wen wem wessen was wann wo wie welche welcher
welches warum wieso seit
""".split())

FRENCH: frozenset[str] = frozenset("""
le la les de des du un une et ou en pour avec sur dans par au aux ce cette ces il elle est sont était qui que
quoi quel quelle quels quelles quand où comment pourquoi
""".split())

STOP_WORDS: dict[str, frozenset[str]] = {"en": ENGLISH, "de": GERMAN, "fr": FRENCH}


def stop_words(*languages: str) -> frozenset[str]:
    """The union of the stop words of `languages` (ISO 639-1 codes; unknown codes add nothing)."""
    return frozenset().union(*(STOP_WORDS.get(lang, frozenset()) for lang in languages))
