"""A repository's licence as an SPDX id or expression, and the ``code_license`` policy stage.

Where a licence comes from, first found wins:
- an installed package (``*.dist-info``): its METADATA's ``License-Expression`` (PEP 639, already SPDX), else
  its licence files (``licenses/`` or ``License-File:``), else a ``License:`` field that is an SPDX id or a
  known name, else its ``License ::`` classifiers;
- a repository: its LICENSE / LICENCE / COPYING / UNLICENSE file.
A licence file is matched by pre-commit's ``identify.license_id`` (the whole text within 5% edit distance of
one of choosealicense.com's texts; offline, no model) and, where that finds none (a file that carries
several licences, or a licence with a preamble, as CPython's does), by the first licence title or
characteristic sentence in it (``_TITLES``).
"""

from __future__ import annotations

import re
import tempfile
from email.parser import HeaderParser
from typing import Iterable

import pyarrow as pa
from identify import identify
from pydantic import Field

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage

LICENSE_NAMES = re.compile(r"^(licen[cs]e|copying|unlicense)([.\-_].*)?$", re.IGNORECASE)
NO_LICENSE = "none"  # the license column of a file whose repository names no licence we can tell

# The Stack's idea of permissive: use, change and redistribute without passing the licence on to the model.
PERMISSIVE = [
    "MIT",
    "MIT-0",
    "Apache-2.0",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "0BSD",
    "ISC",
    "PSF-2.0",
    "Python-2.0",
    "Unlicense",
    "CC0-1.0",
    "Zlib",
    "BSL-1.0",
    "X11",
    "UPL-1.0",
    "BlueOak-1.0.0",
    "CC-BY-4.0",
    "WTFPL",
    "NCSA",
    "PostgreSQL",
    "HPND",
]

# Licence titles or characteristic sentences, for texts ``identify`` cannot match whole; the first in the text wins.
_TITLES = [
    (re.compile(pattern), spdx)
    for pattern, spdx in [
        (r"PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2", "PSF-2.0"),
        (r"Apache License,?\s+Version 2\.0", "Apache-2.0"),
        (r"GNU AFFERO GENERAL PUBLIC LICENSE\s+Version 3", "AGPL-3.0"),
        (r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 3", "LGPL-3.0"),
        (r"GNU LESSER GENERAL PUBLIC LICENSE\s+Version 2\.1", "LGPL-2.1"),
        (r"GNU (?:LIBRARY )?GENERAL PUBLIC LICENSE\s+Version 2", "GPL-2.0"),
        (r"GNU GENERAL PUBLIC LICENSE\s+Version 3", "GPL-3.0"),
        (r"Mozilla Public License,? [Vv](?:ersion|\.) ?2\.0", "MPL-2.0"),
        (r"Eclipse Public License - v 2\.0", "EPL-2.0"),
        (r"Boost Software License - Version 1\.0", "BSL-1.0"),
        (r"This is free and unencumbered software released into the public domain", "Unlicense"),
        (r"CC0 1\.0 Universal", "CC0-1.0"),
        (
            r"Permission to use, copy, modify, and(?:/or)? distribute this software for any\s+purpose with "
            r"or without fee",
            "ISC",
        ),
        (r"Permission is hereby granted, free of charge, to any person obtaining", "MIT"),
        (
            r"Redistribution and use in source and binary forms(?:(?!\n\s*\n\s*THIS "
            r"SOFTWARE)[\s\S]){0,1500}?Neither the name",
            "BSD-3-Clause",
        ),
        (r"Redistribution and use in source and binary forms", "BSD-2-Clause"),
        (r"This software is provided 'as-is', without any express or implied", "Zlib"),
    ]
]

# Trove classifiers (``License :: OSI Approved :: ...``, last part) -> SPDX
_CLASSIFIERS = {
    "MIT License": "MIT",
    "MIT No Attribution License (MIT-0)": "MIT-0",
    "Apache Software License": "Apache-2.0",
    "BSD License": "BSD-3-Clause",
    "ISC License (ISCL)": "ISC",
    "Python Software Foundation License": "PSF-2.0",
    "The Unlicense (Unlicense)": "Unlicense",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "GNU General Public License v2 (GPLv2)": "GPL-2.0",
    "GNU General Public License v3 (GPLv3)": "GPL-3.0",
    "GNU Lesser General Public License v3 (LGPLv3)": "LGPL-3.0",
    "GNU Lesser General Public License v2 (LGPLv2)": "LGPL-2.0",
    "GNU Affero General Public License v3": "AGPL-3.0",
    "Zope Public License": "ZPL-2.1",
    "Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "zlib/libpng License": "Zlib",
    "CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
}
_KNOWN_IDS = {spdx for _, spdx in _TITLES} | set(_CLASSIFIERS.values()) | set(PERMISSIVE)
_NAMES = {
    "mit": "MIT",
    "apache 2.0": "Apache-2.0",
    "apache-2": "Apache-2.0",
    "apache 2": "Apache-2.0",
    "apache license 2.0": "Apache-2.0",
    "apache license, version 2.0": "Apache-2.0",
    "bsd": "BSD-3-Clause",
    "new bsd": "BSD-3-Clause",
    "bsd license": "BSD-3-Clause",
    "psf": "PSF-2.0",
    "isc": "ISC",
    "mpl 2.0": "MPL-2.0",
}


def is_license_file(name: str) -> bool:
    """LICENSE, LICENSE.txt, LICENCE-MIT, COPYING, UNLICENSE, ... (not license.py)."""
    return bool(LICENSE_NAMES.match(name)) and not name.lower().endswith((".py", ".js", ".go", ".rs", ".html"))


def license_of_text(text: str) -> str | None:
    """The SPDX id of a licence file's text, or None when it matches none we know."""
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt") as fh:  # identify reads a file
        fh.write(text)
        fh.flush()
        found = identify.license_id(fh.name)
    if found:
        return found
    hits = [(m.start(), spdx) for pattern, spdx in _TITLES if (m := pattern.search(text))]
    return min(hits)[1] if hits else None


def license_of_files(texts: Iterable[str]) -> str | None:
    """One licence for a repository's licence files: the one they name, or ``A AND B`` for several."""
    found = sorted({spdx for text in texts if (spdx := license_of_text(text))})
    return " AND ".join(found) if found else None


def license_of_metadata(metadata: str, license_texts: Iterable[str] = ()) -> str | None:
    """An installed package's licence from its METADATA text and licence files (order in the module doc)."""
    headers = HeaderParser().parsestr(metadata, headersonly=True)
    if expression := (headers.get("License-Expression") or "").strip():
        return expression
    if found := license_of_files(license_texts):
        return found
    declared = " ".join((headers.get("License") or "").split())
    if declared in _KNOWN_IDS:
        return declared
    if declared.lower() in _NAMES:
        return _NAMES[declared.lower()]
    classified = sorted(
        {
            _CLASSIFIERS[c.rsplit("::", 1)[-1].strip()]
            for c in headers.get_all("Classifier") or []
            if c.startswith("License ::") and c.rsplit("::", 1)[-1].strip() in _CLASSIFIERS
        }
    )
    return " OR ".join(classified) if classified else None


def license_ids(expression: str) -> list[list[str]]:
    """An SPDX expression as alternatives, each the ids it needs together: ``MIT OR (A AND B)`` ->
    ``[["MIT"], ["A", "B"]]``. ``WITH`` exceptions stay with their id; nesting deeper than this is flattened."""
    alternatives = re.split(r"\s+OR\s+", expression.replace("(", " ").replace(")", " ").strip(), flags=re.IGNORECASE)
    return [
        [i.strip() for i in re.split(r"\s+AND\s+", alt, flags=re.IGNORECASE) if i.strip()]
        for alt in alternatives
        if alt.strip()
    ]


@register("code_license")
class CodeLicense(DocumentStage):
    """Keeps code files whose repository's licence the policy allows; drops the rest as ``license:<id>``
    (``license:none`` when no licence was found). An expression is allowed when one of its alternatives
    (``OR``) is made only of allowed ids (``AND``) and none of them is denied. Rows without a
    ``license`` column (not code) pass untouched."""

    allow: list[str] = Field(
        default_factory=lambda: list(PERMISSIVE), description="SPDX ids kept (default: permissive licences)"
    )
    deny: list[str] = Field(
        default_factory=list, description="SPDX ids dropped even if allowed (e.g. one you must not train on)"
    )
    keep_unlicensed: bool = Field(
        False, description="keep files whose repository names no licence (The Stack v1 drops them)"
    )

    def allowed(self, expression: str | None) -> bool:
        if not expression or expression == NO_LICENSE:
            return self.keep_unlicensed
        allowed = {a.lower() for a in self.allow} - {d.lower() for d in self.deny}
        return any(all(i.lower() in allowed for i in alt) for alt in license_ids(expression))

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        if "license" not in batch.column_names:
            return batch, [None] * batch.num_rows
        return batch, [
            None if self.allowed(lic) else f"license:{lic or NO_LICENSE}" for lic in batch.column("license").to_pylist()
        ]
