"""Tables and lines the CLI prints: documents, chunks, search results, an answer's sources and checks, traces."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragmesh_cli.ingest import Outcome

STATUS_STYLE = {
    "ready": "green",
    "failed": "red",
    "error": "red",
    "duplicate": "yellow",
    "present": "green",
    "skipped": "dim",
    "queued": "cyan",
}
TEXT_CHARS = 100
WIDE_CONSOLE = 110  # columns from which `docs list` also shows owner and update time
SUMMARY_ROWS = 200  # files an ingest summary lists one by one; a bigger run lists only its problems
SKIPPED_LINES = 10  # files skipped before upload named one by one; more are counted per reason


def short(text: Any, limit: int = TEXT_CHARS) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def file_format(doc: dict[str, Any]) -> str:
    """The file's extension, as `docs list --format` filters by ("xlsx", "md"); its MIME type when it has none."""
    suffix = PurePosixPath(str(doc.get("filename") or "")).suffix.lstrip(".").lower()
    return suffix or str(doc.get("mime_type") or "")


def minute(stamp: Any) -> str:
    """An ISO 8601 time to the minute in UTC, "2026-11-27 20:37" (as given when it does not parse)."""
    try:
        when = datetime.fromisoformat(str(stamp))
    except ValueError:
        return str(stamp or "")
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M")


def location(item: dict[str, Any]) -> str:
    """`Title › Section › Subsection, p. 3` for a source or chunk."""
    parts = [str(item.get("title") or "")] if item.get("title") else []
    parts += [str(s) for s in item.get("section_path") or []]
    text = " › ".join(parts) or "(untitled)"
    return f"{text}, p. {item['page']}" if item.get("page") else text


def outcome_counts(outcomes: Iterable[Outcome]) -> str:
    return status_counts(Counter(o.status for o in outcomes))


def status_counts(counts: Counter[str]) -> str:
    return " · ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def ingest_summary(console: Console, outcomes: list[Outcome]) -> None:
    """The counts on a line of their own (a table's title would wrap at the table's width), then one row per file;
    past SUMMARY_ROWS files, only the files that did not go well, and no table at all when there are none."""
    rows = outcomes if len(outcomes) <= SUMMARY_ROWS else [o for o in outcomes if not o.ok]
    title = f"ingest: {outcome_counts(outcomes)}"
    if len(rows) < len(outcomes):
        title += f" (listing the {len(rows)} not ok)" if rows else " (all ok; --json lists each file)"
    console.print(title, soft_wrap=True)
    if not rows:
        return
    table = Table()
    for column in ("file", "status", "document", "reason"):
        table.add_column(column, overflow="fold")
    for o in rows:
        style = STATUS_STYLE.get(o.status, "yellow")
        table.add_row(escape(str(o.path)), f"[{style}]{o.status}[/]", o.document_id, escape(o.reason))
    console.print(table)


def skipped_lines(skipped: list[Outcome]) -> list[str]:
    """What `ragmesh ingest` says about the paths it does not upload: each one while they are few; past
    SKIPPED_LINES, the files skipped for one reason on one line with their count (a missing path is always named)."""
    if len(skipped) <= SKIPPED_LINES:
        return [f"skipping {escape(str(o.path))}: {escape(o.reason)}" for o in skipped]
    lines = [f"skipping {escape(str(o.path))}: {escape(o.reason)}" for o in skipped if not o.ok]
    reasons = Counter(o.reason for o in skipped if o.ok)
    lines += [f"skipping {n} file{'s' * (n != 1)}: {escape(reason)}" for reason, n in sorted(reasons.items())]
    return lines


def documents_table(console: Console, body: dict[str, Any]) -> None:
    """One row per document: the id whole (to copy into `docs show` / `docs rm`) and the short columns unbroken,
    the title folding; owner and update time only where the console is wide enough (`--json` has everything)."""
    documents = body.get("documents") or []
    table = Table(
        title=f"{len(documents)} of {body.get('total', len(documents))} documents",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    wide = console.width >= WIDE_CONSOLE
    table.add_column("id", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=1)
    for column in ("status", "chunks", "format"):
        table.add_column(column, no_wrap=True)
    if wide:
        table.add_column("owner", overflow="fold")
        table.add_column("updated (UTC)", no_wrap=True)
    for d in documents:
        status = str(d.get("status", ""))
        row = [
            str(d.get("document_id", "")),
            escape(short(d.get("title"), 60)),
            f"[{STATUS_STYLE.get(status, 'yellow')}]{status}[/]",
            str(d.get("chunk_count", "")),
            escape(file_format(d)),
        ]
        if wide:
            row += [escape(str(d.get("owner_user", ""))), minute(d.get("updated_at"))]
        table.add_row(*row)
    console.print(table)
    if body.get("next_cursor"):
        console.print(f"next page: --cursor {body['next_cursor']}", soft_wrap=True)  # one line, to copy


def document_details(console: Console, doc: dict[str, Any]) -> None:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    acl = doc.get("acl") or {}
    for key, value in doc.items():
        if key == "acl":
            value = (
                "; ".join(f"{k}: {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in acl.items() if v)
                or "owner only"
            )
        elif isinstance(value, list):
            value = "; ".join(str(v) for v in value)
        if value not in ("", None, []):
            table.add_row(key, escape(str(value)))
    console.print(table)


def chunks_table(console: Console, body: dict[str, Any] | list[Any]) -> None:
    chunks = body if isinstance(body, list) else body.get("chunks") or body.get("items") or []
    table = Table(title=f"{len(chunks)} chunks", title_justify="left")
    for column in ("level", "section", "page", "tokens", "text"):
        table.add_column(column, overflow="fold")
    for c in chunks:
        table.add_row(
            str(c.get("level", c.get("kind", ""))),
            escape(" › ".join(c.get("section_path") or [])),
            str(c.get("page") or ""),
            str(c.get("token_count", "")),
            escape(short(c.get("text"))),
        )
    console.print(table)
    if isinstance(body, dict) and body.get("next_cursor"):
        console.print(f"more chunks: --cursor {body['next_cursor']}")


def search_table(console: Console, body: dict[str, Any]) -> None:
    results = body.get("results") or []
    table = Table(
        title=f"{len(results)} results ({body.get('accessible_documents', '?')} documents readable)",
        title_justify="left",
    )
    for column in ("#", "score", "source", "document", "text"):
        table.add_column(column, overflow="fold")
    for r in results:
        table.add_row(
            str(r.get("index", "")),
            f"{(r.get('scores') or {}).get('score', 0):.3f}",
            escape(location(r)),
            str(r.get("document_id", "")),
            escape(short(r.get("snippet"))),
        )
    console.print(table)
    degraded(console, body.get("degraded") or [])


def degraded(console: Console, items: list[dict[str, Any]]) -> None:
    for d in items:
        console.print(f"[yellow]degraded[/] {escape(str(d.get('step')))}: {escape(str(d.get('reason')))}")


def answer_footer(console: Console, final: dict[str, Any]) -> None:
    """After the streamed answer: the sources it could cite, then the verification status and warnings."""
    sources = final.get("sources") or []
    if sources:
        console.print("\n[bold]Sources[/]")
        for s in sources:
            mark = " [green](cited)[/]" if s.get("cited") else ""
            console.print(f"  [{s.get('index')}] {escape(location(s))}{mark}")
    span = final.get("answer_span")
    if isinstance(span, dict) and span.get("text"):
        console.print(f"\n[bold]Short answer[/] {escape(str(span['text']))} [dim][{span.get('source')}][/]")
        if final.get("overruled"):
            console.print("[dim]the model's wording did not match the sources; the answer is quoted from them[/]")
    checks = []
    if final.get("outcome") and final["outcome"] != "answer":
        checks.append(f"outcome: {final['outcome']}")
    if final.get("grounded") is not None:
        score = final.get("grounding_score")
        checks.append(
            ("[green]grounded[/]" if final["grounded"] else "[red]not grounded[/]")
            + (f" ({score:.2f})" if isinstance(score, (int, float)) else "")
        )
    if final.get("verified") is not None:
        checks.append("[green]verified[/]" if final["verified"] else "[yellow]not verified[/]")
    if final.get("withheld"):
        checks.append("[yellow]answer withheld[/]")
    if checks:
        console.print("\n[bold]Verification[/] " + " · ".join(checks))
    for warning in final.get("warnings") or []:
        console.print(f"[yellow]warning[/] {escape(str(warning))}")
    for note in final.get("notes") or []:  # what the user should know: how the question was read, documents pending
        console.print(f"[cyan]note[/] {escape(str(note))}")
    degraded(console, final.get("degraded") or [])
    if final.get("trace_id"):
        console.print(f"[dim]trace {final['trace_id']}[/]")


def traces_table(console: Console, body: dict[str, Any]) -> None:
    traces = body.get("traces") or []
    table = Table(title=f"{len(traces)} traces", title_justify="left")
    for column in ("trace", "start", "ms", "spans", "root", "user", "error"):
        table.add_column(column, overflow="fold")
    for t in traces:
        table.add_row(
            str(t.get("trace_id", "")),
            str(t.get("start_time", "")),
            f"{t.get('duration_ms') or 0:.1f}",
            str(t.get("span_count", "")),
            escape(str(t.get("root_name") or "")),
            escape(str(t.get("user_id") or "")),
            "[red]yes[/]" if t.get("has_error") else "",
        )
    console.print(table)


def trace_spans(console: Console, body: dict[str, Any]) -> None:
    """The spans of one trace as a tree (indented under their parents), in start order."""
    spans = sorted(body.get("spans") or [], key=lambda s: str(s.get("start_time", "")))
    ids = {s.get("span_id") for s in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for s in spans:
        parent = s.get("parent_span_id") if s.get("parent_span_id") in ids else None
        children.setdefault(parent, []).append(s)
    table = Table(title=f"trace {body.get('trace_id', '')}: {len(spans)} spans", title_justify="left")
    for column in ("span", "service", "ms", "status"):
        table.add_column(column, overflow="fold")

    def walk(parent: str | None, depth: int) -> None:
        for s in children.get(parent, []):
            status = str(s.get("status_code") or "")
            if s.get("status_message"):
                status += f": {s['status_message']}"
            ms = s.get("duration_ms")
            table.add_row(
                "  " * depth + escape(str(s.get("name", ""))),
                escape(str(s.get("service", ""))),
                f"{ms:.1f}" if isinstance(ms, (int, float)) else "",
                f"[red]{escape(status)}[/]" if "ERROR" in status.upper() else escape(status),
            )
            walk(s.get("span_id"), depth + 1)

    walk(None, 0)
    console.print(table)


def conversations_table(console: Console, body: dict[str, Any]) -> None:
    table = Table("id", "title", "turns", "updated")
    for c in body.get("conversations") or []:
        table.add_row(c["conversation_id"], escape(short(c["title"], 60)), str(c["message_count"]), c["updated_at"])
    console.print(table)
    if body.get("next_cursor"):
        console.print(f"more: --cursor {body['next_cursor']}")


def conversation_details(console: Console, body: dict[str, Any]) -> None:
    console.print(f"[bold]{escape(body['title'] or '(untitled)')}[/]  {body['conversation_id']}")
    for i, m in enumerate(body.get("messages") or [], 1):
        console.print(f"\n[bold]{i}. {escape(m['question'])}[/]  [dim]{m['time']} · trace {m['trace_id']}[/]")
        if m.get("withdrawn"):
            console.print(f"[yellow]{escape(m.get('note') or 'withdrawn')}[/]")
            continue
        console.print(escape(m["answer"]))
        for source in m.get("sources") or []:
            console.print(f"  [dim][{source['index']}] {escape(location(source))}[/]")
        if m.get("feedback"):
            console.print(f"  [dim]rated {m['feedback']['rating']} {escape(m['feedback']['comment'])}[/]")


def graph_entity(console: Console, detail: dict[str, Any], others: list[str]) -> None:
    """`ragmesh graph ENTITY`: the entity, its facts with their chunks, neighbours, communities, mentions."""
    entity = detail["entity"]
    console.print(
        f"[bold]{escape(entity['name'])}[/] ({escape(entity['type'])}), "
        f"mentioned in {entity['mentions']} readable chunk(s)"
    )
    facts = Table(title="facts", title_justify="left")
    for column in ("source", "relation", "target", "chunks"):
        facts.add_column(column, overflow="fold")
    for f in detail.get("facts") or []:
        facts.add_row(
            escape(f["source"]), escape(f["relation"]), escape(f["target"]), escape(", ".join(f["chunk_ids"][:3]))
        )
    console.print(facts)
    neighbours = [f"{n['name']} ({n['mentions']})" for n in detail.get("neighbours") or []]
    if neighbours:
        console.print("neighbours: " + escape(", ".join(neighbours)))
    for c in detail.get("communities") or []:
        console.print(f"community {escape(c['id'])} (level {c['level']}, {c['size']} entities): {escape(c['title'])}")
    mentions = detail.get("mentions") or []
    console.print(
        f"mentions: {escape(', '.join(m['chunk_id'] for m in mentions[:10]))}" + (" …" if len(mentions) > 10 else "")
    )
    if others:
        console.print(f"[dim]also matching: {escape(', '.join(others))}[/]")
