"""One cheap call to an OpenAI-compatible endpoint, before a run sends it any work: list its models.

``evalcore validate --ping`` and ``evalcore run`` (unless ``--no-ping``) call :func:`ping` once per configured
endpoint (a model or judge whose class is ``llm_backed``), so an endpoint that is down, a key it refuses or a
model it does not serve stops the run with exit 2 before Ray starts, instead of as a run of error rows.

What the answer means:

* connection refused, a DNS failure or no complete answer within the timeout: unreachable (``base_url``); the
  timeout bounds the whole call (:func:`evalcore.core.deadline.call_within`), not each read, so a server that trickles
  its answer a byte at a time cannot hold the ping;
* HTTP 401 / 403: the key in ``api_key_env`` is refused (the variable is named, its value never);
* a list of models that lacks the configured one: unknown model (``model``);
* HTTP 404 on ``/models``: the server has no model listing (some OpenAI-compatible servers do not); the
  model is not checked and the endpoint counts as reachable;
* any other HTTP status: reported with its code.

Each problem is ``(field, reason)``: the param it is about and one bounded line.
"""

from __future__ import annotations

import os

import openai

from evalcore.core.deadline import DeadlineExceeded, call_within
from evalcore.core.errors import bounded

#: the longest a ping waits for an answer (the endpoint's own timeout_s, when shorter)
PING_TIMEOUT_S = 10.0


def _why_unreachable(e: openai.APIConnectionError) -> str:
    """The innermost cause of a connection error in a few words (``[Errno 111] Connection refused``)."""
    cause: BaseException = e
    for _ in range(16):  # a chain is short; bounded all the same
        inner = cause.__cause__ or cause.__context__
        if inner is None:
            break
        cause = inner
    return str(cause).strip() or type(cause).__name__


def ping(base_url: str, model: str, api_key_env: str, timeout_s: float = PING_TIMEOUT_S) -> tuple[str, str] | None:
    """``(field, reason)`` when the endpoint at ``base_url`` cannot serve ``model`` with the key named by
    ``api_key_env``, else None. Makes one ``GET {base_url}/models`` with no retries."""
    key = os.environ.get(api_key_env) or ""
    if not key:
        return "api_key_env", f"environment variable {api_key_env} is not set"

    def clean(text: str) -> str:
        return bounded(text.replace(key, "***"), 300)

    limit = min(timeout_s, PING_TIMEOUT_S)
    client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=limit)
    try:
        served = call_within(limit, lambda: [m.id for m in client.models.list().data], on_timeout=client.close)
    except (openai.APITimeoutError, DeadlineExceeded):
        return "base_url", f"no answer from {base_url} within {limit:g} s"
    except openai.APIConnectionError as e:
        return "base_url", clean(f"cannot reach {base_url}: {_why_unreachable(e)}")
    except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
        return "api_key_env", (f"{base_url} refused the key in ${api_key_env} "
                               f"(HTTP {e.status_code}: {clean(str(e.message))})")
    except openai.NotFoundError:
        return None  # no model listing on this server: reachable, model not checked
    except openai.APIStatusError as e:
        return "base_url", f"{base_url} answered HTTP {e.status_code}: {clean(str(e.message))}"
    except Exception as e:  # noqa: BLE001 - a body that is not a model list: say so, do not crash validate
        return "base_url", clean(f"{base_url} answered /models with something unexpected: {type(e).__name__}: {e}")
    finally:
        client.close()
    if served and model not in served:
        shown = ", ".join(repr(s) for s in served[:8]) + (f" and {len(served) - 8} more" if len(served) > 8 else "")
        return "model", f"{base_url} does not serve {model!r}; it serves {shown}"
    return None
