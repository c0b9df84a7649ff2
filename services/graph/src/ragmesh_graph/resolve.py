"""Entity resolution: one node per real-world entity, every merge recorded with its reason.

Keys are already normalised (`extract.normalise`: case, diacritics, possessive, a leading "the"), so "Alû",
"ALU" and "alu's" are one key. On top of that, a document's keys are merged into one entity when:

- `known alias`: an earlier document's merge already maps the key (the graph's `Alias` nodes);
- `apposition`: the two stood in apposition in one sentence ("International Business Machines (IBM)") —
  the shorter name becomes an alias of the longer;
- `acronym`: a key of 2-6 letters, written in capitals, equals the initials of exactly one multi-word
  entity of the document (else of exactly one entity in the graph): "IBM" = "International Business
  Machines" (function words such as "of", "and", "the" are skipped: "BoA" = "Bank of America");
- `short form`: a one-word person name is the last word of exactly one longer person name of the document
  ("Obama" = "Barack Obama");
- `similar name (s)`: the cosine similarity `s` of the two names' character-trigram vectors is at least
  `GRAPH_RESOLUTION_SIMILARITY` (a cheap local embedding of the name's spelling, no model call: "Tchaikovsky" =
  "Tschaikowsky" at 0.6 is not merged by default; "Kolkata Knight Riders" = "Kolkata Knight Rider" is),
  among entities of the same type in the document and the graph's entities that share the first word.

The shorter (or less mentioned) name is the alias; chains resolve to one root (union-find).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ragmesh_graph.extract import Alias, Entity, Extracted

REASON_KNOWN = "known alias"
REASON_APPOSITION = "apposition"
REASON_ACRONYM = "acronym"
REASON_SHORT_FORM = "short form"
REASON_SIMILAR = "similar name"

FUNCTION_WORDS = frozenset({"of", "and", "the", "for", "de", "du", "des", "la", "le", "von", "und", "der", "&", "in"})
_ACRONYM = re.compile(r"[A-Z][A-Za-z&]{1,5}")
PERSON = "PERSON"


def initials(key: str) -> str:
    """The initials of a multi-word key, function words skipped ("" for one word)."""
    words = [w for w in key.replace("-", " ").split() if w not in FUNCTION_WORDS]
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def acronym_letters(surface: str) -> str:
    """The letters an acronym stands for, lower-cased: all of them ("IBM" → "ibm"), or only the capitals of a
    mixed-case one, whose small letters are function words ("BoA" → "ba", as `initials` skips "of")."""
    letters = surface.replace(".", "").replace("&", "")
    capitals = "".join(c for c in letters if c.isupper())
    return (capitals if capitals != letters else letters).casefold()


def first_word(key: str) -> str:
    return key.split(" ", 1)[0]


def is_acronym(surface: str) -> bool:
    """Written like an acronym: 2-6 letters, the first a capital, more capitals than lower-case letters."""
    letters = surface.replace(".", "")
    return bool(_ACRONYM.fullmatch(letters)) and sum(c.isupper() for c in letters) * 2 > len(letters)


def trigrams(text: str) -> Counter[str]:
    padded = f"  {text} "
    return Counter(padded[i : i + 3] for i in range(len(padded) - 2))


def similarity(a: str, b: str) -> float:
    """Cosine similarity of the character-trigram count vectors of two keys."""
    ta, tb = trigrams(a), trigrams(b)
    dot = sum(count * tb[gram] for gram, count in ta.items())
    norm = math.sqrt(sum(v * v for v in ta.values())) * math.sqrt(sum(v * v for v in tb.values()))
    return dot / norm if norm else 0.0


@dataclass(frozen=True)
class KnownEntity:
    key: str
    type: str


@dataclass
class Known:
    """What the graph already holds that a document's keys may resolve to."""

    aliases: dict[str, tuple[str, str]] = field(default_factory=dict)  # alias key → (entity key, reason)
    by_initials: dict[str, list[KnownEntity]] = field(default_factory=dict)
    by_first_word: dict[str, list[KnownEntity]] = field(default_factory=dict)


@dataclass
class Resolution:
    canonical: dict[str, str]  # key → entity key, for merged keys only
    aliases: list[Alias]


class _UnionFind:
    def __init__(self, rank: dict[str, tuple[int, int, str]]) -> None:
        self.parent: dict[str, str] = {}
        self.rank = rank  # the better name of two roots becomes the root: more words, more mentions, longer

    def find(self, key: str) -> str:
        root = key
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while key != root:
            key, self.parent[key] = self.parent.get(key, key), root
        return root

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        keep, drop = (ra, rb) if self.rank.get(ra, (0, 0, ra)) >= self.rank.get(rb, (0, 0, rb)) else (rb, ra)
        self.parent[drop] = keep
        return True


def resolve(extracted: Extracted, known: Known, threshold: float) -> Resolution:
    """The document's merges: each merged key → its entity key, and the aliases (with reasons) to record."""
    entities = extracted.entities()
    counts = extracted.mention_counts()
    rank = {k: (len(k.split()), counts[k], k) for k in entities}
    for target, _ in known.aliases.values():
        rank.setdefault(target, (len(target.split()), 1 << 20, target))  # a graph entity stays the root
    for candidates in (*known.by_initials.values(), *known.by_first_word.values()):
        for entity in candidates:
            rank.setdefault(entity.key, (len(entity.key.split()), 1 << 20, entity.key))
    uf = _UnionFind(rank)
    reasons: dict[str, str] = {}

    def merge(alias: str, target: str, reason: str) -> None:
        if alias != target and uf.union(alias, target):
            reasons.setdefault(alias, reason)

    for key in entities:
        if key in known.aliases:
            target, why = known.aliases[key]
            merge(key, target, f"{REASON_KNOWN} ({why})")
    for a, b in extracted.appositions():
        if a in entities and b in entities and _compatible(entities[a], entities[b]):
            shorter, longer = sorted((a, b), key=lambda k: (len(k.split()), len(k)))
            merge(shorter, longer, REASON_APPOSITION)
    doc_initials: dict[str, list[str]] = {}
    for key in entities:
        if value := initials(key):
            doc_initials.setdefault(value, []).append(key)
    for key, entity in entities.items():
        if not is_acronym(entity.name) or " " in key:
            continue
        letters = acronym_letters(entity.name)
        local = [k for k in doc_initials.get(letters, []) if k != key]
        if len(local) == 1:
            merge(key, local[0], REASON_ACRONYM)
        elif not local and len(graph := known.by_initials.get(letters, [])) == 1:
            merge(key, graph[0].key, REASON_ACRONYM)
    people = [k for k, e in entities.items() if e.type == PERSON and " " in k]
    for key, entity in entities.items():
        if entity.type != PERSON or " " in key:
            continue
        longer = [k for k in people if k.rsplit(" ", 1)[-1] == key]
        if len(longer) == 1:
            merge(key, longer[0], REASON_SHORT_FORM)
    if threshold < 1.0:
        _similar(entities, known, threshold, merge)
    canonical: dict[str, str] = {}
    aliases: list[Alias] = []
    for key in entities:
        root = uf.find(key)
        if root != key:
            canonical[key] = root
            aliases.append(Alias(key, entities[key].name, root, reasons.get(key, REASON_SIMILAR)))
    return Resolution(canonical, aliases)


def _compatible(a: Entity, b: Entity) -> bool:
    """Two types that may name one entity (spaCy confuses ORG, GPE, FAC, PRODUCT and the rule types)."""
    people = {a.type == PERSON, b.type == PERSON}
    return len(people) == 1 or a.type == b.type


def _similar(
    entities: dict[str, Entity], known: Known, threshold: float, merge: Callable[[str, str, str], None]
) -> None:
    by_type: dict[str, list[str]] = {}
    for key, entity in entities.items():
        by_type.setdefault(entity.type, []).append(key)
    for keys in by_type.values():
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if a[:1] == b[:1] and (score := similarity(a, b)) >= threshold:
                    shorter, longer = sorted((a, b), key=lambda k: (len(k), k))
                    merge(shorter, longer, f"{REASON_SIMILAR} ({score:.2f})")
    for key, entity in entities.items():
        for candidate in known.by_first_word.get(first_word(key), []):
            if (
                candidate.key != key
                and candidate.type == entity.type
                and (score := similarity(key, candidate.key)) >= threshold
            ):
                merge(key, candidate.key, f"{REASON_SIMILAR} ({score:.2f})")


def lookup_keys(extracted: Extracted) -> tuple[list[str], list[str], list[str]]:
    """What to ask the graph before resolving a document: its keys (for known aliases), the acronyms' letters
    (for entities with those initials) and the first words (for similar names)."""
    entities = extracted.entities()
    keys = sorted(entities)
    acronyms = sorted({acronym_letters(e.name) for k, e in entities.items() if is_acronym(e.name) and " " not in k})
    firsts = sorted({first_word(k) for k in keys})
    return keys, acronyms, firsts


def known_from_rows(
    alias_rows: Iterable[tuple[str, str, str]], entity_rows: Iterable[tuple[str, str, str, str]], acronyms: set[str]
) -> Known:
    """`Known` from the graph's alias rows (key, entity, reason) and entity rows (key, type, initials, first)."""
    known = Known()
    for key, target, reason in alias_rows:
        known.aliases.setdefault(key, (target, reason))
    for key, type_, letters, first in entity_rows:
        entity = KnownEntity(key, type_)
        if letters and letters in acronyms:
            known.by_initials.setdefault(letters, []).append(entity)
        known.by_first_word.setdefault(first, []).append(entity)
    return known
