"""Sphinx configuration of the hipfile documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
"""

from __future__ import annotations

import os
import sys
import warnings

# The API pages import hipfile; on machines without ROCm the emulated test
# platform provides the libraries. Importing needs no library; this only
# keeps HIP-Python from looking for ROCm. The platform's warning is expected.
os.environ.setdefault("HIPFILE_PLATFORM_QUIET", "1")
if not os.environ.get("ROCM_PATH"):
    os.environ.setdefault("HIPFILE_PLATFORM", "emulated")
sys.path.insert(0, os.path.abspath(".."))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import hipfile

project = "hipfile"
author = "the hipfile authors"
copyright = "the hipfile authors"
release = hipfile.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.intersphinx",
    "numpydoc",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
html_theme = "alabaster"
html_title = f"hipfile {release}"


def _public_alias(app, env, node, contnode):  # type: ignore[no-untyped-def]
    """Resolve ``hipfile.Name`` (the re-exported public name) to the object
    documented in its module, e.g. ``hipfile.file.FileHandle``."""
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("hipfile."):
        return None
    head, _, rest = target[len("hipfile."):].partition(".")
    obj = getattr(hipfile, head, None)
    module = getattr(obj, "__module__", None)
    if obj is None or module is None or not module.startswith("hipfile"):
        return None
    full = f"{module}.{head}" + (f".{rest}" if rest else "")
    if full == target:
        return None
    domain = env.get_domain("py")
    for role in ("class", "func", "meth", "attr", "exc", "obj"):
        found = domain.resolve_xref(env, node["refdoc"], app.builder, role, full, node,
                                    contnode)
        if found is not None:
            return found
    return None


def setup(app):  # type: ignore[no-untyped-def]
    app.connect("missing-reference", _public_alias)
