"""Many users chatting at once: what the mesh completes, what it refuses (and how), and what it keeps.

    make bench-load                                   # 50 concurrent streaming chats for 300 s
    python bench/load.py --concurrency 20 --duration 60

Starts the whole mesh (`ragmesh_dev.devstack.Stack`, every service its own process, loopback only,
rate limiting off so that the answerer's admission control is what is measured; one llama.cpp thread in the
model server and one torch thread per service, as the other benches, because two spinning llama.cpp threads
on a shared 2-core machine slow generation by an order of magnitude), uploads a few Markdown
documents from `../shared/data/documents/md/sources` through the gateway and waits until they are ready,
sends one warm-up chat, then runs `--concurrency` clients for `--duration` seconds. Each client is its own
user (department `eng`) and loops: POST /api/v1/chat with `stream: true`, read the SSE stream to its end,
then the next question. A 503 is followed by a sleep of its Retry-After (capped by the time left), as a
well-behaved client does. No client starts a chat after the duration; the ones in flight finish (each is
bounded by `--request-timeout`).

Reported (JSON in `bench/results/load.json`, and a Markdown table):
- chats completed (a `final` event), refusals (HTTP 503 with Retry-After), and every other failure by kind
  (a 503 without Retry-After, another status, an `error` event inside a 200 stream, a client timeout, a
  connection error);
- time to the first SSE event and to the first token, p50 / p95 (completed chats), and how fast refusals came;
- `queued` progress events seen and the largest queue position;
- RSS of every service process before the load (after the warm-up chat) and after it (idle again), and
  the peak sampled during it;
- ESTABLISHED TCP sockets of the gateway, the answerer and the model server before and after: idle
  connections must be returned.
Benchmarks are not tests: nothing is asserted; the targets are printed beside the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import retrieval as bench  # percentile, log and write_report

DOCUMENTS = ("wiki.md", "duck.md", "mixed.md")
WATCHED = ("gateway", "answerer", "llm")  # sockets counted for these


@dataclass
class Tally:
    completed: int = 0
    refused: int = 0  # HTTP 503 with Retry-After
    errors: Counter[str] = field(default_factory=Counter)
    first_event_s: list[float] = field(default_factory=list)
    first_token_s: list[float] = field(default_factory=list)
    refusal_s: list[float] = field(default_factory=list)
    retry_after_s: list[int] = field(default_factory=list)
    queued_events: int = 0
    max_position: int = 0
    chats_queued: int = 0


def questions(texts: list[str]) -> list[str]:
    """Two questions per document from its first heading (the documents are generic test files)."""
    out = []
    for text in texts:
        title = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), "")
        if title:
            out += [f"What is {title}?", f"Tell me about {title}."]
    return out or ["What do the documents say?"]


async def upload(session: Any, url: str, token: str, path: Path) -> str:
    import aiohttp

    form = aiohttp.FormData()
    form.add_field("file", path.read_bytes(), filename=path.name, content_type="text/markdown")
    form.add_field("acl", json.dumps({"departments": ["eng"]}))
    headers = {"Authorization": f"Bearer {token}"}
    async with session.post(f"{url}/api/v1/documents", data=form, headers=headers) as reply:
        if reply.status != 202:
            raise RuntimeError(f"upload of {path.name}: HTTP {reply.status} {await reply.text()}")
        document_id = (await reply.json())["document_id"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        async with session.get(f"{url}/api/v1/documents/{document_id}", headers=headers) as reply:
            status = (await reply.json())["status"]
        if status == "ready":
            return document_id
        if status == "failed":
            raise RuntimeError(f"ingestion of {path.name} failed")
        await asyncio.sleep(1)
    raise RuntimeError(f"{path.name} not ready after 600 s")


async def chat(session: Any, url: str, token: str, question: str, tally: Tally, timeout: float) -> float:
    """One streamed chat; returns how long the client should wait before the next (Retry-After or 0)."""
    import aiohttp

    started = time.monotonic()
    first_event: float | None = None
    first_token: float | None = None
    queued = False
    try:
        async with session.post(
            f"{url}/api/v1/chat",
            headers={"Authorization": f"Bearer {token}"},
            json={"question": question, "stream": True},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as reply:
            if reply.status == 503:
                await reply.read()
                retry = reply.headers.get("Retry-After")
                if retry is None:
                    tally.errors["HTTP 503 without Retry-After"] += 1
                    return 1.0
                tally.refused += 1
                tally.refusal_s.append(time.monotonic() - started)
                tally.retry_after_s.append(int(retry))
                return float(retry)
            if reply.status != 200:
                tally.errors[f"HTTP {reply.status}"] += 1
                await reply.read()
                return 1.0
            name = ""
            async for raw in reply.content:
                line = raw.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    name = line[6:].strip()
                    if first_event is None:
                        first_event = time.monotonic() - started
                elif line.startswith("data:") and name:
                    data = json.loads(line[5:])
                    if name == "token" and first_token is None:
                        first_token = time.monotonic() - started
                    elif name == "progress" and data.get("status") == "queued":
                        tally.queued_events += 1
                        tally.max_position = max(tally.max_position, int(data.get("position", 0)))
                        queued = True
                    elif name == "error":
                        kind = "error event (retry_after)" if data.get("retry_after") else "error event"
                        tally.errors[f"{kind} in a 200 stream: {data.get('step')}"] += 1
                        return float(data.get("retry_after") or 1)
                    elif name == "final":
                        tally.completed += 1
                        tally.chats_queued += queued
                        tally.first_event_s.append(first_event or 0.0)
                        tally.first_token_s.append(
                            first_token if first_token is not None else time.monotonic() - started
                        )
                        return 0.0
                elif not line:
                    name = ""
            tally.errors["stream ended without a final event"] += 1
    except TimeoutError:
        tally.errors[f"client timeout ({timeout:.0f} s)"] += 1
    except aiohttp.ClientError as exc:
        tally.errors[f"connection error: {type(exc).__name__}"] += 1
    return 1.0


def snapshot(pids: dict[str, int]) -> dict[str, dict[str, int]]:
    """RSS (MiB) of each process, and ESTABLISHED TCP sockets of the watched ones."""
    import psutil

    rss, sockets = {}, {}
    for name, pid in pids.items():
        try:
            process = psutil.Process(pid)
            rss[name] = round(process.memory_info().rss / 2**20)
            if name in WATCHED:
                sockets[name] = sum(c.status == psutil.CONN_ESTABLISHED for c in process.net_connections("tcp"))
        except psutil.Error:
            rss[name] = -1
    return {"rss_mib": rss, "established": sockets}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    import aiohttp

    from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
    from ragmesh_dev.ports import free_port

    sources = Path(args.data_dir).resolve() / "documents" / "md" / "sources"
    paths = [sources / name for name in DOCUMENTS if (sources / name).is_file()]
    if not paths:
        raise SystemExit(f"no documents under {sources}")
    work = Path(tempfile.mkdtemp(prefix="ragmesh-load-", dir=args.work_dir))
    stack = Stack(
        work,
        ports={n: free_port() for n in DEFAULT_PORTS},
        extra_env={
            "GATEWAY_RATE_LIMIT_PER_MINUTE": "0",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "LOCAL_LLM_THREADS": str(args.llm_threads),
        },
    )
    load_start = os.getloadavg()[0]
    try:
        bench.log(f"starting the mesh in {work}")
        stack.start(timeout=600)
        pids = {p.name: p.popen.pid for p in stack.processes}
        env = stack.env()
        limits = {
            k: env.get(k, "service default")
            for k in ("ANSWERER_MAX_CONCURRENT", "ANSWERER_MAX_QUEUE", "ANSWERER_QUEUE_TIMEOUT_SECONDS")
        }
        url = stack.gateway_url
        owner = stack.token("load-owner", "eng", ["employee"])
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as session:
            for path in paths:
                await upload(session, url, owner, path)
                bench.log(f"{path.name} ready")
            asked = questions([p.read_text(encoding="utf-8") for p in paths])
            warm = Tally()
            await chat(session, url, owner, asked[0], warm, args.request_timeout)
            bench.log(f"warm-up chat: {'ok' if warm.completed else dict(warm.errors)}")

        async def run_load(seconds: float, tally: Tally, on_sample: Any = None) -> float:
            """`args.concurrency` clients chat in a loop for `seconds`; returns the wall time."""
            end = time.monotonic() + seconds

            async def client(index: int) -> None:
                token = stack.token(f"load-{index}", "eng", ["employee"])
                n = index
                # a new connection per chat: a pooled keep-alive connection reused after a Retry-After wait can
                # race the server's idle close (uvicorn closes after 5 s), which is the client's retry to make
                async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
                    while time.monotonic() < end:
                        wait = await chat(session, url, token, asked[n % len(asked)], tally, args.request_timeout)
                        n += 1
                        await asyncio.sleep(min(wait, max(0.0, end - time.monotonic())))

            async def sample() -> None:
                while time.monotonic() < end:
                    await asyncio.sleep(5)
                    if on_sample is not None:
                        on_sample(await asyncio.to_thread(snapshot, pids))

            began = time.monotonic()
            sampler = asyncio.create_task(sample())
            await asyncio.gather(*(client(i) for i in range(args.concurrency)))
            sampler.cancel()
            return time.monotonic() - began

        if args.warmup > 0:
            # The same load, not counted: buffers, pools and caches of every process reach the size this load
            # needs, so that "before" is the warm state and growth after it is what the load leaves behind.
            bench.log(f"warm-up load: {args.concurrency} clients for {args.warmup:.0f} s")
            await run_load(args.warmup, Tally())
        await asyncio.sleep(args.settle)
        before = snapshot(pids)
        bench.log(f"before: {before}")

        tally = Tally()
        peak: dict[str, int] = dict(before["rss_mib"])
        series: list[dict[str, Any]] = []
        started = time.monotonic()

        def on_sample(snap: dict[str, Any]) -> None:
            series.append({"t_s": round(time.monotonic() - started), **snap["rss_mib"]})
            for name, mib in snap["rss_mib"].items():
                peak[name] = max(peak.get(name, 0), mib)

        wall = await run_load(args.duration, tally, on_sample)
        bench.log(f"load done in {wall:.0f} s; settling {args.settle:.0f} s")
        await asyncio.sleep(args.settle)
        after = snapshot(pids)
        bench.log(f"after: {after}")
    finally:
        stack.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    def pct(values: list[float], q: float) -> float | None:
        return round(bench.percentile(values, q), 2) if values else None

    memory = {
        name: {
            "before_mib": before["rss_mib"][name],
            "peak_mib": peak.get(name),
            "after_mib": after["rss_mib"].get(name),
            "change_pct": round(100 * (after["rss_mib"].get(name, 0) / before["rss_mib"][name] - 1), 1)
            if before["rss_mib"][name] > 0
            else None,
        }
        for name in before["rss_mib"]
    }
    other = sum(tally.errors.values())
    return {
        "config": {
            "concurrency": args.concurrency,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "llm_threads": args.llm_threads,
            "documents": [p.name for p in paths],
            "questions": len(asked),
            "request_timeout_s": args.request_timeout,
            "answerer": limits,
        },
        "wall_s": round(wall, 1),
        "chats": {
            "completed": tally.completed,
            "refused_503_retry_after": tally.refused,
            "other_failures": other,
            "failures_by_kind": dict(tally.errors),
            "completed_after_queueing": tally.chats_queued,
            "completed_per_minute": round(60 * tally.completed / wall, 1),
        },
        "latency_s": {
            "first_event_p50": pct(tally.first_event_s, 0.5),
            "first_event_p95": pct(tally.first_event_s, 0.95),
            "first_token_p50": pct(tally.first_token_s, 0.5),
            "first_token_p95": pct(tally.first_token_s, 0.95),
            "refusal_p50": pct(tally.refusal_s, 0.5),
            "refusal_p95": pct(tally.refusal_s, 0.95),
            "retry_after_p50": pct([float(v) for v in tally.retry_after_s], 0.5),
        },
        "queue": {"queued_events": tally.queued_events, "max_position": tally.max_position},
        "memory": memory,
        "rss_series_mib": series,
        "established_sockets": {
            name: {"before": before["established"].get(name), "after": after["established"].get(name)}
            for name in WATCHED
        },
        "meta": {
            "cpu_cores": os.cpu_count(),
            "load_average_1min_start": round(load_start, 2),
            "load_average_1min_end": round(os.getloadavg()[0], 2),
        },
    }


def rows(report: dict[str, Any]) -> list[tuple[str, object]]:
    chats, lat, queue = report["chats"], report["latency_s"], report["queue"]
    out: list[tuple[str, object]] = [
        ("chats completed (per minute)", f"{chats['completed']} ({chats['completed_per_minute']})"),
        ("of them after waiting in the queue", chats["completed_after_queueing"]),
        ("refused: HTTP 503 with Retry-After", chats["refused_503_retry_after"]),
        ("other failures (target 0)", f"{chats['other_failures']} {chats['failures_by_kind'] or ''}".strip()),
        ("time to first event p50 / p95 s", f"{lat['first_event_p50']} / {lat['first_event_p95']}"),
        ("time to first token p50 / p95 s", f"{lat['first_token_p50']} / {lat['first_token_p95']}"),
        (
            "time to a 503 p50 / p95 s; Retry-After p50",
            f"{lat['refusal_p50']} / {lat['refusal_p95']}; {lat['retry_after_p50']}",
        ),
        ("queued events; largest position", f"{queue['queued_events']}; {queue['max_position']}"),
    ]
    for name, m in report["memory"].items():
        out.append(
            (
                f"RSS {name} MiB before → peak → after (target ±10 %)",
                f"{m['before_mib']} → {m['peak_mib']} → {m['after_mib']} ({m['change_pct']:+} %)"
                if m["change_pct"] is not None
                else "not readable",
            )
        )
    for name, s in report["established_sockets"].items():
        out.append((f"ESTABLISHED sockets {name} before → after", f"{s['before']} → {s['after']}"))
    return out


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description="ragmesh under many concurrent streaming chats")
    parser.add_argument("--concurrency", type=int, default=50, help="clients chatting at once")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds during which clients start chats")
    parser.add_argument("--request-timeout", type=float, default=240.0, help="client timeout of one chat, seconds")
    parser.add_argument(
        "--llm-threads",
        type=int,
        default=1,
        help="llama.cpp threads of the local model server (LOCAL_LLM_THREADS; its default is 2)",
    )
    parser.add_argument("--settle", type=float, default=10.0, help="idle seconds before each snapshot")
    parser.add_argument(
        "--warmup",
        type=float,
        default=60.0,
        help="seconds of the same load before the 'before' snapshot, not counted (0 = one chat only)",
    )
    parser.add_argument("--data-dir", default=str(root.parent / "shared" / "data"))
    parser.add_argument("--output", default=str(root / "bench" / "results" / "load.json"))
    parser.add_argument("--work-dir", default=None, help="parent of the temporary mesh data folder")
    parser.add_argument("--keep", action="store_true", help="keep the mesh data folder (logs) afterwards")
    args = parser.parse_args()
    if (
        args.concurrency < 1
        or args.llm_threads < 1
        or args.duration <= 0
        or args.request_timeout <= 0
        or args.settle < 0
    ):
        parser.error("--concurrency and --llm-threads >= 1, --duration and --request-timeout > 0, --settle >= 0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from ragmesh_dev.devstack import interrupt_on_sigterm

    interrupt_on_sigterm()  # `kill` of the benchmark stops its engines and services too
    report = asyncio.run(measure(args))
    title = (
        f"{args.concurrency} concurrent streaming chats for {args.duration:.0f} s "
        f"({report['meta']['cpu_cores']} cores, load {report['meta']['load_average_1min_start']} → "
        f"{report['meta']['load_average_1min_end']})"
    )
    bench.write_report(args.output, report, title, ["measure", "value"], rows(report))


if __name__ == "__main__":
    main()
