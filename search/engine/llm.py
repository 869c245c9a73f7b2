"""Talking to an OpenAI-compatible chat-completions endpoint.

Any server that speaks ``/v1/chat/completions`` works (vLLM, SGLang, Ollama,
llama.cpp's server, hosted APIs).  The official ``openai`` client does the
HTTP, with retries and exponential backoff on timeouts, connection errors,
429 and 5xx.  Calls run on a small thread pool so that LLM latency overlaps
GPU evaluation; every call's tokens, cost and latency are reported back.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Mapping

import openai

from search.config import LLMConfig
from search.config.sections import LLMModel


class LLMError(RuntimeError):
    """A call that produced no usable text (after the client's retries)."""


@dataclass(frozen=True)
class LLMReply:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def call_cost(model: LLMModel, prompt_tokens: int, completion_tokens: int) -> float:
    return (prompt_tokens * model.usd_per_mtok_in + completion_tokens * model.usd_per_mtok_out) / 1e6


class LLMClient:
    """Synchronous calls with retries; :class:`LLMPool` runs them concurrently."""

    def __init__(self, config: LLMConfig, environ: Mapping[str, str] | None = None) -> None:
        if not config.enabled:
            raise ValueError("LLM is not configured (llm.base_url and llm.models are needed)")
        env = os.environ if environ is None else environ
        # Local servers usually need no key; the client insists on a non-empty one.
        api_key = env.get(config.api_key_env) or "no-key"
        self.config = config
        self._client = openai.OpenAI(base_url=config.base_url, api_key=api_key, timeout=config.timeout_s,
                                     max_retries=config.max_retries)

    def complete(self, messages: list[dict[str, str]], model: LLMModel) -> LLMReply:
        began = time.monotonic()
        try:
            response = self._client.chat.completions.create(
                model=model.name, messages=messages,  # type: ignore[arg-type]
                temperature=self.config.temperature, max_tokens=self.config.max_tokens)
        except openai.APIStatusError as exc:
            raise LLMError(f"{model.name}: HTTP {exc.status_code}: {_short(exc.message)}") from None
        except openai.APITimeoutError:
            raise LLMError(f"{model.name}: timed out after {self.config.timeout_s:g} s "
                           f"({self.config.max_retries} retries)") from None
        except openai.APIConnectionError as exc:
            raise LLMError(f"{model.name}: cannot reach {self.config.base_url}: {_short(str(exc))}") from None
        except openai.OpenAIError as exc:
            raise LLMError(f"{model.name}: {type(exc).__name__}: {_short(str(exc))}") from None
        choices = getattr(response, "choices", None) or []
        text = (choices[0].message.content or "") if choices else ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        if not text.strip():
            raise LLMError(f"{model.name}: empty completion")
        return LLMReply(text=text, model=model.name, prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens,
                        cost_usd=call_cost(model, prompt_tokens, completion_tokens),
                        latency_s=time.monotonic() - began)

    def close(self) -> None:
        self._client.close()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


class LLMPool:
    """At most ``concurrency`` calls in flight; results are collected as futures."""

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self._executor = ThreadPoolExecutor(max_workers=client.config.concurrency, thread_name_prefix="llm")
        self._futures: set[Future[LLMReply]] = set()

    @property
    def inflight(self) -> int:
        self._futures = {f for f in self._futures if not f.done()}
        return len(self._futures)

    @property
    def free_slots(self) -> int:
        return self.client.config.concurrency - self.inflight

    def submit(self, messages: list[dict[str, str]], model: LLMModel) -> Future[LLMReply]:
        future = self._executor.submit(self.client.complete, messages, model)
        self._futures.add(future)
        return future

    def shutdown(self, wait: bool = False) -> None:
        self._executor.shutdown(wait=wait, cancel_futures=True)
        self.client.close()
