"""docs/stages.md, the stage reference, stays in step with the stage registry: it has one section per
registered stage (a ``### `name``` heading), no section for a stage that does not exist, and the settings
it names are the stage's own."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGES_DOC = ROOT / "docs" / "stages.md"


def documented_stages(text: str) -> dict[str, list[str]]:
    """Stage name -> the lines of its section (from its ``### `name``` heading to the next heading)."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = re.match(r"^(#+)\s", line)
        if heading:
            name = re.fullmatch(r"### `([A-Za-z0-9_]+)`\s*", line)
            current = None
            if name:
                assert name.group(1) not in sections, f"docs/stages.md documents {name.group(1)!r} twice"
                current = sections[name.group(1)] = []
        elif current is not None:
            current.append(line)
    return sections


def _setting_names(section: list[str]) -> list[str]:
    """The settings a section's bullets lead with: the backticked names before the first colon, outside
    parentheses (``- `ngram`, `char_ngram`: the shingles`` names ngram and char_ngram)."""
    bullets: list[str] = []
    in_bullet = False
    for line in section:
        if line.startswith("- "):
            bullets.append(line[2:])
            in_bullet = True
        elif in_bullet and line.startswith("  ") and line.strip():
            bullets[-1] += " " + line.strip()  # the bullet's continuation
        else:
            in_bullet = False
    names = []
    for bullet in bullets:
        lead = re.sub(r"\([^()]*\)", "", bullet).split(":", 1)[0]
        names += re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", lead)
    return names


def test_stage_reference_documents_exactly_the_registered_stages():
    from dataprep.core.registry import stage_names

    documented = set(documented_stages(STAGES_DOC.read_text(encoding="utf-8")))
    registered = set(stage_names())
    assert sorted(registered - documented) == [], "stages missing from docs/stages.md: add a section for each"
    assert sorted(documented - registered) == [], "docs/stages.md documents stages the registry does not know"


def test_stage_reference_names_each_stages_kind_and_real_settings():
    from dataprep.core.registry import stage_class
    from dataprep.core.stage import DocumentStage

    for name, section in documented_stages(STAGES_DOC.read_text(encoding="utf-8")).items():
        cls = stage_class(name)
        first = next(line for line in section if line.strip())
        kind = "Document stage" if issubclass(cls, DocumentStage) else "Global stage"
        assert first.startswith(kind), f"docs/stages.md: {name} should start with {kind!r}: {first!r}"
        settings = _setting_names(section)
        assert settings, f"docs/stages.md names no settings of {name}"
        unknown = sorted(set(settings) - set(cls.model_fields))
        assert unknown == [], f"docs/stages.md names settings {name} does not have: {unknown}"
