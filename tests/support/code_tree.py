"""A small tree of code repositories for the code reader's and the code preset's tests: two repositories (one
a git checkout, one GPL-licensed), files of several languages, and files that cannot be text."""

from __future__ import annotations

from pathlib import Path

MIT = """MIT License

Copyright (c) 2024 Someone

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""
GPL3 = (
    "                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n\n Everyone "
    "is permitted to copy...\n"
)

# repository/path -> bytes: two repositories (one a git checkout), files of several kinds
TREE = {
    "tool/LICENSE": MIT.encode(),
    "tool/.git/HEAD": b"ref: refs/heads/main\n",
    "tool/src/app.py": b"def main():\n    return 42\n",
    "tool/src/lib.rs": b'fn main() { println!("hi"); }\n',
    "tool/bin/run": b"#!/usr/bin/env python3\nprint('run')\n",
    "tool/src/logo.png": b"\x89PNG\r\n\x1a\n\0\0",
    "tool/src/blob.py": b"x = 1\n\0\0\0binary",
    "tool/src/latin.py": "s = 'caf\u00e9'\n".encode("latin-1"),
    "tool/src/__init__.py": b"",
    "tool/README": b"A tool.\n",
    "gplrepo/COPYING": GPL3.encode(),
    "gplrepo/main.c": b"int main(void) { return 0; }\n",
}
EXPECTED_KEPT = {
    ("tool", "src/app.py", "Python", "MIT"),
    ("tool", "src/lib.rs", "Rust", "MIT"),
    ("tool", "bin/run", "Python", "MIT"),
    ("tool", "LICENSE", None, "MIT"),
    ("tool", "README", None, "MIT"),
    ("gplrepo", "COPYING", None, "GPL-3.0"),
    ("gplrepo", "main.c", "C", "GPL-3.0"),
}
EXPECTED_DROPPED = {"binary": 2, "undecodable": 1, "empty": 1}


def write_tree(root: Path, files: dict[str, bytes] = TREE) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root
