"""One optional import nbjobs's own processes decline, to start sooner.

jsonschema (imported by nbformat, jupyter-events, hence by every Jupyter server, hub
and job runner) checks the ``iri`` string format with ``rfc3987-syntax`` when that is
installed (jupyter-events brings it into most Jupyter environments), and that module
builds an Earley parser for the whole RFC 3987 grammar when it is imported: measured
here, 1.4 s of CPU in every such process before it does anything. No schema nbjobs,
nbformat or Jupyter Server validates with uses that format, so a process started by
nbjobs declines the module before anything imports jsonschema; jsonschema then simply
does not check ``iri`` strings. Here, in the runner's package (stdlib only, the
lowest layer), so that every process nbjobs starts can use it.
"""

from __future__ import annotations

import sys

#: the module declined
IRI_GRAMMAR = "rfc3987_syntax"


def decline_iri_grammar() -> None:
    """Make ``import rfc3987_syntax`` fail in this process (unless already imported)."""
    sys.modules.setdefault(IRI_GRAMMAR, None)  # type: ignore[arg-type]
