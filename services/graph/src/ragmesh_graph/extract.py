"""Graph building on the shared rule-based spotter: entity keys and types, sentence co-occurrence, DocumentGraph.

The spotting (proper-noun phrases, acronyms, CamelCase names, quoted terms) is `ragmesh_common.text.entities`
in its document mode, the one the gateway reads questions with; this module turns its mentions into keyed,
typed entities and relates entities that share a sentence. No model: it misses lower-case concepts and a
single capitalised word that starts a sentence (it cannot tell "Microsoft" from "Yesterday" there), and a
sentence-initial word that is not in the stopword list ("Yesterday Acme Corp") stays part of the phrase;
all-caps emphasis ("THE END") reads as acronyms. The full graph capability (a model-based extractor) can
replace this class.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

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


@dataclass(frozen=True)
class Entity:
    key: str
    name: str
    type: str


@dataclass
class ChunkEntities:
    """What one chunk names: its entities (first seen order) and sentence co-occurrence counts by key pair."""

    entities: list[Entity] = field(default_factory=list)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)


def normalise(name: str) -> str:
    """The entity key: NFKC, case-folded, possessive and outer punctuation dropped, spaces collapsed."""
    text = unicodedata.normalize("NFKC", name).replace("’", "'")
    text = re.sub(r"'s\b", "", text)
    text = _NON_KEY.sub(" ", text.casefold())
    return " ".join(text.split()).strip(" .-")[:MAX_KEY_CHARS]


def sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SENTENCE_END.split(text)) if s]


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


class EntityExtractor:
    """Extracts entities from chunk text and candidate entity keys from a question."""

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
        counts: Counter[str] = Counter()
        first: dict[str, Entity] = {}
        for entities in per_sentence:
            for entity in entities:
                counts[entity.key] += 1
                first.setdefault(entity.key, entity)
        order = {key: i for i, key in enumerate(first)}
        kept = sorted(first, key=lambda key: (-counts[key], order[key]))[: self.max_entities]
        kept_set = set(kept)
        result = ChunkEntities(entities=[first[key] for key in sorted(kept, key=order.__getitem__)])
        for entities in per_sentence:
            keys = sorted({e.key for e in entities if e.key in kept_set})
            for pair in combinations(keys, 2):
                result.pairs[pair] += 1
        return result

    def query_keys(self, query: str, max_keys: int = 200) -> list[str]:
        """Keys a question may name: extracted entities plus every lower-cased word n-gram (n <= 6).

        The n-grams let "what does nasa do" find the entity NASA; only keys that exist in the graph match.
        """
        keys: dict[str, None] = {}
        for sentence in sentences(query):
            for entity in self.sentence_entities(sentence):
                keys[entity.key] = None
        words = [normalise(_strip_possessive(m.group(0))) for m in _WORD.finditer(unicodedata.normalize("NFKC", query))]
        words = [w for w in words if w]
        for n in range(1, MAX_QUERY_NGRAM + 1):
            for i in range(len(words) - n + 1):
                gram = words[i : i + n]
                if n == 1 and (gram[0] in DOCUMENT_STOPWORDS or len(gram[0]) < 2):
                    continue
                keys[" ".join(gram)] = None
        return list(keys)[:max_keys]


@dataclass
class RelationStats:
    weight: int = 0
    chunk_ids: list[str] = field(default_factory=list)


@dataclass
class DocumentGraph:
    """What one document contributes to the graph: its chunks, entities, mentions and relations.

    Relation keys are (a, b) with a < b: one undirected co-occurrence, stored once per document.
    """

    document_id: str
    chunk_ids: list[str]
    entities: dict[str, Entity]
    mentions: list[tuple[str, str]]  # (entity key, chunk id)
    relations: dict[tuple[str, str], RelationStats]


MAX_CHUNK_IDS_PER_RELATION = 20


def build_document_graph(extractor: EntityExtractor, document_id: str, chunks: list[tuple[str, str]]) -> DocumentGraph:
    """Extracts every (chunk id, text) and aggregates per document; weights are sentence co-occurrence counts."""
    graph = DocumentGraph(document_id, [chunk_id for chunk_id, _ in chunks], {}, [], {})
    for chunk_id, text in chunks:
        found = extractor.extract(text)
        for entity in found.entities:
            graph.entities.setdefault(entity.key, entity)
            graph.mentions.append((entity.key, chunk_id))
        for pair, count in found.pairs.items():
            stats = graph.relations.setdefault(pair, RelationStats())
            stats.weight += count
            if len(stats.chunk_ids) < MAX_CHUNK_IDS_PER_RELATION:
                stats.chunk_ids.append(chunk_id)
    return graph
