"""``dataprep report``: what a pipeline run did, as an HTML page with PNG charts and a Markdown summary.

This module is the report's interface to other packages: the ``Section`` every part of the report is
made of, and the entry-point group through which another package adds sections without the data side
importing it. A provider registered under ``SECTIONS_GROUP`` is called as ``provider(run, folder)``
with the ``--train-run`` path and the report folder (where it may write PNGs) and returns a ``Section``
or None; ``pretrain.inference.plot:training_section`` is the one ccpretrain ships.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SECTIONS_GROUP = "ccpretrain.report_sections"


@dataclass
class Section:
    """One titled part of the report, rendered to both HTML and Markdown. A table with no headers is a
    list of (key, value) rows."""

    title: str
    text: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # PNG names inside the report folder
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)
