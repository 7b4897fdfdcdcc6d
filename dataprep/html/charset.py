"""HTML bytes -> str: UTF-8 first, then the declared charset, then detection, which suits Common
Crawl better than trusting the declaration."""

from __future__ import annotations

import codecs
import re

from resiliparse.parse.encoding import bytes_to_str, detect_encoding, map_encoding_to_html5

# A <meta charset> naming UTF-16/32 is a lie whenever the parser can read it (WHATWG: treat it as UTF-8).
_WIDE_ENCODING = re.compile(r"utf-?(16|32)", re.IGNORECASE)


def decode_html(html: bytes, charset: str | None) -> str:
    """Bytes -> str. UTF-8 when the bytes are UTF-8, or mostly UTF-8: pages that mix in a few Latin-1 bytes
    are common and decoding them all as Windows-1252 would garble every other character. Otherwise
    the declared charset (WHATWG-mapped: gb2312 -> gbk, iso-8859-1 -> windows-1252) if it decodes
    cleanly, else uchardet's guess, else the declared one with replacement characters."""
    if html.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return html.decode("utf-16", errors="replace")
    try:
        return html.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        pass
    text = html.decode("utf-8", errors="replace")
    invalid = text.count("\ufffd")
    multibyte = len(text) - len(text.encode("ascii", errors="ignore")) - invalid
    if multibyte > invalid:
        return text.removeprefix("\ufeff")
    declared = map_encoding_to_html5(charset, fallback_utf8=False) if charset else None
    declared = declared or detect_encoding(html, from_html_meta=True)  # <meta charset>, else uchardet
    if declared and _WIDE_ENCODING.match(declared):  # no BOM, and ASCII markup readable: not UTF-16/32
        declared = None
    detected = detect_encoding(html)
    if _WIDE_ENCODING.match(detected):
        detected = "cp1252"
    declared = declared or detected
    for encoding in dict.fromkeys([declared, detected]):
        try:
            return html.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    return bytes_to_str(html, declared, errors="replace")
