"""A question's misspelled words, read as the sources spell them ("When was IBM fonded?" → "founded").

A key word the sources never write cannot tie an answer to the question: the relation check finds no sentence
about "fonded", and the answer is withheld although the sources state it. `respelled` reads such a word as the one
word of the sources it is a slip of, when that is clear:

- the question's word is written in lower case (a name is matched exactly, never corrected), has at least
  `MIN_LETTERS` letters, is no stop or question word, no word of the sources is it or of its family ("founding"
  for "founded", `words.family_in`), and it is no English word (none of WordNet's word forms: "culled" is a
  word, and reading it as the sources' "called" changed a SQuAD question's meaning; word frequencies cannot tell
  it from a common slip, "culled" 2.9 and "recieve" 2.8);
- a word of the sources is one edit away (a letter left out, added, changed, or two neighbours swapped: optimal
  string alignment distance 1, `rapidfuzz`), starts with the same letter (slips rarely hit the first), and is at
  least `MIN_ZIPF_GAP` more common in general use than the question's word (`wordfreq`'s Zipf scale, 1 = ten
  times): the question's word is then a slip of it rather than a word of its own ("recieve" 2.8 → "receive" 5.2;
  a commoner word is never read as a rarer one);
- exactly one word family of the sources qualifies (two: no telling which was meant).

Only the sources' own words are candidates, and the sources are what the gateway retrieved for this user under
row-level security: a correction can never name a word of a document the user may not read. The corrections are
returned so the answer can say how the question was read.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from rapidfuzz.distance import OSA

from ragmesh_common.text.words import QUESTION_WORDS, STOP_WORDS, family_in, is_word, normalise, stem, words

MIN_LETTERS = 5
MIN_ZIPF_GAP = 1.5
# the question's words, case kept (lower-case letters only: "IBM", "Fonded" at a sentence's start are not read)
_QUESTION_WORD = re.compile(r"(?<![\w'’-])[^\W\d_]+(?![\w'’-])")


@functools.lru_cache(maxsize=65536)
def _zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency  # loads its frequency list on first use

    try:
        return zipf_frequency(word, language)
    except LookupError:  # a language wordfreq has no list for: nothing is read as a slip
        return float("nan")


def respelled(question: str, texts: Iterable[str], language: str = "en") -> tuple[str, list[tuple[str, str]]]:
    """`question` with each of its slips replaced by the word the sources write (see the module docstring), and
    the (written, read as) pairs, in the question's order; the question unchanged and [] when there is none."""
    question = normalise(question)
    vocabulary = {w for text in texts for w in words(text) if len(w) >= MIN_LETTERS}
    if not vocabulary:
        return question, []
    stems = {stem(w) for w in vocabulary}
    by_letter: dict[str, list[str]] = {}
    for word in vocabulary:
        by_letter.setdefault(word[0], []).append(word)
    corrections: dict[str, str] = {}
    for found in _QUESTION_WORD.finditer(question):
        word = found.group(0)
        if (
            word in corrections
            or len(word) < MIN_LETTERS
            or not word.islower()
            or word in STOP_WORDS
            or word in QUESTION_WORDS
            or word in vocabulary
            or family_in(stem(word), stems)
            or is_word(word)
        ):
            continue
        read = _slip_of(word, by_letter.get(word[0], ()), language)
        if read is not None:
            corrections[word] = read
    if not corrections:
        return question, []
    text = _QUESTION_WORD.sub(lambda m: corrections.get(m.group(0), m.group(0)), question)
    return text, list(corrections.items())


def _slip_of(word: str, candidates: Iterable[str], language: str) -> str | None:
    """The one word (family) of `candidates` that `word` is a slip of, or None."""
    own = _zipf(word, language)
    near = [
        c for c in candidates if OSA.distance(word, c, score_cutoff=1) == 1 and _zipf(c, language) - own >= MIN_ZIPF_GAP
    ]
    if not near:
        return None
    best = max(near, key=lambda c: (_zipf(c, language), c))
    if any(not family_in(stem(c), {stem(best)}) for c in near):
        return None  # "tiles" or "tides" for "tidles": no telling which was meant
    return best
