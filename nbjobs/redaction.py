"""Keeping tokens out of logs: the one place that knows how a token rides in an address.

Used by the job service's handlers and by the server extension (which imports nothing
of the service's): it needs only :mod:`re` and tornado.
"""

from __future__ import annotations

import re
from types import TracebackType

from tornado import httputil, web
from tornado.log import app_log, gen_log

#: a ``token=`` (or ``access_token=``) value in a query string
_QUERY_TOKEN = re.compile(r"((?:^|[?&;])(?:access_)?token=)[^&;#]*", re.IGNORECASE)


def redact_tokens(uri: str) -> str:
    """``uri`` with the value of every ``token=`` query argument replaced by ``[secret]``."""
    return _QUERY_TOKEN.sub(r"\1[secret]", uri)


class NoTokenInLogs:
    """Mixin: what tornado logs of a failed request names it without a ``?token=`` value.

    jupyter-server's access log scrubs tokens from addresses; tornado's warnings for
    an error (a 502 when the job service is down) and its tracebacks do not. The job
    service's handlers and the server extension's take it.
    """

    request: httputil.HTTPServerRequest

    def _request_summary(self) -> str:
        request = self.request
        uri = redact_tokens(request.uri or "")
        return f"{request.method} {uri} ({request.remote_ip})"

    def log_exception(
        self,
        typ: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # as tornado's, less the request's repr (it holds the address, token and all)
        if isinstance(value, web.HTTPError):
            if value.log_message:
                gen_log.warning(
                    "%d %s: " + value.log_message,
                    value.status_code,
                    self._request_summary(),
                    *value.args,
                )
            return
        app_log.error("Uncaught exception %s", self._request_summary(), exc_info=value)
