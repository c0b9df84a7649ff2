"""Ingestion throughput through the whole mesh, side by side with the raw embedding model (`make bench-ingest`).

Starts the mesh (`ragmesh_dev.devstack.Stack`, every service its own process, loopback only), then in one run:

1. raw: the embedder's model (FlagModel, the service's own settings and batch size) encodes the short texts
   in-process, batch after batch: the rate the mesh could reach if nothing but the model cost time;
2. short texts: `--short N` SciFact abstracts (title and text, one `.txt` document each) uploaded through
   the HTTP API by `--uploaders` concurrent clients; chunks/s from the first upload until the last is
   `ready`, and its ratio to the raw rate (target ≥ 0.9);
3. a long PDF: `--pdf-pages` pages of SQuAD paragraphs (a heading per article), written by the minimal
   PDF writer below (standard Helvetica, text as text: no PDF writer library is installed here; pypdfium2,
   which is, checks the page count), uploaded with the graph on; seconds from upload to `ready`
   (target ≤ 60 s for 120 pages).

Where the time goes comes from the spans every process stores in `rag_traces`: per stage (the worker's
calls Parse, Embed, IndexChunks, IngestChunks, UpdateDocumentStatus, and the server spans inside them),
count and total seconds, for each phase. Timing on a shared 2-core machine is noisy: the ratio of two rates
measured in one run is the number that counts.

Writes bench/results/ingest.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # log, read_jsonl and write_report

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- a minimal PDF writer


def _pdf_string(text: str) -> bytes:
    raw = text.encode("cp1252", errors="replace")
    out = bytearray(b"(")
    for byte in raw:
        if byte in b"()\\":
            out += b"\\" + bytes([byte])
        elif byte < 32 or byte > 126:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b")")


def write_text_pdf(path: Path, blocks: list[tuple[str, str]], pages: int) -> int:
    """A Letter-size PDF of `blocks` ((kind, text), kind `heading` or `paragraph`) set in the standard
    Helvetica fonts, WinAnsi encoded, a page number in the footer, until `pages` pages are full;
    returns the page count."""
    lines_per_page, leading, width = 52, 12, 100
    page_streams: list[bytes] = []
    current: list[bytes] = []
    y = 0

    def flush() -> None:
        nonlocal current, y
        number = len(page_streams) + 1
        current.append(b"BT /F1 8 Tf 290 40 Td " + _pdf_string(str(number)) + b" Tj ET")
        page_streams.append(b"\n".join(current))
        current, y = [], 0

    for kind, text in blocks:
        if len(page_streams) >= pages:
            break
        lines = [text] if kind == "heading" else textwrap.wrap(text, width)
        need = len(lines) + (2 if kind == "heading" else 1)
        if y + min(need, 4) > lines_per_page:
            flush()
            if len(page_streams) >= pages:
                break
        if kind == "heading":
            y += 1 if y else 0
            current.append(b"BT /F2 14 Tf 72 %d Td " % (740 - y * leading) + _pdf_string(text) + b" Tj ET")
            y += 2
            continue
        for line in lines:
            if y >= lines_per_page:
                flush()
            current.append(b"BT /F1 10 Tf 72 %d Td " % (740 - y * leading) + _pdf_string(line) + b" Tj ET")
            y += 1
        y += 1
    if current and len(page_streams) < pages:
        flush()
    objects: list[bytes] = []
    n = len(page_streams)
    # 1 catalog, 2 pages, 3 F1, 4 F2, then per page: page object, content stream
    kids = " ".join(f"{5 + 2 * i} 0 R" for i in range(n)).encode()
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n)
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>")
    for i, stream in enumerate(page_streams):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R "
            b"/F2 4 0 R >> >> /Contents %d 0 R >>" % (6 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return n


def squad_blocks(data_dir: Path) -> list[tuple[str, str]]:
    """SQuAD dev paragraphs in corpus order, a heading before each article's first paragraph."""
    blocks: list[tuple[str, str]] = []
    last = None
    for row in bench.read_jsonl(data_dir / "squad_v1.1_dev" / "corpus.jsonl"):
        title = (row.get("title") or "").replace("_", " ")
        if title and title != last:
            blocks.append(("heading", title))
            last = title
        blocks.append(("paragraph", row["text"]))
    return blocks


# ---------------------------------------------------------------- measurement


def raw_rate(texts: list[str]) -> dict[str, Any]:
    """The embedder's model in this process, the service's settings (EMBEDDER_* from the environment as the
    service reads them), batch after batch of its batch size."""
    from ragmesh_embedder.config import Settings
    from ragmesh_embedder.model import EmbeddingModel

    settings = Settings.from_env()
    model = EmbeddingModel(settings)
    model.encode(texts[: settings.batch_size], is_query=False)  # warm
    began, cpu_began = time.monotonic(), time.process_time()
    for start in range(0, len(texts), settings.batch_size):
        model.encode(texts[start : start + settings.batch_size], is_query=False)
    seconds = time.monotonic() - began
    cpu = time.process_time() - cpu_began
    del model
    return {
        "texts": len(texts),
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 1),  # this process, every thread: the model's own CPU for these texts
        "texts_per_s": round(len(texts) / seconds, 2),
        "batch_size": settings.batch_size,
        "max_length": settings.max_length,
    }


async def upload(session: Any, url: str, token: str, name: str, content: bytes, content_type: str) -> str:
    import aiohttp

    for attempt in range(5):
        form = aiohttp.FormData()
        form.add_field("file", content, filename=name, content_type=content_type)
        form.add_field("acl", json.dumps({"departments": ["eng"]}))
        async with session.post(
            f"{url}/api/v1/documents", data=form, headers={"Authorization": f"Bearer {token}"}
        ) as reply:
            if reply.status == 202:
                return str((await reply.json())["document_id"])
            if reply.status in (429, 503) and attempt < 4:
                await asyncio.sleep(1 + attempt)
                continue
            raise RuntimeError(f"upload of {name}: HTTP {reply.status} {await reply.text()}")
    raise AssertionError("unreachable")


def poll(dsn: str, ids: list[str]) -> dict[str, Any]:
    """The documents' state in the catalogue, read as the schema owner (the bench reads, the mesh writes)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT status, count(*), sum(chunk_count), max(extract(epoch FROM updated_at)) "
            "FROM documents WHERE id = ANY(%s::uuid[]) GROUP BY status",
            (ids,),
        ).fetchall()
        chunks = conn.execute(
            "SELECT level, count(*) FROM chunks WHERE document_id = ANY(%s::uuid[]) GROUP BY level", (ids,)
        ).fetchall()
        errors = conn.execute(
            "SELECT error, count(*) FROM documents WHERE id = ANY(%s::uuid[]) AND "
            "status = 'failed' GROUP BY error LIMIT 5",
            (ids,),
        ).fetchall()
    done = sum(r[1] for r in rows if r[0] in ("ready", "failed"))
    return {
        "statuses": {r[0]: r[1] for r in rows},
        "done": done,
        "paragraph_chunks": int(sum(r[2] or 0 for r in rows)),
        "chunks_by_level": {int(level): n for level, n in chunks},
        "last_update": max((float(r[3]) for r in rows if r[3] is not None), default=0.0),
        "errors": {e: n for e, n in errors},
    }


async def wait_ready(dsn: str, ids: list[str], timeout: float) -> dict[str, Any]:
    """Polls until every document is ready or failed (or `timeout` seconds pass)."""
    deadline = time.monotonic() + timeout
    while True:
        state = await asyncio.to_thread(poll, dsn, ids)
        if state["done"] >= len(ids) or time.monotonic() > deadline:
            state["timed_out"] = state["done"] < len(ids)
            return state
        await asyncio.sleep(1.0)


def embedded_texts(dsn: str, ids: list[str]) -> list[str]:
    """Every chunk text the mesh embedded for these documents, composed as the worker composes it."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT level, section_path, text FROM chunks WHERE document_id = ANY(%s::uuid[]) "
            "AND embedding IS NOT NULL ORDER BY document_id, ordinal",
            (ids,),
        ).fetchall()
    return [" › ".join(path) + "\n" + text if level == 3 and path else text for level, path, text in rows]


def span_breakdown(dsn: str, since: float, until: float) -> list[dict[str, Any]]:
    """Spans of the ingestion processes started in [since, until], grouped by service, kind and name."""
    import psycopg

    time.sleep(3)  # exporters flush every 0.5 s (OTEL_BSP_SCHEDULE_DELAY)
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT service, kind, name, count(*), sum(duration_ms) / 1000.0, avg(duration_ms) FROM rag_traces "
            "WHERE start_time >= to_timestamp(%s) AND start_time <= to_timestamp(%s) "
            "AND service IN ('ingest-worker', 'parser', 'embedder', 'retriever', 'graph') "
            "GROUP BY 1, 2, 3 ORDER BY 5 DESC LIMIT 40",
            (since, until),
        ).fetchall()
    return [
        {"service": s, "kind": k, "name": n, "count": c, "total_s": round(float(t), 2), "mean_ms": round(float(m), 1)}
        for s, k, n, c, t, m in rows
    ]


def cpu_seconds(stack: Any) -> dict[str, float]:
    """CPU seconds (user + system) so far of each process of the mesh, its engines (found by the stack's data
    folder on their command line: PostgreSQL, Redis, ArcadeDB) and their children (PostgreSQL's backends)."""
    import psutil

    names = {p.popen.pid: p.name for p in stack.processes}
    root = str(stack.data_dir)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["pid"] not in names and root in cmdline:
            names[proc.info["pid"]] = (
                "postgres"
                if "postgres" in cmdline
                else "arcadedb"
                if "arcadedb" in cmdline
                else "redis"
                if "redis" in cmdline
                else "engine"
            )
    totals: dict[str, float] = {}
    for pid, name in names.items():
        try:
            proc = psutil.Process(pid)
            for each in [proc, *proc.children(recursive=True)]:
                times = each.cpu_times()
                totals[name] = totals.get(name, 0.0) + times.user + times.system
        except psutil.Error:
            continue
    return totals


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    used = {name: round(after.get(name, 0.0) - before.get(name, 0.0), 1) for name in after}
    return dict(sorted(((k, v) for k, v in used.items() if v > 0.05), key=lambda kv: -kv[1]))


async def run_short(args: argparse.Namespace, stack: Any, texts: list[tuple[str, str]]) -> dict[str, Any]:
    import aiohttp

    url, token = stack.gateway_url, stack.token("ingest-bench", "eng", ["employee"])
    ids: list[str] = []
    queue = list(texts)
    cpu_before = cpu_seconds(stack)
    began = time.time()

    async def uploader(session: Any) -> None:
        while queue:
            doc_id, text = queue.pop(0)
            ids.append(await upload(session, url, token, f"scifact-{doc_id}.txt", text.encode(), "text/plain"))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        await asyncio.gather(*(uploader(session) for _ in range(args.uploaders)))
    uploaded = time.time() - began
    bench.log(f"short: {len(ids)} uploaded in {uploaded:.1f} s; waiting until ready")
    state = await wait_ready(stack.postgres.owner_dsn(), ids, args.timeout)
    state["cpu_seconds"] = cpu_used(cpu_before, cpu_seconds(stack))
    seconds = max(state["last_update"], time.time() if state["timed_out"] else 0.0) - began
    embedded = sum(state["chunks_by_level"].values())
    return {
        "documents": len(ids),
        "upload_seconds": round(uploaded, 1),
        "seconds": round(seconds, 1),
        "chunks_per_s": round(state["paragraph_chunks"] / seconds, 2),
        "embedded_per_s": round(embedded / seconds, 2),
        "documents_per_s": round(len(ids) / seconds, 2),
        "ids": ids,
        **state,
        "stages": span_breakdown(stack.postgres.owner_dsn(), began - 1, began + seconds + 1),
    }


async def run_pdf(args: argparse.Namespace, stack: Any, path: Path, pages: int) -> dict[str, Any]:
    import aiohttp

    url, token = stack.gateway_url, stack.token("ingest-bench", "eng", ["employee"])
    cpu_before = cpu_seconds(stack)
    began = time.time()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
        doc = await upload(session, url, token, path.name, path.read_bytes(), "application/pdf")
    state = await wait_ready(stack.postgres.owner_dsn(), [doc], args.timeout)
    state["cpu_seconds"] = cpu_used(cpu_before, cpu_seconds(stack))
    seconds = max(state["last_update"], time.time() if state["timed_out"] else 0.0) - began
    return {
        "id": doc,
        "pages": pages,
        "bytes": path.stat().st_size,
        "seconds": round(seconds, 1),
        "pages_per_s": round(pages / seconds, 2),
        **state,
        "stages": span_breakdown(stack.postgres.owner_dsn(), began - 1, began + seconds + 1),
    }


def bulk_texts(data_dir: Path, count: int) -> list[str]:
    """`count` small distinct texts: SciFact abstracts, then SQuAD paragraphs, round and round, each under a
    numbered heading (so that no two have the same bytes)."""
    pool = [
        (r.get("title", "") + "\n\n" + r["text"]).strip()
        for r in bench.read_jsonl(data_dir / "beir_scifact" / "corpus.jsonl")
    ]
    pool += [r["text"] for r in bench.read_jsonl(data_dir / "squad_v1.1_dev" / "corpus.jsonl")]
    return [f"# Bulk note {i}\n\n{pool[i % len(pool)]}\n" for i in range(count)]


def owned(dsn: str, owner: str) -> dict[str, Any]:
    """The owner's documents in the catalogue: how many, how many distinct contents, by status."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        total, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT content_sha256) FROM documents WHERE owner_user = %s", (owner,)
        ).fetchone() or (0, 0)
        statuses = conn.execute(
            "SELECT status, count(*) FROM documents WHERE owner_user = %s GROUP BY status", (owner,)
        ).fetchall()
    return {"documents": int(total), "distinct_contents": int(distinct), "statuses": {s: int(n) for s, n in statuses}}


def run_bulk(args: argparse.Namespace, stack: Any, data_dir: Path, work: Path) -> dict[str, Any]:
    """`ragmesh ingest` of `--bulk` small files (a folder of folders of 100) as a user runs it: interrupted with
    Ctrl-C (SIGINT) once half are in the catalogue, run again to finish, and once more (nothing left to send).
    Uploads only (no --wait): the worker ingests meanwhile, as it would."""
    import signal
    import subprocess
    from collections import Counter

    folder = work / "bulk"
    for i, text in enumerate(bulk_texts(data_dir, args.bulk)):
        path = folder / f"d{i // 100:03d}" / f"note-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    owner, dsn = "bulk-bench", stack.postgres.owner_dsn()
    env = {**os.environ, "RAGMESH_URL": stack.gateway_url, "RAGMESH_TOKEN": stack.token(owner, "eng", ["employee"])}
    command = [sys.executable, "-m", "ragmesh_cli", "ingest", str(folder), "--json", "--concurrency", "8"]
    result: dict[str, Any] = {"files": args.bulk}

    began = time.monotonic()
    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while first.poll() is None and owned(dsn, owner)["documents"] < args.bulk // 2:
        time.sleep(0.1)  # small files upload at tens per second: a coarser poll lands the Ctrl-C after the last
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=300)
    done = json.loads(out) if out.strip() else []
    result["interrupted"] = {
        "exit_code": first.returncode,
        "seconds": round(time.monotonic() - began, 1),
        "files_done": len(done),
        "statuses": dict(Counter(o["status"] for o in done)),
        "traceback": "Traceback" in err,
        "last_line": (err.strip().splitlines() or [""])[-1][-300:],
        "catalogue": owned(dsn, owner),
    }
    bench.log(f"bulk: interrupted after {result['interrupted']['seconds']} s, {len(done)} files done")
    for name in ("resumed", "again"):
        began = time.monotonic()
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
        outcomes = json.loads(run.stdout) if run.stdout.strip() else []
        result[name] = {
            "exit_code": run.returncode,
            "seconds": round(time.monotonic() - began, 1),
            "statuses": dict(Counter(o["status"] for o in outcomes)),
            "errors": [o for o in outcomes if o["status"] == "error"][:5],
            "catalogue": owned(dsn, owner),
        }
        bench.log(f"bulk: {name} in {result[name]['seconds']} s: {result[name]['statuses']}")
    uploaded = result["interrupted"]["files_done"] + sum(
        n for status, n in result["resumed"]["statuses"].items() if status != "present"
    )
    result["upload_files_per_s"] = round(
        uploaded / (result["interrupted"]["seconds"] + result["resumed"]["seconds"]), 1
    )
    return result


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One run of the phases per `--concurrency` value (each its own mesh, the raw model right after it); the
    first value's results at the top level, every value's in `by_concurrency` when there are several."""
    data = Path(args.data_dir).resolve()
    corpus = bench.read_jsonl(data / "beir_scifact" / "corpus.jsonl")[: args.short]
    texts = [(row["_id"], (row.get("title", "") + "\n\n" + row["text"]).strip()) for row in corpus]
    if args.work_dir:
        Path(args.work_dir).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ragmesh-ingest-", dir=args.work_dir))
    pdf = work / f"squad-{args.pdf_pages}pages.pdf"
    pages = write_text_pdf(pdf, squad_blocks(data), args.pdf_pages) if args.pdf_pages else 0
    if pages:
        import pypdfium2

        checked = len(pypdfium2.PdfDocument(str(pdf)))
        if checked != pages:
            raise SystemExit(f"the PDF writer wrote {pages} pages, pypdfium2 reads {checked}")
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_1m_start": os.getloadavg()[0]},
        "args": {k: v for k, v in vars(args).items() if k not in ("out",)},
    }
    values = [int(v) for v in str(args.concurrency).split(",") if v.strip()] or [0]
    runs = [measure_one(args, work, texts, pdf, pages, c, bulk=not i) for i, c in enumerate(values)]
    results.update(runs[0])
    if len(runs) > 1:
        results["by_concurrency"] = {str(c or "default"): run for c, run in zip(values, runs, strict=True)}
    results["machine"]["load_1m_end"] = os.getloadavg()[0]
    return results


def measure_one(
    args: argparse.Namespace,
    work: Path,
    texts: list[tuple[str, str]],
    pdf: Path,
    pages: int,
    concurrency: int,
    *,
    bulk: bool,
) -> dict[str, Any]:
    """The phases through one mesh whose worker runs `concurrency` documents at once (0: the stack default)."""
    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port

    results: dict[str, Any] = {"concurrency": concurrency or "default"}
    extra = {"GATEWAY_RATE_LIMIT_PER_MINUTE": "0", "GATEWAY_GRAPH_ENABLED": "true"}
    if concurrency:
        extra["INGEST_CONCURRENCY"] = str(concurrency)
    stack = Stack(
        Path(tempfile.mkdtemp(prefix="mesh-", dir=work)), ports={n: free_port() for n in DEFAULT_PORTS}, extra_env=extra
    )
    try:
        bench.log(f"starting the mesh in {stack.data_dir} (worker concurrency {concurrency or 'default'})")
        stack.start(timeout=600)
        if args.short:
            short = results["short"] = asyncio.run(run_short(args, stack, texts))
            bench.log(f"short: {short['chunks_per_s']} paragraph chunks/s, {short['embedded_per_s']} embedded/s")
            if not short["chunks_by_level"]:  # nothing to compare with the raw model: say why instead of crashing
                raise SystemExit(f"short: no document was indexed: {short['statuses']}, errors {short['errors']}")
            # the model alone, on the same machine right after: the abstracts as uploaded (the issue's
            # yardstick), and exactly the texts the mesh embedded (every chunk level, as the worker composed them)
            dsn = stack.postgres.owner_dsn()
            results["raw"] = raw_rate([t for _, t in texts])
            results["raw_embedded"] = raw_rate(embedded_texts(dsn, short.pop("ids")))
            short["ratio_to_raw"] = round(short["chunks_per_s"] / results["raw"]["texts_per_s"], 3)
            short["embedded_ratio_to_raw"] = round(short["embedded_per_s"] / results["raw_embedded"]["texts_per_s"], 3)
            # the embedder service's CPU for the texts against the model's own in-process CPU for the same texts
            short["embedder_cpu_to_raw_cpu"] = round(
                short["cpu_seconds"].get("embedder", 0.0) / max(results["raw_embedded"]["cpu_seconds"], 0.1), 2
            )
            # load-robust: the model's own CPU for the texts over the CPU the whole mesh spent on them (1.0: the
            # mesh costs nothing beside the model; on a machine the mesh has to itself, the most the rate ratio
            # can reach when the processes keep every core busy)
            short["raw_cpu_to_mesh_cpu"] = round(
                results["raw_embedded"]["cpu_seconds"] / max(sum(short["cpu_seconds"].values()), 0.1), 3
            )
            bench.log(
                f"raw: {results['raw']['texts_per_s']} abstracts/s, {results['raw_embedded']['texts_per_s']} "
                f"embedded texts/s; ratios {short['ratio_to_raw']}, {short['embedded_ratio_to_raw']}"
            )
        if args.pdf_pages:
            bench.log(f"pdf: {pages} pages, {pdf.stat().st_size} bytes")
            results["pdf"] = pdf_result = asyncio.run(run_pdf(args, stack, pdf, pages))
            # the model alone on the PDF's chunks, right after: what embedding by itself costs on this machine now
            raw_pdf = results["raw_pdf"] = raw_rate(embedded_texts(stack.postgres.owner_dsn(), [pdf_result.pop("id")]))
            pdf_result["ratio_to_raw_embedding"] = round(pdf_result["seconds"] / raw_pdf["seconds"], 2)
            bench.log(f"pdf: ready in {results['pdf']['seconds']} s")
        if args.bulk and bulk:
            results["bulk"] = run_bulk(args, stack, Path(args.data_dir).resolve(), Path(stack.data_dir))
    finally:
        stack.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", type=int, default=2000, help="SciFact abstracts to ingest (0: skip)")
    parser.add_argument("--pdf-pages", type=int, default=120, help="pages of the long PDF (0: skip)")
    parser.add_argument(
        "--bulk", type=int, default=0, help="small files through `ragmesh ingest`, interrupted and resumed (0: skip)"
    )
    parser.add_argument("--uploaders", type=int, default=8, help="concurrent upload clients")
    parser.add_argument(
        "--concurrency",
        default="0",
        help="INGEST_CONCURRENCY (0: the stack default); several, comma-separated (8,32): one mesh each, side by side",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for ready, per phase")
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--work-dir", default=None)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "ingest.json"))
    args = parser.parse_args()
    results = measure(args)
    rows = []
    if "raw" in results:
        rows.append(
            (
                "raw model, the abstracts",
                results["raw"]["texts"],
                results["raw"]["seconds"],
                f"{results['raw']['texts_per_s']} texts/s",
                "",
            )
        )
        rows.append(
            (
                "raw model, the texts the mesh embedded",
                results["raw_embedded"]["texts"],
                results["raw_embedded"]["seconds"],
                f"{results['raw_embedded']['texts_per_s']} texts/s",
                "",
            )
        )
    if "short" in results:
        s = results["short"]
        rows.append(
            (
                f"{s['documents']} short texts through the mesh (paragraph chunks)",
                s["paragraph_chunks"],
                s["seconds"],
                f"{s['chunks_per_s']} chunks/s",
                f"ratio {s['ratio_to_raw']} to raw abstracts/s (target ≥ 0.9)",
            )
        )
        rows.append(
            (
                "  the same, every embedded chunk (all levels)",
                sum(s["chunks_by_level"].values()),
                s["seconds"],
                f"{s['embedded_per_s']} chunks/s",
                f"ratio {s['embedded_ratio_to_raw']} to raw on the same texts",
            )
        )
    if "pdf" in results:
        p = results["pdf"]
        rows.append(
            (
                f"{p['pages']}-page text PDF, graph on",
                p["paragraph_chunks"],
                p["seconds"],
                f"{p['pages_per_s']} pages/s",
                "target ≤ 60 s",
            )
        )
        r = results["raw_pdf"]
        rows.append(
            (
                "  raw model on the PDF's embedded texts",
                r["texts"],
                r["seconds"],
                f"{r['texts_per_s']} texts/s",
                f"ready took {p['ratio_to_raw_embedding']}× the model's own time",
            )
        )
    if "bulk" in results:
        b = results["bulk"]
        rows.append(
            (
                f"`ragmesh ingest` of {b['files']} small files, Ctrl-C at half, resumed",
                b["resumed"]["catalogue"]["documents"],
                round(b["interrupted"]["seconds"] + b["resumed"]["seconds"], 1),
                f"{b['upload_files_per_s']} files/s uploaded",
                f"exit codes {b['interrupted']['exit_code']} / {b['resumed']['exit_code']} / "
                f"{b['again']['exit_code']}; {b['resumed']['catalogue']['distinct_contents']} distinct contents; "
                f"rerun {b['again']['seconds']} s, {b['again']['statuses']}",
            )
        )
    for concurrency, run in results.get("by_concurrency", {}).items():
        if "short" in run:
            s = run["short"]
            rows.append(
                (
                    f"worker concurrency {concurrency}: {s['documents']} short texts, every embedded chunk",
                    sum(s["chunks_by_level"].values()),
                    s["seconds"],
                    f"{s['embedded_per_s']} chunks/s",
                    f"ratio {s['embedded_ratio_to_raw']} to raw on the same texts ({s['ratio_to_raw']} by the "
                    f"issue's yardstick); embedder CPU {s['embedder_cpu_to_raw_cpu']}× the raw model's; raw CPU / "
                    f"mesh CPU {s['raw_cpu_to_mesh_cpu']}",
                )
            )
    bench.write_report(
        args.out, results, "Ingestion throughput", ("what", "chunks", "seconds", "rate", "vs target"), rows
    )
    for phase in ("short", "pdf"):
        if phase in results:
            print(
                f"\nCPU seconds per process ({phase}): "
                + ", ".join(f"{name} {sec}" for name, sec in results[phase]["cpu_seconds"].items())
            )
            print(f"\nwhere the time went ({phase}; span totals overlap: a client span contains its server's)\n")
            print("| service | kind | span | count | total s | mean ms |\n|---|---|---|---|---|---|")
            for st in results[phase]["stages"][:15]:
                print(
                    f"| {st['service']} | {st['kind']} | {st['name']} | {st['count']} | {st['total_s']} | "
                    f"{st['mean_ms']} |"
                )


if __name__ == "__main__":
    main()
