"""Parsing in worker processes that can be killed: Docling reads untrusted files, so no file may hold the
service's event loop, its memory or a CPU for longer than the limits say.

`ParsePool` keeps PARSER_CONCURRENCY worker processes (`python -m ragmesh_parser.worker`, started fresh rather
than forked: the parent runs gRPC threads), each owning its own converters and chunker, built and warmed once. A parse (conversion and chunking) runs in one
worker under three limits:

- CPU time: `RLIMIT_CPU`, set before each job to the worker's CPU time so far plus PARSER_MAX_CPU_SECONDS; the
  kernel ends a worker past it (SIGXCPU).
- memory: `RLIMIT_AS`, the warmed worker's address space plus PARSER_MAX_MEMORY_MB; an allocation past it fails
  (MemoryError, or the worker dies).
- wall clock: PARSER_TIMEOUT_SECONDS; the parent kills the worker (SIGKILL) past it, and when the caller gives
  up (its deadline passed, it cancelled), so that no abandoned parse keeps running.

A killed worker is replaced in the background. A file that hits a limit is refused for good (`ParseLimit`, an
INVALID_ARGUMENT naming the limit): it would hit it again, so the ingestion worker must not retry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Protocol

from ragmesh_common.errors import InvalidArgument, Unavailable
from ragmesh_common.formats import IMAGE_FORMATS

if TYPE_CHECKING:
    from ragmesh_parser.chunker import ChunkRecord
    from ragmesh_parser.document import ParsedDocument

logger = logging.getLogger(__name__)

# how long a new worker may take to import Docling and warm its pipelines
START_TIMEOUT_SECONDS = 300.0
_RESTART_BACKOFF_MAX = 30.0


class ParseLimit(InvalidArgument):
    """The file needed more than a parse may use (time, CPU, memory): permanent, not worth a retry."""


class Converter(Protocol):
    def warmup(self) -> None: ...

    def parse(
        self, filename: str, content: bytes, fmt: str, progress: Callable[[int, int], None] | None = None
    ) -> ParsedDocument: ...


class Splitter(Protocol):
    def count(self, text: str) -> int: ...

    def chunk(self, parsed: ParsedDocument, document_id: str, max_tokens: int = 0) -> list[ChunkRecord]: ...


# Builds a worker's converter and chunker, in the worker (a module-level function or a partial of one: the
# spawned process receives it pickled).
WorkerFactory = Callable[[], tuple[Converter, Splitter]]


@dataclass(frozen=True)
class Limits:
    timeout_seconds: float  # wall clock per parse
    cpu_seconds: float  # CPU time per parse
    memory_bytes: int  # address space per worker above what it holds warmed; 0 = no limit
    ocr_seconds: float = 0.0  # more wall clock for a parse that may OCR (a PDF, an image)
    ocr_cpu_seconds: float = 0.0  # more CPU time for it (OCR time x onnxruntime threads)

    def for_job(self, fmt: str) -> tuple[float, float]:
        """(wall clock, CPU seconds) for a parse of format `fmt`."""
        if self.ocr_seconds and (fmt == "pdf" or fmt in IMAGE_FORMATS):
            return self.timeout_seconds + self.ocr_seconds, self.cpu_seconds + self.ocr_cpu_seconds
        return self.timeout_seconds, self.cpu_seconds


@dataclass(frozen=True)
class Job:
    filename: str
    content: bytes
    fmt: str
    document_id: str
    max_chunk_tokens: int


@dataclass(frozen=True)
class Parsed:
    document: ParsedDocument
    chunks: list[ChunkRecord]
    chunk_started_ns: int  # when chunking ran in the worker (epoch ns), for the parent's `chunk` span
    chunk_ended_ns: int


def _address_space() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def serve(fd: int) -> None:
    """A worker process on socket `fd`: receive the factory and limits, build and warm, report ready, then one
    job at a time until the socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent, which ends its workers
    from ragmesh_common.logs import setup_logging

    setup_logging("parser-worker")
    conn = Connection(fd)
    factory, limits = conn.recv()
    converter, splitter = factory()
    converter.warmup()
    splitter.count("warm up")
    if limits.memory_bytes > 0:
        ceiling = _address_space() + limits.memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job: Job | None = conn.recv()
        except EOFError:  # the parent is gone
            return
        if job is None:
            return
        usage = resource.getrusage(resource.RUSAGE_SELF)
        spent = usage.ru_utime + usage.ru_stime
        cpu_seconds = limits.for_job(job.fmt)[1]
        # the soft limit only: it can be raised again for the next job (the hard one could not)
        resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(spent + cpu_seconds), resource.RLIM_INFINITY))

        def progress(done: int, total: int) -> None:
            conn.send(("progress", (done, total)))

        try:
            parsed = converter.parse(job.filename, job.content, job.fmt, progress)
            chunk_started = time.time_ns()
            chunks = splitter.chunk(parsed, job.document_id, job.max_chunk_tokens)
            reply: tuple[str, Any] = ("ok", Parsed(parsed, chunks, chunk_started, time.time_ns()))
        except InvalidArgument as exc:
            reply = ("invalid", str(exc))
        except MemoryError:
            reply = ("memory", "")
        except Exception as exc:  # reported to the parent, which logs it
            # the whole traceback here: the reply keeps 500 characters, and a library's message may be a traceback
            # of its own whose last line, the cause, is cut (rapidocr's ONNXRuntimeError)
            logger.exception("parser worker: %s failed", job.filename)
            reply = ("error", f"{type(exc).__name__}: {exc}"[:500])
        del job
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("memory", ""))
        if reply[0] == "memory":
            return  # a worker that ran out of memory may hold fragments of it: a fresh one replaces it


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(self, process: subprocess.Popen[bytes], conn: Connection) -> None:
        self.process = process
        self.conn = conn

    def run(self, job: Job, timeout: float, progress: Callable[[int, int], None] | None = None) -> tuple[str, Any]:
        """Sends `job` and waits for the reply; ("timeout", …) after `timeout`, ("died", exit code) when the
        worker ended without one (killed by a limit or a crash). Progress reports on the way (pages read by OCR)
        go to `progress`. Blocking: called in a thread."""
        deadline = time.monotonic() + timeout
        try:
            self.conn.send(job)
            while True:
                if not self.conn.poll(max(deadline - time.monotonic(), 0.0)):
                    self.kill()
                    return ("timeout", None)
                reply: tuple[str, Any] = self.conn.recv()
                if reply[0] != "progress":
                    return reply
                if progress is not None:
                    progress(*reply[1])
        except (EOFError, OSError):
            return ("died", self._reap())

    def _reap(self) -> int | None:
        try:
            return self.process.wait(5)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Ends the worker and reaps it (blocking)."""
        if self.process.poll() is None:
            self.process.kill()
        self._reap()
        self.conn.close()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None


class ParsePool:
    """`size` worker processes; `parse` runs one job in an idle one under `limits`."""

    def __init__(self, factory: WorkerFactory, size: int, limits: Limits) -> None:
        self._factory = factory
        self._size = size
        self.limits = limits
        self._idle: asyncio.Queue[_Worker] = asyncio.Queue()
        self._workers: set[_Worker] = set()
        self._replacing: set[asyncio.Task[None]] = set()
        self._processes: set[subprocess.Popen[bytes]] = set()  # every worker started, ready or starting
        self._closed = False

    def _spawn(self) -> _Worker:
        """A new worker, once it reports ready (blocking: called in a thread). It gets this process's import path,
        so that a factory defined anywhere importable here unpickles there."""
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        with ours, theirs:
            process = subprocess.Popen(
                [sys.executable, "-m", "ragmesh_parser.worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
            self._processes.add(process)
            conn = Connection(ours.detach())
        worker = _Worker(process, conn)
        try:
            conn.send((self._factory, self.limits))
            if not conn.poll(START_TIMEOUT_SECONDS):
                raise RuntimeError(f"a parser worker did not start within {START_TIMEOUT_SECONDS:.0f}s")
            conn.recv()
        except (EOFError, OSError) as exc:
            worker.kill()
            raise RuntimeError(f"a parser worker exited while starting (exit code {process.returncode})") from exc
        except BaseException:
            worker.kill()
            raise
        return worker

    async def start(self) -> None:
        """Starts every worker and returns once all are warm."""
        workers = await asyncio.gather(*(asyncio.to_thread(self._spawn) for _ in range(self._size)))
        for worker in workers:
            self._workers.add(worker)
            self._idle.put_nowait(worker)
        logger.info("%d parser worker process(es) ready", len(workers))

    async def _replace(self, old: _Worker) -> None:
        await asyncio.to_thread(old.kill)  # reaps it
        self._processes.discard(old.process)
        delay = 1.0
        while not self._closed:
            try:
                worker = await asyncio.to_thread(self._spawn)
            except Exception:
                if self._closed:
                    return
                logger.exception("could not start a parser worker; trying again in %.0fs", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RESTART_BACKOFF_MAX)
                continue
            if self._closed:
                await asyncio.to_thread(worker.kill)
                return
            self._workers.add(worker)
            self._idle.put_nowait(worker)
            return

    def _retire(self, worker: _Worker) -> None:
        """Kills `worker` now (a signal, not a wait) and starts its replacement in the background."""
        if worker.alive:
            worker.process.kill()
        self._workers.discard(worker)
        task = asyncio.get_running_loop().create_task(self._replace(worker))
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def parse(self, job: Job, progress: Callable[[int, int], None] | None = None) -> Parsed:
        """The parsed document and its chunks; `ParseLimit` past a limit, `InvalidArgument` for an unreadable file.
        `progress(done, total)` is called (from a worker thread) as OCR reads pages."""
        worker = await self._idle.get()
        keep = False
        timeout, cpu_seconds = self.limits.for_job(job.fmt)
        try:
            kind, value = await asyncio.to_thread(worker.run, job, timeout, progress)
            keep = kind in ("ok", "invalid", "error") and worker.alive
        finally:  # also on cancellation: the worker may still be busy with an abandoned job, so it goes
            if keep:
                self._idle.put_nowait(worker)
            else:
                self._retire(worker)
        name = job.filename
        if self._closed and kind in ("died", "timeout"):  # stopped under it: not the file's fault, try again later
            raise Unavailable(f"{name}: the parser is shutting down")
        if kind == "ok":
            assert isinstance(value, Parsed)
            return value
        if kind == "invalid":
            raise InvalidArgument(value)
        if kind == "error":
            raise RuntimeError(f"{name}: parsing failed ({value})")
        if kind == "timeout":
            raise ParseLimit(
                f"{name}: parsing took longer than {timeout:.0f}s (PARSER_TIMEOUT_SECONDS"
                f"{' + PARSER_OCR_MAX_SECONDS' if timeout > self.limits.timeout_seconds else ''}); "
                "the file is too large or too complex to parse"
            )
        if kind == "memory" or (kind == "died" and value == -signal.SIGKILL):
            raise ParseLimit(
                f"{name}: parsing needed more than {self.limits.memory_bytes // (1024 * 1024)} MiB of memory "
                "(PARSER_MAX_MEMORY_MB); the file is too large or too complex to parse"
            )
        if kind == "died" and value == -signal.SIGXCPU:
            raise ParseLimit(
                f"{name}: parsing needed more than {cpu_seconds:.0f}s of CPU time (PARSER_MAX_CPU_SECONDS"
                f"{' + OCR' if cpu_seconds > self.limits.cpu_seconds else ''}); the file is too large or too complex "
                "to parse"
            )
        logger.warning("parser worker died on %s (exit code %s)", name, value)
        raise ParseLimit(f"{name}: the parser's worker process died on this file (exit code {value})")

    async def stop(self) -> None:
        """Asks idle workers to exit, then kills what is left, starting ones included."""
        self._closed = True
        while not self._idle.empty():
            with contextlib.suppress(OSError):
                self._idle.get_nowait().conn.send(None)
        for process in list(self._processes):
            await asyncio.to_thread(_wait, process, 2.0)
            if process.poll() is None:
                process.kill()
                await asyncio.to_thread(_wait, process, 5.0)
        if self._replacing:  # their workers are dead now, so they end at once
            await asyncio.gather(*self._replacing, return_exceptions=True)
        self._workers.clear()
        self._processes.clear()


def _wait(process: subprocess.Popen[bytes], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(seconds)
