"""Sphinx configuration of the nbjobs documentation site (built by scripts/docs.sh)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

from nbjobs.job_runner.lean_imports import decline_format_checkers  # noqa: E402

from nbjobs.version import package_version  # noqa: E402

# sphinxcontrib.openapi imports jsonschema: without its optional format checkers (as every
# process nbjobs starts), the build skips the IRI grammar's 4 s of CPU; no schema the site
# renders is checked against a string format
decline_format_checkers()

project = "nbjobs"
author = "the nbjobs team"
copyright = "2026, the nbjobs team"
release = package_version()
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "autodoc_traits",
    "sphinxarg.ext",
    "sphinxcontrib.openapi",
    "nbjobs_docs",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]
myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "attrs_inline"]
myst_heading_anchors = 3
# "--flavor" stays two hyphens (options are typed, not typeset)
smartquotes = False

# Offline: nothing on any page may come from a CDN. The PyData theme ships its own
# fonts and icons; MathJax (the one CDN script Sphinx adds) is never needed here.
html_theme = "pydata_sphinx_theme"
html_title = "nbjobs"
html_static_path = ["_static"]
html_css_files = ["nbjobs.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "navbar_align": "left",
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"index": []}
html_show_sourcelink = False

autodoc_member_order = "bysource"
autodoc_typehints = "none"
# The spawners and the service are documented for their configurable traits; their
# methods are the code's business.
suppress_warnings = ["myst.header"]
