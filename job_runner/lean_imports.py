"""Optional imports nbjobs's own processes decline, to start sooner.

jsonschema (imported by nbformat, jupyter-events, hence by every Jupyter server, hub
and job runner) imports, when they are installed, the modules it checks string formats
with (``iri``, ``uri``, ``duration``, ``color``, ...): jupyter-events brings them into
most Jupyter environments. Measured here: ``rfc3987-syntax`` builds an Earley parser for
the whole RFC 3987 grammar with lark at import, 1.4 s of CPU in every such process; the
others (isoduration with arrow, rfc3986-validator's regular expressions, webcolors, ...)
add 70 ms more, a fifth of a job runner's own start. jsonschema checks a format only
when a validator is given a format checker, and no schema nbjobs, nbformat or Jupyter
Server validates notebooks or requests with relies on these: a process started by
nbjobs declines the modules before anything imports jsonschema, which then simply does
not check those formats. Here, in the runner's package (stdlib only, the lowest layer),
so that every process nbjobs starts can use it.
"""

from __future__ import annotations

import sys

#: the modules declined: jsonschema's optional format checkers (jsonschema/_format.py)
FORMAT_CHECKERS = (
    "rfc3987_syntax",  # iri, iri-reference: the lark grammar
    "rfc3987",
    "rfc3986_validator",  # uri, uri-reference
    "rfc3339_validator",  # date-time
    "isoduration",  # duration (imports arrow)
    "webcolors",  # color
    "uri_template",
    "jsonpointer",
    "fqdn",  # hostname (not idna: HTTP clients import it too)
)


def decline_format_checkers(keep: tuple[str, ...] = ()) -> None:
    """Make importing each of :data:`FORMAT_CHECKERS` but ``keep`` fail in this process
    (those not imported already)."""
    for name in FORMAT_CHECKERS:
        if name not in keep:
            sys.modules.setdefault(name, None)  # type: ignore[arg-type]
