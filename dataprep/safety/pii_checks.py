"""The checks that confirm a PII candidate by its own characters, after a regex has proposed it.

Checksums (Luhn for cards, mod-97 for IBANs, ISO 7064 for Chinese resident IDs), the issuers' number
ranges and lengths, the SSA's never-issued social security numbers, and ``ipaddress`` for public
addresses. ``pii`` proposes the candidates and rejects those whose context says they are no PII.
"""

from __future__ import annotations

import datetime
import ipaddress

_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_IBAN_LENGTHS = dict(
    AD=24,
    AE=23,
    AL=28,
    AT=20,
    AZ=28,
    BA=20,
    BE=16,
    BG=22,
    BH=22,
    BR=29,
    BY=28,
    CH=21,
    CR=22,
    CY=28,
    CZ=24,
    DE=22,
    DK=18,
    DO=28,
    EE=20,
    EG=29,
    ES=24,
    FI=18,
    FO=18,
    FR=27,
    GB=22,
    GE=22,
    GI=23,
    GL=18,
    GR=27,
    GT=28,
    HR=21,
    HU=28,
    IE=22,
    IL=23,
    IQ=23,
    IS=26,
    IT=27,
    JO=30,
    KW=30,
    KZ=20,
    LB=28,
    LC=32,
    LI=21,
    LT=20,
    LU=20,
    LV=21,
    MC=27,
    MD=24,
    ME=22,
    MK=19,
    MR=27,
    MT=31,
    MU=30,
    NL=18,
    NO=15,
    PK=24,
    PL=28,
    PS=29,
    PT=25,
    QA=29,
    RO=24,
    RS=22,
    SA=24,
    SC=31,
    SE=24,
    SI=19,
    SK=24,
    SM=27,
    ST=25,
    SV=28,
    TL=23,
    TN=24,
    TR=26,
    UA=29,
    VA=22,
    VG=24,
    XK=20,
)
_CN_REGIONS = {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50,
               51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83, 91}  # fmt: skip
_CARD_PREFIXES = ("4", "34", "37", "36", "38", "39", "30", "35", "5", "2", "60", "62", "64", "65", "63", "67")


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(compact: str) -> bool:
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def cn_id_ok(s: str) -> bool:
    if int(s[:2]) not in _CN_REGIONS:
        return False
    try:
        born = datetime.date(int(s[6:10]), int(s[10:12]), int(s[12:14]))
    except ValueError:
        return False
    if born > datetime.date.today():
        return False
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], weights)) % 11]
    return s[17].upper() == check


def card_ok(digits: str) -> bool:
    n = len(digits)
    if not 13 <= n <= 19 or not digits.startswith(_CARD_PREFIXES) or not luhn_ok(digits):
        return False
    if digits.startswith(("34", "37")):
        return n == 15
    if digits.startswith("2"):  # Mastercard 2-series: 2221-2720
        return n == 16 and 2221 <= int(digits[:4]) <= 2720
    if digits.startswith("5"):  # Mastercard 51-55 (16), Maestro 50/56-58 (12-19)
        return n == 16 or digits[1] in "0678"
    return True


def iban_end(candidate: str) -> int | None:
    """Length of the valid IBAN at the start of ``candidate`` (the regex may take a following word
    such as "BANK" as one more group), or None."""
    want = _IBAN_LENGTHS.get(candidate[:2])
    seen = 0
    for end, ch in enumerate(candidate, 1):
        seen += ch != " "
        if seen == want:
            if end < len(candidate) and candidate[end] != " ":
                return None
            return end if iban_ok(candidate[:end].replace(" ", "")) else None
    return None


def ssn_ok(area: str, group: str, serial: str) -> bool:
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def ip_ok(candidate: str) -> bool:
    try:
        addr = ipaddress.ip_address(candidate)
    except ValueError:
        return False
    if addr.version == 6 and addr not in _GLOBAL_UNICAST:
        return False
    return addr.is_global and not addr.is_multicast
