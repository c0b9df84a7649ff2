"""Community reports and the map step of a collection-level question, built per request from what one user reads.

A `GraphView` is the part of the graph one user may read now: entities with a mention in a readable document,
relation weights summed over readable documents only, and readable chunks with the entities they mention. A
report is built from a community's members that are in the view, ranked by PageRank over the readable edges
among them (communities.centrality); its chunks are the readable chunks that mention them (the most central
first), its sentences are those chunks' sentences ranked by the centrality of the members they name. Nothing of
an unreadable document is an input here, so nothing of one can be in a report: no name, no sentence, no count.
(The grouping itself, computed over all documents, is not shown as such: a report lists only readable members.)

The map step of a collection-level question: `relevant_communities` picks the communities the question is
about (those of the entities it names, else those whose members share its words, else the largest), and
`map_report` maps each report to the sentences that best answer the question (centrality times word overlap).
The reduce is the gateway's `communities` step (round-robin across reports, one source per chunk).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ragmesh_common.text.questions import SUMMARY_WORDS
from ragmesh_common.text.stopwords import ENGLISH
from ragmesh_graph.communities import Community, Hierarchy, centrality
from ragmesh_graph.config import CommunitySettings
from ragmesh_graph.extract import normalise, sentences

MAX_SENTENCE_CHARS = 600
_WORDS = re.compile(r"[a-z0-9][a-z0-9'-]+")


def topic_keys(keys: list[str], question: str) -> list[str]:
    """The question's keys without the single words that only ask for a collection answer: "main" of "the main
    themes" is not the river Main (which pulled the Rhine's communities into every "main themes" question). Such
    a word the question capitalises after its first word names something ("… about the Main?") and stays."""
    named = {w.lower() for w in re.findall(r"(?<=\s)[A-Z][a-z]+\b", question)}
    return [k for k in keys if k not in SUMMARY_WORDS or k in named]


@dataclass(frozen=True)
class ChunkText:
    document_id: str
    chunk_id: str
    text: str


@dataclass
class GraphView:
    """What one user may read of the graph (all three built from readable documents only)."""

    names: dict[str, str]  # entity key -> display name
    weights: dict[tuple[str, str], float]  # entity pair -> weight
    chunk_mentions: dict[str, list[str]]  # chunk uid -> entity keys it mentions


@dataclass(frozen=True)
class Sentence:
    text: str
    document_id: str
    chunk_id: str
    score: float


@dataclass
class ReportPlan:
    community: Community
    relevance: float
    members: list[str]  # readable members
    centrality: dict[str, float]
    chunk_uids: list[str]  # readable chunks to read, the most central first


@dataclass
class Report:
    community_id: str
    level: int
    title: str
    entities: list[tuple[str, str, float]]  # (key, name, centrality), the most central first
    size: int  # readable members
    relevance: float
    sentences: list[Sentence] = field(default_factory=list)


def content_words(text: str) -> set[str]:
    return {w for w in _WORDS.findall(normalise(text)) if w not in ENGLISH and w not in SUMMARY_WORDS and len(w) > 2}


def relevant_communities(
    hierarchy: Hierarchy, view: GraphView, query_keys: list[str], question: str, settings: CommunitySettings
) -> list[tuple[Community, float]]:
    """The communities a question is about, with a relevance score, the most relevant first.

    Named entities of the question (readable ones) pick their top-level communities, and the answer is made of
    those communities' sub-communities (their themes); without one, communities whose readable members share
    the question's words; without any, the largest top-level communities (a question about everything)."""
    readable = set(view.names)

    def size(community: Community) -> int:
        return sum(1 for m in community.members if m in readable)

    named = [k for k in topic_keys(query_keys, question) if k in readable]
    scored: dict[str, float] = {}
    if named:
        tops = {hierarchy.of_entity[k][0] for k in named if k in hierarchy.of_entity}
        for community in hierarchy.communities.values():
            top = community.id if community.level == 0 else "0." + community.id.split(".")[1]
            if top not in tops or size(community) == 0:
                continue
            children = [c for c in hierarchy.communities.values() if c.parent == community.id]
            if children and any(size(c) for c in children):
                continue  # answered by its sub-communities
            hits = sum(1 for k in named if k in community.members)
            scored[community.id] = hits * 10.0 + math.log1p(size(community))
    if not scored:
        words = content_words(question)
        if words:
            for community in hierarchy.level(0):
                member_words = {w for m in community.members if m in readable for w in _WORDS.findall(m)}
                overlap = len(words & member_words)
                if overlap:
                    scored[community.id] = overlap * 10.0 + math.log1p(size(community))
    if not scored:
        for community in hierarchy.level(0):
            if size(community):
                scored[community.id] = math.log1p(size(community))
    ranked = sorted(scored.items(), key=lambda item: (-item[1], item[0]))[: settings.max_reports]
    return [(hierarchy.communities[cid], score) for cid, score in ranked]


def plan_reports(
    chosen: list[tuple[Community, float]], view: GraphView, settings: CommunitySettings
) -> list[ReportPlan]:
    """Per chosen community: its readable members, their centrality and the readable chunks to read."""
    by_entity: dict[str, list[str]] = {}
    for uid, keys in view.chunk_mentions.items():
        for key in keys:
            by_entity.setdefault(key, []).append(uid)
    plans: list[ReportPlan] = []
    for community, relevance in chosen:
        members = [m for m in community.members if m in view.names]
        if not members:
            continue
        ranks = centrality(members, view.weights)
        chunk_score: dict[str, float] = {}
        for member in members:
            for uid in by_entity.get(member, []):
                chunk_score[uid] = chunk_score.get(uid, 0.0) + ranks[member]
        uids = sorted(chunk_score, key=lambda u: (-chunk_score[u], u))[: settings.report_chunks]
        plans.append(ReportPlan(community, relevance, members, ranks, uids))
    return plans


def _mentioned(sentence: str, members: list[str]) -> list[str]:
    text = f" {' '.join(_WORDS.findall(normalise(sentence)))} "
    return [m for m in members if f" {' '.join(_WORDS.findall(m))} " in text]


def build_reports(
    plans: list[ReportPlan], texts: dict[str, ChunkText], names: dict[str, str], settings: CommunitySettings
) -> list[Report]:
    """Reports from the plans and the text of their chunks (`texts`: readable chunks only, by uid; `names`: the
    view's display names)."""
    built: list[Report] = []
    for plan in plans:
        ranked = sorted(plan.members, key=lambda m: (-plan.centrality[m], m))
        scored: list[Sentence] = []
        seen: set[str] = set()
        for uid in plan.chunk_uids:
            chunk = texts.get(uid)
            if chunk is None:
                continue
            for sentence in sentences(chunk.text):
                key = sentence.casefold()
                if key in seen:
                    continue
                seen.add(key)
                named = _mentioned(sentence, plan.members)
                if named:
                    score = sum(plan.centrality[m] for m in named)
                    scored.append(Sentence(sentence[:MAX_SENTENCE_CHARS], chunk.document_id, chunk.chunk_id, score))
        if not scored:
            continue
        scored.sort(key=lambda s: (-s.score, s.document_id, s.chunk_id))
        built.append(
            Report(
                community_id=plan.community.id,
                level=plan.community.level,
                title=" · ".join(names.get(m, m) for m in ranked[:3]),
                entities=[(m, names.get(m, m), plan.centrality[m]) for m in ranked[: settings.report_entities]],
                size=len(plan.members),
                relevance=plan.relevance,
                sentences=scored[: settings.report_sentences * 3],  # the map step picks among these
            )
        )
    return built


def map_report(question: str, report: Report, keep: int) -> list[Sentence]:
    """The map step: the report's sentences that best answer the question (centrality x (1 + word overlap))."""
    words = content_words(question)
    top = max((s.score for s in report.sentences), default=1.0) or 1.0

    def score(sentence: Sentence) -> float:
        overlap = len(words & content_words(sentence.text)) if words else 0
        return sentence.score / top * (1 + overlap)

    return sorted(report.sentences, key=lambda s: (-score(s), s.document_id, s.chunk_id))[:keep]
