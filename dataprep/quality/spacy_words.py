"""spaCy's rule-based English tokenizer, reproduced without spaCy: the word counts FineWeb's and Gopher's
thresholds were tuned on.

Whitespace first, then spaCy's prefix/suffix/infix punctuation rules and English special cases
("don't" -> "do", "n't"; abbreviations kept whole), with a fast path for plain words and a cache of
punctuated chunks. Used for every space-delimited script (``languages.split_words``).
"""

from __future__ import annotations

import regex

# ---------------------------------------------------------------------------------------------
# Character classes (spaCy's tokenizer classes, expressed with Unicode properties)

_AL = r"\p{Ll}\p{Lo}"  # lower-case letters and letters without case
_AU = r"\p{Lu}\p{Lo}"
_A = r"\p{L}"
_ICON = r"\p{So}"
_PUNCT = "… …… , : ; ! ? ¿ ؟ ¡ ( ) [ ] { } < > _ # * & 。 ？ ！ ， 、 ； ： ～ · । ، ۔ ؛ ٪".split()
_QUOTES = "' \" ” “ ` ‘ ´ ’ ‚ , „ » « 「 」 『 』 （ ） 〔 〕 【 】 《 》 〈 〉 〈 〉 ⟦ ⟧".split()
_CURRENCY = "$ £ € ¥ ฿ US$ C$ A$ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₾ ₿".split()
_HYPHENS = "- – — -- --- —— ~".split()
_UNITS = (
    "km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s km/h "
    "kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % км км² км³ м м² м³ дм дм² дм³ см см² см³ мм "
    "мм² мм³ нм кг г мг м/с км/ч кПа Па мбар Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ тб"
).split()


def _alt(items: list[str]) -> str:
    return "|".join(regex.escape(x) for x in items)


_LETTER_CURRENCY = ("US$", "C$", "A$")
_QUOTE_CLASS = regex.escape("".join(_QUOTES))
_PUNCT_CLASS = regex.escape("".join(_PUNCT) + "|")
_PREFIX = regex.compile(
    "^(?:"
    + "|".join(
        [
            "§",
            "%",
            "=",
            "—",
            "–",
            r"\+(?![0-9])",
            _alt(_PUNCT),
            r"\.\.+",
            "…",
            _alt(_QUOTES),
            _alt(_CURRENCY),
            f"[{_ICON}]",
        ]
    )
    + ")"
)
_SUFFIX = regex.compile(
    "(?:"
    + "|".join(
        [
            _alt(_PUNCT),
            r"\.\.+",
            "…",
            _alt(_QUOTES),
            f"[{_ICON}]",
            "'s|'S|’s|’S|—|–",
            r"(?<=[0-9])\+",
            r"(?<=°[FfCcKk])\.",
            f"(?<=[0-9])(?:{_alt(_CURRENCY)})",
            f"(?<=[0-9])(?:{_alt(_UNITS)})",
            rf"(?<=[0-9{_AL}%²\-\+{_PUNCT_CLASS}{_QUOTE_CLASS}])\.",
            rf"(?<=[{_AU}][{_AU}])\.",
        ]
    )
    + ")$"
)
_INFIX = regex.compile(
    "|".join(
        [
            r"\.\.+",
            "…",
            f"[{_ICON}]",
            r"(?<=[0-9])[+\-\*^](?=[0-9-])",
            rf"(?<=[{_AL}{_QUOTE_CLASS}])\.(?=[{_AU}{_QUOTE_CLASS}])",
            rf"(?<=[{_A}]),(?=[{_A}])",
            rf"(?<=[{_A}0-9])(?:{_alt(_HYPHENS)})(?=[{_A}])",
            rf"(?<=[{_A}0-9])[:<>=/](?=[{_A}])",
        ]
    )
)
_URL = regex.compile(
    r"^(?:(?:[\w\+\-\.]{2,})://)?(?:\S+(?::\S*)?@)?(?:"
    r"(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168)(?:\.\d{1,3}){2})(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})"
    r"(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))"
    r"|(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    rf"(?:[{_AL}]{{2,63}}))(?::\d{{2,5}})?(?:[/?#]\S*)?$"
)

# ---------------------------------------------------------------------------------------------
# English special cases: contractions split, abbreviations kept whole


def _cased(word: str) -> list[str]:
    return list(dict.fromkeys([word, word[:1].upper() + word[1:]]))


def _english_specials() -> dict[str, tuple[str, ...]]:  # noqa: C901 - one table, built in steps
    specials: dict[str, tuple[str, ...]] = {}

    def add(parts: list[str], apostrophes: str = "'’", bare: bool = True) -> None:
        """parts like ["do", "n't"]; adds each apostrophe variant and, if ``bare``, the one without."""
        variants = [a for a in apostrophes] + ([""] if bare else [])
        for apo in variants:
            pieces = [p.replace("'", apo) for p in parts]
            for first in _cased(pieces[0]):
                key = first + "".join(pieces[1:])
                specials.setdefault(key, (first, *pieces[1:]))

    clitics = {
        "i": "'m 'ma 'd 'll 've",
        "you": "'d 'll 're 've",
        "he": "'d 'll 's",
        "she": "'d 'll 's",
        "it": "'d 'll 's",
        "we": "'d 'll 're 've",
        "they": "'d 'll 're 've",
        "that": "'d 'll 's",
        "this": "'d 'll 's",
        "these": "'d 'll 're 've",
        "those": "'d 'll 're 've",
        **{w: "'d 'll 're 's 've" for w in ("who", "what", "when", "where", "why", "how", "there")},
    }
    real_words = {"ill", "well", "hell", "shell", "shed", "its", "whore", "were"}  # never split without '
    for base, endings in clitics.items():
        for end in endings.split():
            parts = [base, *([end[:2], "a"] if end == "'ma" else [end])]
            add(parts, bare=base + end[1:] not in real_words)
            if end in ("'d", "'ll"):
                add([base, end, "'ve"])
    for base, end in (("how", "'d"),):
        add([base, end, "'y"], bare=False)
    negations = (
        "ai are ca could dare did does do had has have is may might must need ought sha should was were wo would"
    )
    with_have = "ca could did does do had may might must need ought sha should wo would"
    for verb in negations.split():
        add([verb, "n't"])
        if verb in with_have.split():
            add([verb, "n't", "'ve"])
    for verb in "could might must should would not".split():
        add([verb, "'ve"])
    add(["let", "'s"], bare=False)
    for first, second in (("can", "not"), ("gon", "na"), ("got", "ta")):
        for cased in _cased(first):
            specials[cased + second] = (cased, second)
    for apo in "'’":
        for first in _cased("c" + apo + "m"):
            specials[first + "on"] = (first, "on")
        specials[f"y{apo}all"] = (f"y{apo}", "all")
    specials["yall"] = ("y", "all")
    for hour in range(1, 13):
        for suffix in ("am", "pm", "a.m.", "p.m."):
            specials[f"{hour}{suffix}"] = (str(hour), suffix)
    whole_tokens = (
        "'em 'bout 'cause 'cos 'coz 'cuz 'nuff 'S 's 'd 'll 're ’em ’bout ’cause ’cos ’coz ’cuz ’nuff ’S ’s ’d ’ll ’re "
        "Mr. Mrs. Ms. Dr. Prof. St. Jr. Mt. Gen. Gov. Sen. Rep. Rev. Adm. Messrs. Inc. Ltd. Co. co. Corp. Bros. "
        "Jan. Feb. Mar. Apr. Jun. Jul. Aug. Sep. Sept. Oct. Nov. Dec. "
        "Ak. Ala. Ariz. Ark. Calif. Colo. Conn. Del. Fla. Ga. Ia. Id. Ill. Ind. Kan. Kans. Ky. La. Mass. Md. Mich. "
        "Minn. Miss. Mo. Mont. Neb. Nebr. Nev. Okla. Ore. Pa. Tenn. Va. Wash. Wis. "
        "D.C. N.C. N.D. N.H. N.J. N.M. N.Y. S.C. Ph.D. e.g. E.g. E.G. i.e. I.e. I.E. a.m. p.m. vs. v.s. "
        "and/or w/o C++ ma'am Ma'am ma’am Ma’am o'clock O'clock o’clock O’clock ' '' ’ ’’ "
        "doin doin' doin’ goin goin' goin’ havin havin' havin’ lovin lovin' lovin’ nothin nothin' nothin’ "
        "nuthin nuthin' nuthin’ somethin somethin' somethin’ ol ol' ol’ em ll nuff "
        "Doin Doin' Doin’ Goin Goin' Goin’ Havin Havin' Havin’ Lovin Lovin' Lovin’ Nothin Nothin' Nothin’ "
        "Nuthin Nuthin' Nuthin’ Somethin Somethin' Somethin’ Ol Ol' Ol’ "
        "'Cause 'Cos 'Coz 'Cuz ’Cause ’Cos ’Coz ’Cuz ‘S ‘s ä. ö. ü. "
        ":) :( :-) :-( ;) ;-) :D :P :p :/ :o :O :x :X :* :| :-/ :-D :-P :-p :)) :(( ;D =) =( =D <3 </3 ^_^ -_- "
        "o_O O_o o.O O.o XD xD XDD xDD (: ): (; (= (-: (-; [: [= ]= =] 8) 8-) ¯\\(ツ)/¯"
    )
    for token in whole_tokens.split():
        specials[token] = (token,)
    for letter in "abcdefghijklmnopqrstuvwxyz":
        specials[letter + "."] = (letter + ".",)
    for unit in "CFKcfk":
        specials[f"°{unit}."] = ("°", unit, ".")
    return specials


SPECIALS = _english_specials()


def _suffix(string: str, start: int):
    """The leftmost suffix match of ``string[start:]``. Suffixes are at most 5 characters except runs of
    dots, so only the tail is searched (lookbehinds still see the characters before it)."""
    last = string[-1]
    if last.isalnum() and last not in "sS²³":  # only units after a number end in a letter
        if last.isdecimal() or not any(c.isdecimal() for c in string):
            return None
    dots = len(string) - len(string.rstrip("."))
    return _SUFFIX.search(string, max(start, len(string) - max(6, dots)))


def _split_affixes(chunk: str) -> list[str]:
    """spaCy's algorithm on one whitespace-free chunk: peel prefixes and suffixes until a special case
    or nothing changes, then split the core on infixes (URLs stay whole)."""
    prefixes: list[str] = []
    suffixes: list[str] = []
    string = chunk
    last = -1
    while string and len(string) != last:
        if string in SPECIALS:
            break
        last = len(string)
        m = None if string[0].isalnum() and not string.startswith(_LETTER_CURRENCY) else _PREFIX.match(string)
        pre = m.end() if m else 0
        if pre and string[pre:] in SPECIALS:
            prefixes.append(string[:pre])
            string = string[pre:]
            break
        m = _suffix(string, pre)
        suf = (len(string) - m.start()) if m else 0
        if suf and string[:-suf] in SPECIALS:
            suffixes.append(string[-suf:])
            string = string[:-suf]
            break
        if pre and suf and pre + suf <= len(string):
            prefixes.append(string[:pre])
            suffixes.append(string[-suf:])
            string = string[pre:-suf]
        elif pre:
            prefixes.append(string[:pre])
            string = string[pre:]
        elif suf:
            suffixes.append(string[-suf:])
            string = string[:-suf]
    tokens = prefixes
    if string:
        if string in SPECIALS:
            tokens.extend(SPECIALS[string])
        elif _URL.match(string):
            tokens.append(string)
        elif string.isalnum():
            tokens.append(string)
        else:
            start = 0
            for m in _INFIX.finditer(string):
                if m.start() == 0:
                    continue
                if m.start() != start:
                    tokens.append(string[start : m.start()])
                if m.end() != m.start():
                    tokens.append(m.group())
                start = m.end()
            if string[start:]:
                tokens.append(string[start:])
    tokens.extend(reversed(suffixes))
    return _merge_specials(tokens) if len(tokens) > 1 else tokens


def _merge_specials(tokens: list[str]) -> list[str]:
    """Re-join neighbouring pieces that spell a special case (e.g. "z" "." -> "z.", ")" ":" -> "):"),
    as spaCy's special-case matcher does after affix splitting."""
    out: list[str] = []
    i, n = 0, len(tokens)
    while i < n:
        for j in range(min(n, i + 4), i + 1, -1):
            joined = "".join(tokens[i:j])
            if joined in SPECIALS:
                out.extend(SPECIALS[joined])
                i = j
                break
        else:
            out.append(tokens[i])
            i += 1
    return out


# Chunk -> tokens for chunks that need the affix rules; seeded with the special cases. Web text
# repeats the same punctuated words constantly, so most lookups hit (spaCy caches the same way).
_CACHE: dict[str, tuple[str, ...]] = {}
_CACHE_LIMIT = 200_000


def reset_cache() -> None:
    _CACHE.clear()
    _CACHE.update(SPECIALS)


reset_cache()


def split_words_spaced(text: str) -> list[str]:
    """Words of a space-delimited text, as spaCy's English tokenizer yields them (non-empty tokens)."""
    out: list[str] = []
    cache = _CACHE
    for chunk in text.split():
        hit = cache.get(chunk)
        if hit is not None:
            out += hit
        elif chunk.isalpha() or chunk.isdecimal():
            out.append(chunk)
        else:
            if len(cache) > _CACHE_LIMIT:
                reset_cache()
            hit = cache[chunk] = tuple(_split_affixes(chunk))
            out += hit
    return out
