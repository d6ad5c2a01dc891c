# JupyterHub configuration for nbjobs: everything comes from one nbjobs.yaml,
# named by $NBJOBS_CONFIG (see hub_config/examples/). Add your own settings
# (authenticator, TLS, ...) below the configure() call.
from nbjobs.hub_config import configure

configure(c)  # type: ignore[name-defined]  # noqa: F821 (JupyterHub provides `c`)
