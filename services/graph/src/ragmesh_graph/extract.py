"""A small, honest rule-based entity extractor: proper-noun phrases, acronyms, CamelCase names, quoted terms.

No model: it finds what capitalisation and quoting mark as names, and relates entities that share a
sentence. It misses lower-case concepts and a single capitalised word that starts a sentence (it cannot
tell "Microsoft" from "Yesterday" there), and a sentence-initial word that is not in the stopword list
("Yesterday Acme Corp") stays part of the phrase; all-caps emphasis ("THE END") reads as acronyms. The full graph capability (a model-based extractor) can replace this class.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations

from ragmesh_common.text.stopwords import ENGLISH

TYPE_ACRONYM = "acronym"
TYPE_NAME = "name"
TYPE_TERM = "term"

MAX_KEY_CHARS = 120
MAX_PHRASE_WORDS = 6
MAX_QUERY_NGRAM = 6

# Capitalised words that start sentences or phrases without being names: the stop words, greetings, and the
# words a document refers to its own parts with ("See Figure 3", "Table 2").
STOPWORDS = ENGLISH | frozenset(
    [
        "dear",
        "hello",
        "hi",
        "note",
        "please",
        "see",
        "figure",
        "fig",
        "table",
        "section",
        "chapter",
        "page",
        "appendix",
        "example",
        "today",
        "yesterday",
        "tomorrow",
    ]
)
# Lower-case words allowed inside a proper-noun phrase ("Bank of America", "Department for Education");
# not "and" or "the": "Acme and Globex", "Paris the capital" are two entities.
CONNECTORS = frozenset({"of", "for", "de", "du", "der", "von", "van", "la", "le", "&"})
# All-caps tokens that are emphasis or numerals, not acronyms.
NOT_ACRONYMS = frozenset(
    {
        "II",
        "III",
        "IV",
        "VI",
        "VII",
        "VIII",
        "IX",
        "XI",
        "XII",
        "OK",
        "AM",
        "PM",
        "THE",
        "AND",
        "FOR",
        "NOT",
        "BUT",
        "ARE",
        "YOU",
        "ALL",
        "NEW",
        "NOTE",
        "TODO",
        "WARNING",
        "NB",
    }
)

_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n\s*\n|\n(?=\s*[-*•]\s)")
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»\n]{2,80})[\"“”«»]")
# A word: letters/digits with inner hyphens, apostrophes, dots or ampersands ("AT&T", "O'Neil", "Node.js").
_WORD = re.compile(r"[A-Za-z0-9À-ÖØ-öø-ÿ]+(?:[-'’.&][A-Za-z0-9À-ÖØ-öø-ÿ]+)*")
_ACRONYM = re.compile(r"[A-Z]{2,6}s?")  # "NASA", "APIs"
_TITLE = re.compile(r"[A-ZÀ-ÖØ-Þ][a-zß-öø-ÿ0-9]+(?:[-'’][A-Za-zÀ-ÖØ-öø-ÿ]+)*")
# CamelCase: an inner lower->upper switch ("WidgetPro", "PostgreSQL", "iPhone").
_CAMEL = re.compile(r"[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*")
_NON_KEY = re.compile(r"[^\w&+#.\- ]+")


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


def _word_kind(word: str) -> str | None:
    if _ACRONYM.fullmatch(word) and word.rstrip("s") not in NOT_ACRONYMS:
        return TYPE_ACRONYM
    if _CAMEL.fullmatch(word) and not word.isupper():
        return "camel"
    if _TITLE.fullmatch(word):
        return "title"
    return None


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


class EntityExtractor:
    """Extracts entities from chunk text and candidate entity keys from a question."""

    def __init__(self, max_entities_per_chunk: int = 25) -> None:
        self.max_entities = max_entities_per_chunk

    def sentence_entities(self, sentence: str) -> list[Entity]:
        """Entities named in one sentence, in order of appearance, deduplicated by key."""
        found: list[tuple[int, Entity]] = []
        for match in _QUOTED.finditer(sentence):
            term = match.group(1).strip(" .,;:")
            if 1 <= len(term.split()) <= MAX_PHRASE_WORDS and normalise(term) not in STOPWORDS:
                found.append((match.start(), Entity(normalise(term), term, TYPE_TERM)))
        unquoted = _QUOTED.sub(lambda m: " " * len(m.group(0)), sentence)
        words = [(m.start(), _strip_possessive(m.group(0)), m.group(0)) for m in _WORD.finditer(unquoted)]
        run: list[tuple[int, str, str]] = []  # (position, word, kind) of the current capitalised run
        start = words[0][0] if words else 0
        for index, (pos, word, raw) in enumerate(words):
            kind = _word_kind(word)
            gap = index > 0 and not re.fullmatch(r"\s*", unquoted[words[index - 1][0] + len(words[index - 1][2]) : pos])
            if run and gap:  # punctuation between words ends a phrase ("Acme, NASA")
                found.extend(self._close_run(run, start))
                run = []
            if kind is not None:
                run.append((pos, word, kind))
            elif run and word.lower() in CONNECTORS:
                run.append((pos, word, "connector"))
            elif run:
                found.extend(self._close_run(run, start))
                run = []
            if raw != word and run:  # a possessive ends the phrase: "Acme Corp's WidgetPro"
                found.extend(self._close_run(run, start))
                run = []
        if run:
            found.extend(self._close_run(run, start))
        seen: set[str] = set()
        entities: list[Entity] = []
        for _, entity in sorted(found, key=lambda item: item[0]):
            if entity.key and entity.key not in seen:
                seen.add(entity.key)
                entities.append(entity)
        return entities

    @staticmethod
    def _close_run(run: list[tuple[int, str, str]], sentence_start: int) -> list[tuple[int, Entity]]:
        # Drop leading/trailing stopwords and connectors ("The Acme Corp", "In Paris and").
        while run and (run[0][2] == "connector" or run[0][1].lower() in STOPWORDS):
            run = run[1:]
        while run and (run[-1][2] == "connector" or run[-1][1].lower() in STOPWORDS):
            run = run[:-1]
        if not run:
            return []
        words = [word for _, word, kind in run if kind != "connector"]
        if len(words) >= 2 and len(run) <= MAX_PHRASE_WORDS:
            name = " ".join(word for _, word, _ in run)
            return [(run[0][0], Entity(normalise(name), name, TYPE_NAME))]
        # A single word or an over-long run: keep its acronyms and CamelCase names on their own, and a
        # capitalised word that does not start the sentence ("met Google"; "Yesterday" would be noise).
        out = []
        for pos, word, kind in run:
            if kind == TYPE_ACRONYM:
                singular = word[:-1] if word.endswith("s") else word  # "APIs" -> "API"
                out.append((pos, Entity(normalise(singular), singular, TYPE_ACRONYM)))
            elif kind == "camel" or (kind == "title" and len(run) == 1 and pos != sentence_start):
                out.append((pos, Entity(normalise(word), word, TYPE_NAME)))
        return out

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
                if n == 1 and (gram[0] in STOPWORDS or len(gram[0]) < 2):
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
