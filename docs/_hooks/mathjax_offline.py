"""MkDocs hook: ship MathJax inside the built site, so formulas render offline.

The formulas of the user guide (pymdownx.arithmatex spans) are typeset in the
reader's browser by MathJax 3. Loading MathJax from a CDN leaves a reader
without network looking at raw ``\\[ ... \\]`` source, so the docs build copies
MathJax from an installed Python package instead: ``django-static-mathjax``
(in the ``docs`` extra; it carries the MathJax 3 release as plain static
files and needs no Django to be read). The JavaScript library is never kept
in this repository.

Copied to ``site/mathjax/`` (the page loads ``mathjax/es5/tex-mml-chtml.js``,
see ``extra_javascript`` in mkdocs.yml): the combined TeX component and the
folders MathJax loads from on demand, relative to that script: the CHTML
fonts (``output/chtml``), the autoloaded TeX extensions (``input``), the
menu's accessibility and speech parts (``a11y``, ``ui``, ``sre``), and
MathJax's LICENSE. The other combined builds (SVG output, MathML only) are
left out.
"""
from __future__ import annotations

import importlib.metadata
import pathlib

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

DISTRIBUTION = "django-static-mathjax"
# inside the distribution: <STATIC>/mathjax/<file>; the site gets mathjax/<file>
STATIC = "mathjax/static"
SHIPPED = ("mathjax/LICENSE", "mathjax/es5/tex-mml-chtml.js")
SHIPPED_FOLDERS = ("mathjax/es5/output/chtml/", "mathjax/es5/input/", "mathjax/es5/a11y/",
                   "mathjax/es5/ui/", "mathjax/es5/sre/")


def mathjax_files() -> tuple[pathlib.Path, list[str]]:
    """The folder that holds MathJax's ``mathjax/`` tree, and the paths under
    it to ship (POSIX, relative to that folder).

    Raises:
        PluginError: the distribution is not installed (install the docs
            extra: ``pip install -e ".[docs]"``) or lacks the MathJax files.
    """
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise PluginError(f"mathjax_offline: the Python package {DISTRIBUTION!r} is not installed; "
                          "install the docs extra: pip install -e \".[docs]\"") from None
    root = pathlib.Path(dist.locate_file(STATIC))
    prefix = STATIC + "/"
    wanted = []
    for entry in dist.files or ():
        path = entry.as_posix()
        if not path.startswith(prefix):
            continue
        rel = path[len(prefix):]
        if rel in SHIPPED or rel.startswith(SHIPPED_FOLDERS):
            wanted.append(rel)
    missing = [rel for rel in SHIPPED if rel not in wanted or not (root / rel).is_file()]
    if missing:
        raise PluginError(f"mathjax_offline: {DISTRIBUTION} at {root} lacks {', '.join(missing)}")
    return root, sorted(wanted)


def on_files(files: Files, config) -> Files:
    """Add MathJax's files to the site's files (copied by the build, served
    by ``mkdocs serve``)."""
    root, paths = mathjax_files()
    for rel in paths:
        files.append(File(rel, str(root), config["site_dir"], config["use_directory_urls"]))
    return files
