"""Keeping tokens out of logs: the one place that knows how a token rides in an address.

Used by the job service's handlers and by the server extension (which imports nothing
of the service's), so it imports nothing but :mod:`re`.
"""

from __future__ import annotations

import re

#: a ``token=`` (or ``access_token=``) value in a query string
_QUERY_TOKEN = re.compile(r"((?:^|[?&;])(?:access_)?token=)[^&;#]*", re.IGNORECASE)


def redact_tokens(uri: str) -> str:
    """``uri`` with the value of every ``token=`` query argument replaced by ``[secret]``."""
    return _QUERY_TOKEN.sub(r"\1[secret]", uri)
