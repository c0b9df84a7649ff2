"""Answer benchmark: end-to-end answer quality, grounding and latency of the real mesh, through its HTTP API.

    make bench-answer                                         # SQuAD 200, HotpotQA 100, every off-topic question
    python bench/answer.py --limit 20                         # a quick run: 20 questions per set
    python bench/answer.py --data-dir /tmp/answer-stack       # keep the mesh's data; a second run reuses the uploads
    python bench/answer.py --mode direct,agentic --limit 20   # every question in each chat mode, side by side
    python bench/answer.py --typos 1                          # every question with one slip in a key word

Starts the whole mesh with its embedded defaults (`ragmesh_dev.devstack.Stack`: SmolLM2-135M behind the
local Ollama server, all-MiniLM-L6-v2, no reranker model), uploads the corpora as a user would
(POST /api/v1/documents, 8 at a time, then GET /api/v1/documents/{id} until `ready`), asks every question
through POST /api/v1/chat with `stream: true` (the first `token` event times the first token) and scores the
final event. Writes bench/results/answer.json as dataset → metric → value and prints a Markdown table.

Corpora, in one index (as one deployment holds every department's documents), kept apart by ACL:
- SQuAD v1.1 dev: a seeded sample of questions over the whole dev set; every article one of them comes
  from is uploaded whole, as one Markdown file (`# title`, then its paragraphs in order). That is how a
  user adds a Wikipedia page: the parser, not the benchmark, decides the chunk boundaries, and each
  question has its article's other paragraphs (same topic, the hardest distractors) and the other articles
  beside its gold paragraph.
- HotpotQA (100 questions): every context passage as its own Markdown document (`# title`, then the
  passage; titles are unique in the set). Each set is readable by its own department; the off-topic user
  has a role that reads both.

Near-topic questions (SQuAD 2.0-style, `--neartopic`): for some uploaded articles one paragraph is held out of
the upload and one of its questions is asked, one whose gold answer occurs nowhere in the uploaded article: it
shares the article's words, and its answer is not in the index. Any answer presented as verified is wrong.

Every set is split into a tuning half and a reporting half by question id (sha256 of the id, even first byte
= tuning); both are reported (`<set>/tuning`, `<set>/reporting`) beside the whole set. Tune only on the first.

Streaming: the chat asks for `stream_draft` (unless `--no-stream-draft`), so both the time to the first raw
draft token (TTFT, what a client saw before #26.6) and to the first verified `sentence` event (TTFS, what a
client shows now) are measured in the same run.

Metrics (see bench/README.md for the definitions): exact match and token F1 with the official SQuAD
normalisation (on `short_answer` when the response has one, else `answer`), gold containment, citation
precision, answered rate and outcome counts, the no-sources rate on off-topic questions, the false-grounded
rate, time to first token and total time (p50/p95), and retrieval-only ceilings (gold passage among the
sources / among the cited sources; gold answer in a source's text) that tell retriever from reader failures.

Benchmarks are not tests: no thresholds, the numbers are reported as measured.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import difflib
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import string
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # read_jsonl, read_qrels, percentile, log

from ragmesh_common.text.words import QUESTION_WORDS, STOP_WORDS

SEED = 20240617
UPLOADS_IN_FLIGHT = 8
READY_TIMEOUT_S = 3600.0  # one document; the ingest worker is serial, so the last of a batch waits longest
CHAT_TIMEOUT_S = 600.0  # one question, the whole stream (the gateway's answer deadline is 180 s)
GOLD_RUN_SHARE = 0.5  # a chunk comes from a passage when this share of its tokens is one run inside it
F1_WRONG = 0.5  # below this F1 (and gold not contained) an answer counts as wrong
MANIFEST = "bench-answer-manifest.json"
SQUAD_DEPARTMENT, HOTPOT_DEPARTMENT, ALL_ROLE = "bench-squad", "bench-hotpot", "bench-answer-all"


# ---------------------------------------------------------------- the official SQuAD v1.1 normalisation and scores


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles (a, an, the), single spaces (SQuAD v1.1 evaluate-v1.1.py)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    common = collections.Counter(pred) & collections.Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def contains_gold(text: str, golds: list[str]) -> bool:
    """A normalised gold answer occurs in the normalised text as whole tokens ("ten" is not in "often")."""
    haystack = f" {normalize_answer(text)} "
    return any(g and f" {g} " in haystack for g in (normalize_answer(x) for x in golds))


def from_passage(chunk_text: str, passage_tokens: list[str]) -> bool:
    """The chunk's text comes from the passage: at least GOLD_RUN_SHARE of its normalised tokens form one
    contiguous run inside the passage's normalised tokens (a chunk may pack the end of one paragraph with the
    start of the next; the run then decides which it mostly is)."""
    tokens = normalize_answer(chunk_text).split()
    if not tokens or not passage_tokens:
        return False
    match = difflib.SequenceMatcher(None, tokens, passage_tokens, autojunk=False).find_longest_match(
        0, len(tokens), 0, len(passage_tokens)
    )
    return match.size >= GOLD_RUN_SHARE * len(tokens)


# ---------------------------------------------------------------- data


@dataclass
class Question:
    dataset: str
    qid: str
    text: str
    golds: list[str]  # gold answers (empty for off-topic)
    gold_passages: list[str]  # corpus ids of the gold / supporting passages
    documents: list[str] = field(default_factory=list)  # the upload keys the question needs indexed


@dataclass
class Upload:
    key: str  # dataset:name, stable between runs (with the content's hash, the manifest's key)
    filename: str
    title: str
    content: str
    department: str


@dataclass
class Corpus:
    uploads: list[Upload] = field(default_factory=list)
    passage_tokens: dict[str, list[str]] = field(default_factory=dict)  # corpus id → normalised tokens
    passage_upload: dict[str, str] = field(default_factory=dict)  # corpus id → the key of the upload holding it


# The fixed split of every set: sha256 of the question id, even first byte = tuning, odd = reporting (one
# definition, in retrieval.py, which also reports HotpotQA retrieval on it)
half = bench.id_half


def with_typo(question: str, seed: str) -> str:
    """`question` with one slip in one of its key words (lower case, at least 5 letters, no stop or question
    word; none: unchanged): a letter left out, doubled, changed to another or swapped with the next, at any
    position, the first included (people's slips rarely hit it; this bench does not spare it). Seeded."""
    rng = random.Random(seed)
    found = [
        m
        for m in re.finditer(r"(?<![\w'’-])[a-z]{5,}(?![\w'’-])", question)
        if m.group(0) not in STOP_WORDS and m.group(0) not in QUESTION_WORDS
    ]
    if not found:
        return question
    match = rng.choice(found)
    word, at = match.group(0), rng.randrange(len(match.group(0)))
    kind = rng.choice(("drop", "double", "change", "swap"))
    if kind == "drop":
        slip = word[:at] + word[at + 1 :]
    elif kind == "double":
        slip = word[: at + 1] + word[at:]
    elif kind == "change":
        slip = word[:at] + rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != word[at]]) + word[at + 1 :]
    else:
        at = min(at, len(word) - 2)
        slip = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    return question[: match.start()] + slip + question[match.end() :]


def squad_questions(
    data_dir: Path, count: int, seed: int, neartopic: int = 0
) -> tuple[list[Question], Corpus, list[Question]]:
    """The sampled SQuAD questions, the corpus to upload, and `neartopic` near-topic questions (each from a
    paragraph held out of its uploaded article, with a gold answer that occurs nowhere in that article)."""
    folder = data_dir / "squad_v1.1_dev"
    passages = {p["_id"]: p for p in bench.read_jsonl(folder / "corpus.jsonl")}
    qrels = bench.read_qrels(folder / "qrels" / "test.tsv")
    pool = [q for q in bench.read_jsonl(folder / "queries.jsonl") if q["_id"] in qrels]
    sample = random.Random(seed).sample(pool, min(count, len(pool)))
    questions = [
        Question(
            "squad",
            q["_id"],
            q["text"],
            list(q.get("answers") or q.get("metadata", {}).get("answers", [])),
            sorted(qrels[q["_id"]]),
        )
        for q in sample
    ]
    titles = {passages[p]["title"] for q in questions for p in q.gold_passages}
    corpus = Corpus()
    by_title: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for passage in passages.values():  # file order is paragraph order within an article
        if passage["title"] in titles:
            by_title[passage["title"]].append(passage)
            corpus.passage_tokens[passage["_id"]] = normalize_answer(passage["text"]).split()
            corpus.passage_upload[passage["_id"]] = f"squad:{passage['title']}"
    near = near_topic(by_title, questions, pool, qrels, neartopic, seed)
    held_out = {p for q in near for p in q.gold_passages}
    for title in sorted(by_title):
        body = "\n\n".join(p["text"].strip() for p in by_title[title] if p["_id"] not in held_out)
        corpus.uploads.append(
            Upload(f"squad:{title}", f"{safe_name(title)}.md", title, f"# {title}\n\n{body}\n", SQUAD_DEPARTMENT)
        )
    for q in questions + near:  # a near-topic question needs its article (without the held-out paragraph)
        q.documents = sorted({corpus.passage_upload[p] for p in q.gold_passages})
    return questions, corpus, near


def near_topic(
    by_title: dict[str, list[dict[str, Any]]],
    questions: list[Question],
    pool: list[dict[str, Any]],
    qrels: dict[str, Any],
    count: int,
    seed: int,
) -> list[Question]:
    """Up to `count` questions, one per article, from a paragraph that no sampled question needs; the paragraph
    is then left out of the upload (see the module docstring)."""
    needed = {p for q in questions for p in q.gold_passages}
    by_passage: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for q in pool:
        for p in qrels[q["_id"]]:
            by_passage[p].append(q)
    rng = random.Random(seed + 1)
    near: list[Question] = []
    for title in sorted(by_title):
        if len(near) >= count:
            break
        free = [p for p in by_title[title] if p["_id"] not in needed and by_passage.get(p["_id"])]
        if not free:
            continue
        held = rng.choice(free)
        kept = normalize_answer(" ".join(p["text"] for p in by_title[title] if p is not held))
        for q in sorted(by_passage[held["_id"]], key=lambda q: q["_id"]):
            golds = list(q.get("answers") or q.get("metadata", {}).get("answers", []))
            if golds and not any(f" {normalize_answer(g)} " in f" {kept} " for g in golds):
                near.append(Question("neartopic", q["_id"], q["text"], golds, [held["_id"]]))
                break
    return near


def hotpot_questions(data_dir: Path, count: int) -> tuple[list[Question], Corpus]:
    folder = data_dir / "hotpotqa_train100"
    passages = bench.read_jsonl(folder / "corpus.jsonl")
    qrels = bench.read_qrels(folder / "qrels" / "test.tsv")
    questions = [
        Question(
            "hotpotqa",
            q["_id"],
            q["text"],
            [str(q.get("answer") or q.get("metadata", {}).get("answer", ""))],
            sorted(qrels.get(q["_id"], {})),
        )
        for q in bench.read_jsonl(folder / "queries.jsonl")
    ][:count]
    everything = [q["_id"] for q in bench.read_jsonl(folder / "queries.jsonl")]
    if count < len(everything):
        # The corpus file holds the questions' context passages in question order (about 10 each), so a run of
        # the first `count` questions uploads the passages before question count+1's first supporting passage.
        position = {p["_id"]: i for i, p in enumerate(passages)}
        passages = passages[: min(position[c] for c in qrels[everything[count]])]
    corpus = Corpus()
    seen: set[str] = set()
    for passage in passages:  # the union of the questions' context passages; one document per title
        title = passage["title"]
        corpus.passage_upload[passage["_id"]] = f"hotpotqa:{title}"
        if title in seen:
            continue
        seen.add(title)
        corpus.passage_tokens[passage["_id"]] = normalize_answer(passage["text"]).split()
        corpus.uploads.append(
            Upload(
                f"hotpotqa:{title}",
                f"{safe_name(title)}.md",
                title,
                f"# {title}\n\n{passage['text'].strip()}\n",
                HOTPOT_DEPARTMENT,
            )
        )
    for q in questions:
        q.documents = sorted({corpus.passage_upload[p] for p in q.gold_passages if p in corpus.passage_upload})
    return questions, corpus


def safe_name(title: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", title).strip("._")[:120] or "document"


def offtopic_questions(path: Path, count: int | None) -> list[tuple[Question, list[str]]]:
    """bench/offtopic.txt: `question<TAB>key term; key term`, `#` comments."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        question, _, terms = line.partition("\t")
        rows.append(
            (
                Question("offtopic", f"offtopic-{len(rows) + 1}", question.strip(), [], []),
                [t.strip() for t in terms.split(";") if t.strip()],
            )
        )
    return rows if count is None else rows[:count]


def key_terms_found(rows: list[tuple[Question, list[str]]], texts: list[str]) -> dict[str, list[str]]:
    """Off-topic question → its key terms that do occur in the corpora (whole words, case-insensitive)."""
    blob = "\n".join(texts).lower()
    found: dict[str, list[str]] = {}
    for question, terms in rows:
        hits = [t for t in terms if re.search(rf"(?<!\w){re.escape(t.lower())}(?!\w)", blob)]
        if hits or not terms:
            found[question.text] = hits or ["(no key terms listed)"]
    return found


# ---------------------------------------------------------------- the HTTP API


class Api:
    """The gateway's documents and chat APIs, as a frontend calls them (aiohttp)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session: Any = None

    async def open(self) -> None:
        import aiohttp

        self.session = aiohttp.ClientSession(self.url, timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def upload(self, token: str, item: Upload) -> tuple[str | None, str]:
        """(document id, "") or (None, why it was refused)."""
        import aiohttp

        form = aiohttp.FormData()
        form.add_field("file", item.content.encode(), filename=item.filename, content_type="text/markdown")
        form.add_field("title", item.title)
        form.add_field("acl", json.dumps({"departments": [item.department], "roles": [ALL_ROLE]}))
        try:
            async with self.session.post(
                "/api/v1/documents", data=form, headers=auth(token), timeout=aiohttp.ClientTimeout(total=120)
            ) as reply:
                text = await reply.text()
                if reply.status not in (200, 201, 202):
                    return None, f"http {reply.status}: {text[:200]}"
                return json.loads(text)["document_id"], ""
        except (TimeoutError, aiohttp.ClientError, ValueError, KeyError) as exc:
            return None, f"{type(exc).__name__}: {exc}"

    async def delete(self, token: str, document_id: str) -> str:
        """ "" when the document is gone (deleted now, or already), else why not."""
        import aiohttp

        try:
            async with self.session.delete(
                f"/api/v1/documents/{document_id}", headers=auth(token), timeout=aiohttp.ClientTimeout(total=120)
            ) as reply:
                return (
                    "" if reply.status in (200, 202, 204, 404) else f"http {reply.status}: {(await reply.text())[:200]}"
                )
        except (TimeoutError, aiohttp.ClientError) as exc:
            return f"{type(exc).__name__}: {exc}"

    async def clear_cache(self, token: str) -> int:
        """Drops the semantic cache (an admin's `DELETE /api/v1/admin/cache`): a kept data folder's Redis still
        holds the answers an earlier run's code made, and a hit would serve them as this run's. Raises when the
        gateway does not clear it: a run that may measure another code's answers is no measurement."""
        import aiohttp

        async with self.session.delete(
            "/api/v1/admin/cache", headers=auth(token), timeout=aiohttp.ClientTimeout(total=60)
        ) as reply:
            if reply.status == 409:  # the cache is off: nothing can be served from it
                return 0
            if reply.status != 200:
                raise RuntimeError(f"the semantic cache was not cleared: http {reply.status}: {await reply.text()}")
            return int((await reply.json())["cleared"])

    async def status(self, token: str, document_id: str) -> tuple[str, str]:
        """(status, error); ("missing", why) when the gateway answers 404 or another 4xx; ("unreachable", why) when
        it answers 5xx (a loaded gateway's catalogue call missing its deadline is a 503: ask again) or not at all."""
        import aiohttp

        try:
            async with self.session.get(
                f"/api/v1/documents/{document_id}", headers=auth(token), timeout=aiohttp.ClientTimeout(total=60)
            ) as reply:
                if reply.status >= 500:
                    return "unreachable", f"http {reply.status}"
                if reply.status != 200:
                    return "missing", f"http {reply.status}"
                data = await reply.json()
                return str(data.get("status", "")), str(data.get("error") or "")
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return "unreachable", f"{type(exc).__name__}: {exc}"

    async def chat(self, token: str, question: str, stream_draft: bool = True, mode: str = "auto") -> dict[str, Any]:
        """One streamed chat. Returns {outcome, final, ttft_s, total_s, error}; never raises for the mesh's
        answers: a non-200 reply is outcome `http_<status>`, an error event `error:<step>`, a broken stream
        `exception:<type>`, a stream without a final event `no_final`."""
        import aiohttp

        started = time.perf_counter()
        result: dict[str, Any] = {
            "outcome": "no_final",
            "final": None,
            "ttft_s": None,
            "ttfs_s": None,
            "total_s": None,
            "error": "",
        }
        try:
            async with self.session.post(
                "/api/v1/chat",
                json={"question": question, "stream": True, "stream_draft": stream_draft, "mode": mode},
                headers=auth(token),
                timeout=aiohttp.ClientTimeout(total=CHAT_TIMEOUT_S),
            ) as reply:
                if reply.status != 200:
                    result.update(outcome=f"http_{reply.status}", error=(await reply.text())[:500])
                    return result
                async for name, data in sse_events(reply.content):
                    if name == "token" and result["ttft_s"] is None:
                        result["ttft_s"] = time.perf_counter() - started
                    elif name == "sentence" and result["ttfs_s"] is None:
                        result["ttfs_s"] = time.perf_counter() - started
                    elif name == "error":
                        payload = parse_json(data)
                        result.update(outcome=f"error:{payload.get('step', 'unknown')}", error=str(payload)[:500])
                        break
                    elif name == "step":
                        result.setdefault("steps", 0)
                        result["steps"] += 1
                    elif name == "final":
                        final = parse_json(data)
                        result.update(final=final, outcome=str(final.get("outcome") or "unknown"))
                        break
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError) as exc:
            result.update(outcome=f"exception:{type(exc).__name__}", error=str(exc)[:500])
        finally:
            result["total_s"] = time.perf_counter() - started
        return result


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def parse_json(data: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError:
        return {"raw": data[:500]}
    return value if isinstance(value, dict) else {"value": value}


async def sse_events(stream: Any) -> Any:
    """(event, data) pairs of a text/event-stream (comments and pings skipped; CRLF or LF line ends)."""
    name, data = "message", []
    async for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield name, "\n".join(data)


# ---------------------------------------------------------------- ingestion


def manifest_key(item: Upload) -> str:
    """The upload's key in the manifest: its stable name and its content (an article uploaded by an earlier run
    with another paragraph held out is another document)."""
    return f"{item.key}@{hashlib.sha256(item.content.encode()).hexdigest()[:16]}"


async def ingest(api: Api, tokens: dict[str, str], uploads: list[Upload], manifest_path: Path) -> dict[str, Any]:
    """Deletes what an earlier run with the same data folder uploaded and this run does not (another sample,
    another held-out paragraph: the index holds exactly this run's corpus), uploads what the manifest does not
    already hold as `ready`, UPLOADS_IN_FLIGHT at a time, and waits until every document is ready or failed.
    Returns the counts and the wall time."""
    from tqdm import tqdm

    manifest: dict[str, str] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    token_of = {SQUAD_DEPARTMENT: tokens["squad"], HOTPOT_DEPARTMENT: tokens["hotpotqa"]}
    wanted = {manifest_key(item) for item in uploads}
    stale = {key: document_id for key, document_id in manifest.items() if key not in wanted}
    removed = 0
    for key, document_id in stale.items():
        why = await api.delete(tokens.get(key.split(":", 1)[0], tokens["squad"]), document_id)  # dataset:name@…
        if why:
            raise RuntimeError(f"cannot delete {key} ({document_id}) of an earlier run: {why}")
        del manifest[key]
        removed += 1
    if removed:
        manifest_path.write_text(json.dumps(manifest, indent=1))
        bench.log(f"deleted {removed} documents of an earlier run that this run does not upload")
    reused = 0
    todo: list[Upload] = []
    for item in uploads:
        document_id = manifest.get(manifest_key(item))
        if document_id and (await api.status(token_of[item.department], document_id))[0] == "ready":
            reused += 1
        else:
            todo.append(item)
    started = time.perf_counter()
    gate = asyncio.Semaphore(UPLOADS_IN_FLIGHT)
    failures: dict[str, str] = {}
    progress = tqdm(total=len(todo), desc="upload", unit="doc", file=sys.stderr, mininterval=2)

    async def send(item: Upload) -> None:
        async with gate:
            document_id, why = await api.upload(token_of[item.department], item)
        if document_id is None:
            failures[item.key] = why
        else:
            manifest[manifest_key(item)] = document_id
        progress.update()

    await asyncio.gather(*[send(item) for item in todo])
    progress.close()
    manifest_path.write_text(json.dumps(manifest, indent=1))
    pending = {item.key: item for item in todo if manifest_key(item) in manifest}
    progress = tqdm(total=len(pending), desc="ingest", unit="doc", file=sys.stderr, mininterval=2)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(2)
        for key, item in list(pending.items()):
            status, error = await api.status(token_of[item.department], manifest[manifest_key(item)])
            if status == "ready":
                del pending[key]
                progress.update()
            elif status == "unreachable":  # the gateway did not answer this time: ask again on the next round
                break
            elif status in ("failed", "deleted", "missing"):
                failures[key] = f"{status}: {error}"
                del pending[key]
                progress.update()
            else:
                break  # the worker is serial: the rest of the batch is not ready either
    progress.close()
    for key in pending:
        failures[key] = f"not ready after {READY_TIMEOUT_S:.0f}s"
    if failures:
        bench.log(f"{len(failures)} uploads did not become ready, e.g. {next(iter(failures.items()))}")
    return {
        "documents": len(uploads),
        "reused": reused,
        "uploaded": len(todo),
        "failed": len(failures),
        "failures": dict(list(failures.items())[:20]),
        "not_ready": sorted(failures),  # every upload that never became ready: its questions score as not indexed
        "seconds": round(time.perf_counter() - started, 1),
    }


def chunk_rows(stack: Any, chunk_ids: set[str]) -> dict[str, dict[str, Any]]:
    """Full chunk rows (the API's sources carry a 320-character snippet): text, title and section path, as the
    answerer received them, read as the database owner."""
    import psycopg

    if not chunk_ids:
        return {}
    with psycopg.connect(stack.postgres.owner_dsn(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id, text, title, section_path FROM chunks WHERE id = ANY(%s)", (sorted(chunk_ids),)
        ).fetchall()
    return {row[0]: {"text": row[1], "title": row[2], "section_path": list(row[3] or [])} for row in rows}


def replay_line(row: dict[str, Any], final: dict[str, Any] | None, chunks: dict[str, dict[str, Any]]) -> str:
    """One line of `--sources-out`: the question, its live verdict and every source given to the answerer, in
    order, with its full text (what `bench/replay.py` runs the extractive decision on again, offline)."""
    sources = (final or {}).get("sources") or []
    kept = ("dataset", "id", "half", "mode", "question", "golds", "answered", "false_grounded", "em", "f1")
    line = {k: row.get(k) for k in kept}
    line["short_answer"] = row.get("short_answer") if row.get("answered") else ""
    # a multi-step answer is checked on its last step's question with the bridge filled in: replay needs the steps
    line["steps"] = [s for s in (final or {}).get("steps") or [] if isinstance(s, dict)]
    line["sources"] = [
        chunks.get(str(s.get("chunk_id")))
        or {"text": str(s.get("snippet") or ""), "title": s.get("title") or "", "section_path": []}
        for s in sources
        if isinstance(s, dict)
    ]
    return json.dumps(line, ensure_ascii=False)


# ---------------------------------------------------------------- scoring


def answered(final: dict[str, Any] | None) -> bool:
    """An answer was given: outcome `answer` and not withheld by a verifier (field present on newer gateways)."""
    return bool(final) and final.get("outcome") == "answer" and not final.get("withheld")


def trusted(final: dict[str, Any]) -> bool:
    """Presented as trustworthy: grounded, verified when the response says, and no warning."""
    return final.get("grounded") is True and final.get("verified", True) is not False and not final.get("warnings")


def score(
    question: Question,
    result: dict[str, Any],
    texts: dict[str, str],
    corpus: Corpus,
    not_ready: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """One question's row: the reader scores, the grounding verdict and the retrieval ceilings. `not_ready`: the
    uploads that never became ready; a question that needs one is `indexed: false` (its miss is the ingestion's,
    not the retriever's or the answerer's)."""
    final = result["final"] or {}
    is_answer = answered(result["final"])
    answer_text = str(final.get("answer") or "") if is_answer else ""
    short = final.get("short_answer")
    prediction = str(short) if is_answer and isinstance(short, str) and short.strip() else answer_text
    sources = final.get("sources") or [] if isinstance(final.get("sources"), list) else []
    row: dict[str, Any] = {
        "dataset": question.dataset,
        "id": question.qid,
        "question": question.text,
        "golds": question.golds,
        "outcome": result["outcome"] if not (result["final"] and final.get("withheld")) else "withheld",
        "answer": final.get("answer"),
        "short_answer": short,
        "grounded": final.get("grounded"),
        "verified": final.get("verified"),
        "warnings": final.get("warnings") or [],
        "degraded": [d.get("step") for d in final.get("degraded") or [] if isinstance(d, dict)],
        "half": half(question.qid),
        "ttft_s": result["ttft_s"],
        "ttfs_s": result.get("ttfs_s"),
        "overruled": final.get("overruled"),
        "total_s": result["total_s"],
        "error": result["error"],
        "answered": is_answer,
        "indexed": not any(d in not_ready for d in question.documents),
        "sources": len(sources),
        "cited": sum(1 for s in sources if s.get("cited")),
    }
    if question.dataset in ("offtopic", "neartopic"):
        # the answer is not in the index: every answer shown is wrong, trusted or flagged
        row["false_grounded"] = is_answer and trusted(final)
        row["wrong_shown"] = is_answer
        row["wrong_with_warning"] = is_answer and not trusted(final)
        return row
    row["em"] = max((exact_match(prediction, g) for g in question.golds), default=0.0) if is_answer else 0.0
    row["f1"] = max((token_f1(prediction, g) for g in question.golds), default=0.0) if is_answer else 0.0
    row["contains"] = is_answer and contains_gold(answer_text or prediction, question.golds)
    wrong = is_answer and row["f1"] < F1_WRONG and not row["contains"]
    row["false_grounded"] = wrong and trusted(final)
    row["wrong_shown"] = wrong
    row["wrong_with_warning"] = wrong and not trusted(final)
    gold_tokens = [corpus.passage_tokens.get(p, []) for p in question.gold_passages]

    def gold_of(source: dict[str, Any]) -> set[int]:
        text = texts.get(str(source.get("chunk_id")), str(source.get("snippet") or ""))
        return {i for i, tokens in enumerate(gold_tokens) if from_passage(text, tokens)}

    found = [gold_of(s) for s in sources]
    cited = [g for s, g in zip(sources, found, strict=True) if s.get("cited")]
    row["gold_in_sources"] = any(found)
    row["all_gold_in_sources"] = bool(gold_tokens) and set().union(*found, set()) >= set(range(len(gold_tokens)))
    row["gold_in_cited"] = any(cited)
    row["cited_from_gold"] = sum(1 for g in cited if g)
    row["answer_in_sources"] = any(
        contains_gold(texts.get(str(s.get("chunk_id")), str(s.get("snippet") or "")), question.golds) for s in sources
    )
    # for reading a miss: which sources the user got (gold ones marked), and what each agentic step did
    row["source_titles"] = [f"{s.get('title')}{' *' if g else ''}" for s, g in zip(sources, found, strict=True)]
    row["gold_titles"] = list(question.gold_passages)
    row["agent_steps"] = [
        {k: s.get(k) for k in ("tool", "sub_question", "query", "decision", "bridge", "sources")}
        for s in final.get("steps") or []
        if isinstance(s, dict)
    ]
    return row


def mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def summarise(rows: list[dict[str, Any]], offtopic: bool) -> dict[str, Any]:
    n = len(rows)
    outcomes = collections.Counter(r["outcome"] for r in rows)
    answered_rows = [r for r in rows if r["answered"]]
    ttft = [r["ttft_s"] for r in answered_rows if r["ttft_s"] is not None]
    ttfs = [r["ttfs_s"] for r in answered_rows if r.get("ttfs_s") is not None]
    total = [r["total_s"] for r in rows if r["total_s"] is not None]
    indexed = [r for r in rows if r.get("indexed", True)]
    out: dict[str, Any] = {
        "questions": n,
        # a question whose document never became ready is not a refusal: the run is invalid for it
        "not_indexed": n - len(indexed),
        # the answerer declined (no_sources by the relevance grade, or withheld by verification) although every
        # document the question needs was indexed
        "refused": sum(1 for r in indexed if r["outcome"] in ("no_sources", "withheld")),
        "refused_no_sources": sum(1 for r in indexed if r["outcome"] == "no_sources"),
        "refused_withheld": sum(1 for r in indexed if r["outcome"] == "withheld"),
        "answered_rate_indexed": mean([float(r["answered"]) for r in indexed]),
    }
    if offtopic:  # off-topic and near-topic: no answer exists in the index
        out["no_sources_rate"] = mean([float(r["outcome"] == "no_sources") for r in rows])
        # no answer at all reached the user: no_sources, or an answer the verifier withheld
        out["declined_rate"] = mean([float(not r["answered"]) for r in rows])
    else:
        cited_rows = [r for r in rows if r["cited"]]
        out.update(
            {
                "exact_match": mean([r["em"] for r in rows]),
                "f1": mean([r["f1"] for r in rows]),
                "contains_gold": mean([float(r["contains"]) for r in rows]),
                "exact_match_answered": mean([r["em"] for r in answered_rows]),
                "f1_answered": mean([r["f1"] for r in answered_rows]),
                "citation_precision": mean([r["cited_from_gold"] / r["cited"] for r in cited_rows]),
                "citation_precision_micro": (
                    round(sum(r["cited_from_gold"] for r in cited_rows) / sum(r["cited"] for r in cited_rows), 4)
                    if cited_rows
                    else None
                ),
                "questions_with_citations": len(cited_rows),
                "gold_in_sources": mean([float(r["gold_in_sources"]) for r in rows]),
                "all_gold_in_sources": mean([float(r["all_gold_in_sources"]) for r in rows]),
                "gold_in_cited": mean([float(r["gold_in_cited"]) for r in rows]),
                "answer_in_sources": mean([float(r["answer_in_sources"]) for r in rows]),
            }
        )
    out.update(
        {
            "answered_rate": mean([float(r["answered"]) for r in rows]),
            "answered": len(answered_rows),
            # the headline: of the answers a user received, the share presented as verified and wrong
            "false_grounded_over_answered": mean([float(r["false_grounded"]) for r in answered_rows]),
            "false_grounded_rate": mean([float(r["false_grounded"]) for r in rows]),
            "false_grounded": sum(1 for r in rows if r["false_grounded"]),
            "wrong_shown_without_warning": sum(1 for r in rows if r["wrong_shown"] and not r["wrong_with_warning"]),
            "wrong_shown_with_warning": sum(1 for r in rows if r["wrong_with_warning"]),
            "overruled": sum(1 for r in rows if r.get("overruled")),
            "outcomes": dict(sorted(outcomes.items())),
            **({} if offtopic else {"failure_stages": failure_stages(rows)}),
            "degraded_steps": dict(sorted(collections.Counter(s for r in rows for s in set(r["degraded"])).items())),
            "ttft_p50_s": rounded(bench.percentile(ttft, 0.5)),
            "ttft_p95_s": rounded(bench.percentile(ttft, 0.95)),
            "ttfs_p50_s": rounded(bench.percentile(ttfs, 0.5)),
            "ttfs_p95_s": rounded(bench.percentile(ttfs, 0.95)),
            "total_p50_s": rounded(bench.percentile(total, 0.5)),
            "total_p95_s": rounded(bench.percentile(total, 0.95)),
        }
    )
    return out


def failure_stages(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Where each question that did not get a right answer failed: `not_indexed` (a document it needs never became
    ready: the run's ingestion failed it, whatever the answer), `retrieval` (no gold passage among the sources),
    `grade` (no_sources although it was), `extraction` (nothing verified: withheld), `wrong_answer` (an answer
    shown that is wrong), `error` (any other outcome)."""
    stages: collections.Counter[str] = collections.Counter()
    for r in rows:
        if r["answered"] and not r.get("wrong_shown"):
            continue
        if not r.get("indexed", True):
            stages["not_indexed"] += 1
        elif r["outcome"] not in ("answer", "withheld", "no_sources"):
            stages["error"] += 1
        elif not r.get("gold_in_sources") and r["outcome"] != "no_sources":
            stages["retrieval"] += 1
        elif r["outcome"] == "no_sources":
            stages["grade"] += 1
        elif r["outcome"] == "withheld":
            stages["extraction"] += 1
        else:
            stages["wrong_answer"] += 1
    return dict(sorted(stages.items()))


def rounded(value: float) -> float | None:
    return None if value != value else round(value, 3)  # NaN (no values) → null


# ---------------------------------------------------------------- the run


async def ask_all(
    api: Api,
    questions: list[tuple[Question, str]],
    concurrency: int,
    label: str,
    stream_draft: bool = True,
    mode: str = "auto",
) -> list[dict[str, Any]]:
    from tqdm import tqdm

    gate = asyncio.Semaphore(concurrency)
    results: list[dict[str, Any]] = [{} for _ in questions]
    progress = tqdm(total=len(questions), desc=label, unit="q", file=sys.stderr, mininterval=2)

    async def one(i: int, question: Question, token: str) -> None:
        async with gate:
            results[i] = await api.chat(token, question.text, stream_draft, mode)
        progress.update()

    await asyncio.gather(*[one(i, q, t) for i, (q, t) in enumerate(questions)])
    progress.close()
    return results


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port

    eval_dir = Path(args.eval_dir).resolve()
    squad_n = min(args.squad, args.limit) if args.limit else args.squad
    hotpot_n = min(args.hotpot, args.limit) if args.limit else args.hotpot
    offtopic_n = args.offtopic if args.offtopic is not None else None
    if args.limit:
        offtopic_n = min(offtopic_n if offtopic_n is not None else args.limit, args.limit)
    near_n = min(args.neartopic, args.limit) if args.limit else args.neartopic
    squad, squad_corpus, neartopic = (
        squad_questions(eval_dir, squad_n, args.seed, near_n) if squad_n else ([], Corpus(), [])
    )
    hotpot, hotpot_corpus = hotpot_questions(eval_dir, hotpot_n) if hotpot_n else ([], Corpus())
    offtopic_rows = offtopic_questions(Path(args.offtopic_file), offtopic_n) if offtopic_n != 0 else []
    if args.typos is not None:  # users' typing: one slip per question, the same one for a question in every run
        for q in [*squad, *neartopic, *hotpot, *(row for row, _ in offtopic_rows)]:
            q.text = with_typo(q.text, f"{args.typos}:{q.qid}")
    # the off-topic check runs against both corpora in full, whatever this run ingests
    all_texts = [
        p["text"] + " " + p["title"]
        for folder in ("squad_v1.1_dev", "hotpotqa_train100")
        for p in bench.read_jsonl(eval_dir / folder / "corpus.jsonl")
    ]
    leaking = key_terms_found(offtopic_rows, all_texts)
    if leaking:
        bench.log(f"off-topic questions whose key terms occur in the corpora: {leaking}")

    keep = args.data_dir is not None
    work = Path(args.data_dir).resolve() if keep else Path(tempfile.mkdtemp(prefix="ragmesh-answer-"))
    work.mkdir(parents=True, exist_ok=True)
    stack = Stack(work, ports={n: free_port() for n in DEFAULT_PORTS}, extra_env={"GATEWAY_RATE_LIMIT_PER_MINUTE": "0"})
    api = Api("")
    started = time.perf_counter()
    try:
        bench.log(f"starting the mesh in {work}")
        stack.start(timeout=600)
        api = Api(stack.gateway_url)
        await api.open()
        tokens = {
            "squad": stack.token("bench-squad", SQUAD_DEPARTMENT),
            "hotpotqa": stack.token("bench-hotpot", HOTPOT_DEPARTMENT),
            "offtopic": stack.token("bench-offtopic", "bench-offtopic", [ALL_ROLE]),
        }
        uploads = squad_corpus.uploads + hotpot_corpus.uploads
        bench.log(
            f"uploading {len(uploads)} documents ({len(squad_corpus.uploads)} SQuAD articles, "
            f"{len(hotpot_corpus.uploads)} HotpotQA passages)"
        )
        ingestion = await ingest(api, tokens, uploads, work / MANIFEST)
        bench.log(f"ingestion: {ingestion}")
        cleared = await api.clear_cache(stack.token("bench-admin", "bench-admin", ["admin"]))
        bench.log(f"semantic cache cleared: {cleared} answers of an earlier run dropped")
        asked = (
            [(q, tokens["squad"]) for q in squad]
            + [(q, tokens["hotpotqa"]) for q in hotpot]
            + [(q, tokens["offtopic"]) for q, _ in offtopic_rows]
            + [(q, tokens["squad"]) for q in neartopic]
        )
        ask_started = time.perf_counter()
        results, modes = [], []
        for mode in args.modes:  # every question once per mode, one mode after the other
            results += await ask_all(api, asked, args.concurrency, f"chat ({mode})", args.stream_draft, mode)
            modes += [mode] * len(asked)
        asked = asked * len(args.modes)
        ask_seconds = time.perf_counter() - ask_started
        cited_ids = {
            str(s.get("chunk_id"))
            for r in results
            if r.get("final")
            for s in (r["final"].get("sources") or [])
            if isinstance(s, dict)
        }
        chunks = chunk_rows(stack, cited_ids)
        texts = {k: v["text"] for k, v in chunks.items()}
    finally:
        await api.close()
        stack.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    corpora = {"squad": squad_corpus, "hotpotqa": hotpot_corpus, "offtopic": Corpus(), "neartopic": squad_corpus}
    not_ready = frozenset(ingestion["not_ready"])
    rows = [score(q, r, texts, corpora[q.dataset], not_ready) for (q, _), r in zip(asked, results, strict=True)]
    for row, mode, result in zip(rows, modes, results, strict=True):
        row["mode"], row["steps"] = mode, result.get("steps", 0)
    report: dict[str, Any] = {}
    for name in SETS:
        offtopic = name in ("offtopic", "neartopic")
        for mode in args.modes:
            mine = [r for r in rows if r["dataset"] == name and r["mode"] == mode]
            if not mine:
                continue
            prefix = name if len(args.modes) == 1 else f"{name}/{mode}"
            summary = summarise(mine, offtopic=offtopic)
            times = [r["total_s"] for r in mine if r["total_s"]]
            summary["total_mean_s"] = round(statistics.fmean(times), 3) if times else None
            summary["steps_mean"] = round(statistics.fmean(r["steps"] for r in mine), 2)
            report[prefix] = summary
            for part in ("tuning", "reporting"):
                some = [r for r in mine if r["half"] == part]
                if some:
                    report[f"{prefix}/{part}"] = summarise(some, offtopic=offtopic)
    report["meta"] = {
        "seed": args.seed,
        "typos": args.typos,
        "squad": len(squad),
        "hotpotqa": len(hotpot),
        "offtopic": len(offtopic_rows),
        "neartopic": len(neartopic),
        "stream_draft": args.stream_draft,
        "command": " ".join(sys.argv),
        "squad_articles": len(squad_corpus.uploads),
        "hotpotqa_passages": len(hotpot_corpus.uploads),
        "concurrency": args.concurrency,
        "modes": args.modes,
        "ingestion": ingestion,
        "cache_cleared_at_start": cleared,  # answers an earlier run on the same data folder had cached
        # every document indexed: otherwise the questions that need a missing one are reported as `not_indexed`
        "valid": ingestion["failed"] == 0,
        "ask_seconds": round(ask_seconds, 1),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "offtopic_key_terms_in_corpora": leaking,
        "cpu_cores": os.cpu_count(),
        "load_average_1min_end": round(os.getloadavg()[0], 2),
        "settings": "embedded defaults (SmolLM2-135M-Instruct, all-MiniLM-L6-v2, no reranker model); "
        "GATEWAY_RATE_LIMIT_PER_MINUTE=0; chat requests carry only question and stream",
        # settings exported by whoever ran it pass through to the services (Stack.env); record the ones that matter
        "environment": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("LOCAL_LLM_", "ANSWERER_", "GATEWAY_", "RETRIEVER_", "RERANKER_", "EMBEDDER_"))
            and "SECRET" not in k
            and "PASSWORD" not in k
            and "KEY" not in k
        },
    }
    if args.details:
        Path(args.details).parent.mkdir(parents=True, exist_ok=True)
        with Path(args.details).open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    if args.sources_out:
        Path(args.sources_out).parent.mkdir(parents=True, exist_ok=True)
        with Path(args.sources_out).open("w", encoding="utf-8") as handle:
            for row, result in zip(rows, results, strict=True):
                handle.write(replay_line(row, result.get("final"), chunks) + "\n")
    return report


SETS = ("squad", "hotpotqa", "offtopic", "neartopic")
METRIC_ROWS = (
    ("false-grounded over answered", "false_grounded_over_answered"),
    ("answered rate", "answered_rate"),
    ("not indexed (questions)", "not_indexed"),
    ("refused (indexed; no sources / withheld)", None),
    ("answered rate of the indexed", "answered_rate_indexed"),
    ("wrong shown without / with warning", None),
    ("overruled by the evidence", "overruled"),
    ("exact match", "exact_match"),
    ("token F1", "f1"),
    ("gold contained", "contains_gold"),
    ("EM / F1 of answered", None),
    ("citation precision (macro / micro)", None),
    ("gold passage in sources", "gold_in_sources"),
    ("all gold passages in sources", "all_gold_in_sources"),
    ("gold passage cited", "gold_in_cited"),
    ("gold answer in a source", "answer_in_sources"),
    ("no-sources rate", "no_sources_rate"),
    ("declined rate", "declined_rate"),
    ("false-grounded over all", "false_grounded_rate"),
    ("TTFT p50 / p95 s", None),
    ("first verified sentence p50 / p95 s", None),
    ("total p50 / p95 s", None),
    ("time per question (mean s)", "total_mean_s"),
    ("agentic steps (mean)", "steps_mean"),
    ("failure stages", None),
    ("outcomes", None),
)


def cell(summary: dict[str, Any] | None, label: str, key: str | None) -> str:
    if summary is None:
        return ""
    if key is not None:
        value = summary.get(key)
        return "" if value is None else str(value)
    pair = {
        "EM / F1 of answered": ("exact_match_answered", "f1_answered"),
        "citation precision (macro / micro)": ("citation_precision", "citation_precision_micro"),
        "TTFT p50 / p95 s": ("ttft_p50_s", "ttft_p95_s"),
        "first verified sentence p50 / p95 s": ("ttfs_p50_s", "ttfs_p95_s"),
        "wrong shown without / with warning": ("wrong_shown_without_warning", "wrong_shown_with_warning"),
        "total p50 / p95 s": ("total_p50_s", "total_p95_s"),
        "refused (indexed; no sources / withheld)": ("refused_no_sources", "refused_withheld"),
    }
    if label in ("outcomes", "failure stages"):
        counts = summary.get("outcomes" if label == "outcomes" else "failure_stages", {})
        return ", ".join(f"{k} {v}" for k, v in counts.items())
    first, second = pair[label]
    if summary.get(first) is None and summary.get(second) is None:
        return ""
    return f"{summary.get(first)} / {summary.get(second)}"


def markdown(report: dict[str, Any]) -> str:
    names = [n for n in report if n != "meta"]
    meta = report["meta"]
    head = (
        f"SQuAD {meta['squad']} questions over {meta['squad_articles']} articles, HotpotQA {meta['hotpotqa']} "
        f"over {meta['hotpotqa_passages']} passages, off-topic {meta['offtopic']}, near-topic {meta['neartopic']}; "
        f"{meta['wall_seconds'] / 60:.1f} min"
    )
    lines = [head, ""]
    ingestion = meta.get("ingestion", {})
    if ingestion.get("failed"):
        first_mode = [n for n in names if n.count("/") == 0 or n.endswith(f"/{meta['modes'][0]}")]
        whole = [n for n in first_mode if not n.endswith(("/tuning", "/reporting"))]
        missing = sum(report[n].get("not_indexed", 0) for n in whole)
        lines += [
            f"**INVALID RUN: {ingestion['failed']} of {ingestion['documents']} documents never became ready; "
            f"{missing} questions need one (row `not indexed`, failure stage `not_indexed`), e.g. "
            f"{next(iter(ingestion['failures'].items()))}**",
            "",
        ]
    lines += ["| metric | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for label, key in METRIC_ROWS:
        cells = [cell(report.get(n), label, key) for n in names]
        if any(cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="ragmesh end-to-end answer benchmark")
    parser.add_argument("--squad", type=int, default=200, help="SQuAD v1.1 dev questions (seeded sample)")
    parser.add_argument("--hotpot", type=int, default=100, help="HotpotQA questions, in file order")
    parser.add_argument("--offtopic", type=int, default=None, help="off-topic questions (default: all in the file)")
    parser.add_argument("--neartopic", type=int, default=25, help="near-topic questions (held-out SQuAD paragraphs)")
    parser.add_argument(
        "--stream-draft",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask for the raw draft tokens too (measures TTFT beside the first verified sentence)",
    )
    parser.add_argument(
        "--mode",
        default="auto",
        help="chat mode(s): auto, direct, agentic, or a comma list (direct,agentic) run side by side",
    )
    parser.add_argument("--limit", type=int, default=0, help="at most N questions per set (a quick run)")
    parser.add_argument(
        "--typos", type=int, default=None, help="SEED: one slip in a key word of every question asked (with_typo)"
    )
    parser.add_argument("--concurrency", type=int, default=1, help="chats in flight (the model is the bottleneck)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--data-dir",
        default=None,
        help="the mesh's data folder, kept after the run; a later run with the same folder reuses "
        "the documents already ready (default: a temporary folder, deleted)",
    )
    parser.add_argument("--eval-dir", default=str(root.parent / "shared" / "data"), help="the evaluation data")
    parser.add_argument("--offtopic-file", default=str(root / "bench" / "offtopic.txt"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "answer.json"))
    parser.add_argument("--details", default=None, help="also write one JSON line per question here")
    parser.add_argument(
        "--sources-out",
        default=None,
        help="also write each question with the full text of every source it was answered from (bench/replay.py)",
    )
    args = parser.parse_args()
    if args.squad < 0 or args.hotpot < 0 or (args.offtopic or 0) < 0 or args.limit < 0 or args.concurrency < 1:
        parser.error("counts must be >= 0 and --concurrency >= 1")
    args.modes = list(dict.fromkeys(m.strip() for m in args.mode.split(",") if m.strip()))
    if not args.modes or any(m not in ("auto", "direct", "agentic") for m in args.modes):
        parser.error("--mode: auto, direct, agentic or a comma list of them")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # `kill` of the benchmark stops its engines and services too
    report = asyncio.run(run(args))
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=1) + "\n")
    print(markdown(report), flush=True)
    bench.log(f"wrote {output}")


if __name__ == "__main__":
    main()
