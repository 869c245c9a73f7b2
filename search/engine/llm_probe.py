"""Is the LLM endpoint there?  One short request before a run starts, so that a wrong
address or a server that is down is said once at launch, not found call by call."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

PROBE_TIMEOUT_S = 3.0


def unreachable(base_url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``base_url`` cannot be reached (refused, unknown host, timed out), or None when an HTTP
    server answered ``GET <base_url>/models`` with anything, an error status included (a server
    that wants a key, or has no such route, is still there)."""
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"no answer within {timeout_s:g} s"
        return str(getattr(reason, "strerror", None) or reason)
    except (socket.timeout, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    except (OSError, ValueError) as exc:  # a malformed URL, a reset connection
        return " ".join(str(exc).split()) or type(exc).__name__
