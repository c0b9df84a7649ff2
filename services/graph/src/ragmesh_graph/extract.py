"""Graph building blocks: entity keys, the rule-based fallback extractor, and DocumentGraph.

`nlp.py` holds the extractor the service uses (spaCy NER and dependency parses for English); the rule spotter
here (`RuleExtractor`, on `ragmesh_common.text.entities` in its document mode, the one the gateway reads
questions with) is the fallback for text in other languages and for deployments without the spaCy model. It
has no model: it misses lower-case concepts and a single capitalised word that starts a sentence, a
sentence-initial word outside the stopword list ("Yesterday Acme Corp") stays part of the phrase, and all-caps
emphasis ("THE END") reads as acronyms; its relations are plain sentence co-occurrences (predicate
`co-occurs`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

from ragmesh_common.text.entities import DOCUMENT_STOPWORDS, KIND_ACRONYM, KIND_QUOTED, spot

TYPE_ACRONYM = "acronym"
TYPE_NAME = "name"
TYPE_TERM = "term"

MAX_KEY_CHARS = 120
MAX_QUERY_NGRAM = 6

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n\s*\n|\n(?=\s*[-*•]\s)")
# A query word for the n-gram keys: letters/digits with inner hyphens, apostrophes, dots or ampersands.
_WORD = re.compile(r"[A-Za-z0-9À-ÖØ-öø-ÿ]+(?:[-'’.&][A-Za-z0-9À-ÖØ-öø-ÿ]+)*")
_NON_KEY = re.compile(r"[^\w&+#.\- ]+")
_TYPES = {KIND_QUOTED: TYPE_TERM, KIND_ACRONYM: TYPE_ACRONYM}
_FILE_EXTENSION = re.compile(
    r"\.(?:pdf|docx?|pptx?|xlsx?|odt|rtf|html?|md|markdown|txt|csv|json|png|jpe?g|tiff?|bmp|webp)$", re.IGNORECASE
)
_QUALIFIER = re.compile(r"\([^()]*\)$")  # on a stripped name: no run of spaces to backtrack over
_CAPITALISED = re.compile(r"(?<![^\W\d_])[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ]")  # a word that starts "Xx"


@dataclass(frozen=True)
class Entity:
    key: str
    name: str
    type: str


PREDICATE_COOCCURS = "co-occurs"


@dataclass
class ChunkEntities:
    """What one chunk names: its entities (first seen order), the surface forms of each (by key), the relations
    between entities of one sentence as (key, key, predicate) counts with the smaller key first, and the
    apposition pairs (key, key) seen ("International Business Machines (IBM)", "Paris, the capital")."""

    entities: list[Entity] = field(default_factory=list)
    relations: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    surfaces: dict[str, set[str]] = field(default_factory=dict)
    appositions: list[tuple[str, str]] = field(default_factory=list)

    @property
    def pairs(self) -> Counter[tuple[str, str]]:
        """Sentence co-occurrence counts by key pair, whatever the predicate."""
        out: Counter[tuple[str, str]] = Counter()
        for (a, b, _), count in self.relations.items():
            out[(a, b)] += count
        return out


def _strip_diacritics(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def normalise(name: str) -> str:
    """The entity key: NFKC, diacritics dropped ("Alû" = "Alu"), case-folded, possessive, a leading "the" and
    outer punctuation dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKC", name).replace("’", "'")
    text = re.sub(r"'s\b|(?<=s)'(?=\s|$)", "", text)
    text = _NON_KEY.sub(" ", _strip_diacritics(text).casefold())
    text = " ".join(text.split()).strip(" .-")
    if text.startswith("the ") and len(text) > 4:
        text = text[4:]
    return text[:MAX_KEY_CHARS]


def sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


def keep_most_frequent(per_sentence: list[list[Entity]], limit: int) -> tuple[list[Entity], set[str]]:
    """The chunk's entities (at most `limit`, the most frequent; first-seen order) and the kept keys."""
    counts: Counter[str] = Counter()
    first: dict[str, Entity] = {}
    for entities in per_sentence:
        for entity in entities:
            counts[entity.key] += 1
            first.setdefault(entity.key, entity)
    order = {key: i for i, key in enumerate(first)}
    kept = sorted(first, key=lambda key: (-counts[key], order[key]))[:limit]
    return [first[key] for key in sorted(kept, key=order.__getitem__)], set(kept)


class RuleExtractor:
    """The rule-based fallback: entities from the shared spotter, relations = sentence co-occurrence."""

    name = "rules"

    def __init__(self, max_entities_per_chunk: int = 25) -> None:
        self.max_entities = max_entities_per_chunk

    def sentence_entities(self, sentence: str) -> list[Entity]:
        """Entities named in one sentence, in order of appearance, deduplicated by key."""
        seen: set[str] = set()
        entities: list[Entity] = []
        for mention in spot(sentence, for_question=False):
            entity = Entity(normalise(mention.text), mention.text, _TYPES.get(mention.kind, TYPE_NAME))
            if entity.key and entity.key not in seen:
                seen.add(entity.key)
                entities.append(entity)
        return entities

    def extract(self, text: str) -> ChunkEntities:
        """Entities of a chunk (at most `max_entities`, the most frequent first) and their co-occurrences."""
        per_sentence = [self.sentence_entities(s) for s in sentences(text)]
        entities, kept = keep_most_frequent(per_sentence, self.max_entities)
        result = ChunkEntities(entities=entities)
        for found in per_sentence:
            for entity in found:
                if entity.key in kept:
                    result.surfaces.setdefault(entity.key, set()).add(entity.name)
            keys = sorted({e.key for e in found if e.key in kept})
            for a, b in combinations(keys, 2):
                result.relations[(a, b, PREDICATE_COOCCURS)] += 1
        return result

    def question_entities(self, query: str) -> list[Entity]:
        return [entity for sentence in sentences(query) for entity in self.sentence_entities(sentence)]

    def query_keys(self, query: str, max_keys: int = 200) -> list[str]:
        return query_keys(query, self.question_entities(query), max_keys)


def query_keys(query: str, entities: list[Entity], max_keys: int = 200) -> list[str]:
    """Keys a question may name: its extracted `entities` plus every lower-cased word n-gram (n <= 6).

    The n-grams let "what does nasa do" find the entity NASA; only keys that exist in the graph match.
    """
    keys: dict[str, None] = {entity.key: None for entity in entities}
    words = [normalise(_strip_possessive(m.group(0))) for m in _WORD.finditer(unicodedata.normalize("NFKC", query))]
    words = [w for w in words if w]
    for n in range(1, MAX_QUERY_NGRAM + 1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if n == 1 and (gram[0] in DOCUMENT_STOPWORDS or len(gram[0]) < 2):
                continue
            keys[" ".join(gram)] = None
    return list(keys)[:max_keys]


class Extractor(Protocol):
    """What the graph needs of an extractor (`nlp.Extractor`, or `RuleExtractor` alone)."""

    name: str

    def extract(self, text: str) -> ChunkEntities: ...

    def question_entities(self, query: str) -> list[Entity]: ...


@dataclass
class RelationStats:
    weight: int = 0
    chunk_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Alias:
    """A merge: the surface form `surface` (key `key`) is the entity `target`, because of `reason`."""

    key: str
    surface: str
    target: str
    reason: str


@dataclass
class DocumentGraph:
    """What one document contributes to the graph: its chunks, entities, mentions, relations and merges.

    Relation keys are (a, b, predicate) with a < b: one undirected relation per predicate, stored once per
    document. Mentions carry the surface forms the chunk used for the (resolved) entity.
    """

    document_id: str
    chunk_ids: list[str]
    entities: dict[str, Entity]
    mentions: list[tuple[str, str]]  # (entity key, chunk id)
    relations: dict[tuple[str, str, str], RelationStats]
    surfaces: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (key, chunk id) → surface forms
    aliases: list[Alias] = field(default_factory=list)


MAX_CHUNK_IDS_PER_RELATION = 20


@dataclass
class Extracted:
    """The raw extraction of a document, before entity resolution."""

    document_id: str
    chunks: list[tuple[str, ChunkEntities]]

    def entities(self) -> dict[str, Entity]:
        out: dict[str, Entity] = {}
        for _, found in self.chunks:
            for entity in found.entities:
                out.setdefault(entity.key, entity)
        return out

    def mention_counts(self) -> Counter[str]:
        return Counter(entity.key for _, found in self.chunks for entity in found.entities)

    def appositions(self) -> list[tuple[str, str]]:
        return [pair for _, found in self.chunks for pair in found.appositions]


def extract_document(
    extractor: Extractor, document_id: str, chunks: list[tuple[str, str]], title: str = ""
) -> Extracted:
    """Each chunk's entities; the document's topic (`topic_entity` of its `title`) is one of every chunk's."""
    extracted = Extracted(document_id, [(chunk_id, extractor.extract(text)) for chunk_id, text in chunks])
    topic = topic_entity(extractor, title)
    if topic is not None:
        for _, found in extracted.chunks:
            if all(entity.key != topic.key for entity in found.entities):
                found.entities.append(topic)
            found.surfaces.setdefault(topic.key, set()).add(topic.name)
    return extracted


def topic_name(title: str) -> str:
    """The name a document's title gives its topic, "" when the title does not read as a name.

    A file name's extension and underscores and a trailing qualifier go ("Travel_Policy.pdf" → "Travel Policy",
    "Kiss and Tell (1945 film)" → "Kiss and Tell"). A title with no capitalised word (the parser's fallback, a
    file name such as "scan_0001" or "final_v2"; a script without case) or of more than `MAX_QUERY_NGRAM` words
    (longer than any name a question is matched on) names no topic.
    """
    name = _FILE_EXTENSION.sub("", " ".join(title.split())).replace("_", " ")
    name = " ".join(_QUALIFIER.sub("", name.strip()).split())
    key = normalise(name)
    if len(key) < 2 or not _CAPITALISED.search(name) or len(key.split()) > MAX_QUERY_NGRAM:
        return ""
    return name


def topic_entity(extractor: Extractor, title: str) -> Entity | None:
    """The document's topic entity (HippoRAG indexes "title + text" passages: the page about an entity mentions
    it): typed as the extractor reads the title when it reads it whole as one entity, else a name."""
    name = topic_name(title)
    if not name:
        return None
    key = normalise(name)
    typed = next((e.type for e in extractor.question_entities(name) if e.key == key), TYPE_NAME)
    return Entity(key, name, typed)


def build_document_graph(
    extracted: Extracted, canonical: dict[str, str] | None = None, aliases: list[Alias] | None = None
) -> DocumentGraph:
    """Aggregates a document's extraction under the resolved keys (`canonical`: key → entity key; a key not in
    it is its own entity); weights are sentence counts, a relation between two names of one entity is dropped."""
    canonical = canonical or {}
    originals = extracted.entities()

    def resolved(key: str) -> str:
        return canonical.get(key, key)

    graph = DocumentGraph(extracted.document_id, [chunk_id for chunk_id, _ in extracted.chunks], {}, [], {})
    graph.aliases = list(aliases or [])
    for chunk_id, found in extracted.chunks:
        seen: set[str] = set()
        for entity in found.entities:
            key = resolved(entity.key)
            target = originals.get(key, entity)
            graph.entities.setdefault(key, Entity(key, target.name, target.type))
            graph.surfaces.setdefault((key, chunk_id), set()).update(found.surfaces.get(entity.key, {entity.name}))
            if key not in seen:
                seen.add(key)
                graph.mentions.append((key, chunk_id))
        for (a, b, predicate), count in found.relations.items():
            ra, rb = sorted((resolved(a), resolved(b)))
            if ra == rb:
                continue
            stats = graph.relations.setdefault((ra, rb, predicate), RelationStats())
            stats.weight += count
            if chunk_id not in stats.chunk_ids and len(stats.chunk_ids) < MAX_CHUNK_IDS_PER_RELATION:
                stats.chunk_ids.append(chunk_id)
    return graph
