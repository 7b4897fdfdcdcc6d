"""Train ``dataprep/assets/quality/page_quality.bin``, the ``quality_classifier`` stage's default model: a
small fastText classifier of a page's text as ``hq`` (running prose) or ``boilerplate`` (forms, cookie
walls, menus, comment spam, counted listings).

    python scripts/train_page_quality.py            # needs ../shared/data; rewrites the model

Nothing it reads is in the labelled filter evaluation (tests/data/filter_eval.jsonl):
- hq: the Leipzig web sentences of ../shared/data/langid (75 languages, 10 sentences a page, in
  paragraphs, some with a title, date or "Share" line around them as real pages have) and the demo
  articles written for ccpretrain (dataprep/assets/demo/good_*.yaml);
- boilerplate: the demo's site chrome, boilerplate and spam pages (dataprep/assets/demo) and pages
  composed here from the interface lines below: the chrome of six languages plus English and German
  form, consent, account, booking, listing and comment-spam lines.
The composition is seeded, so the model is the same on every run.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CCP_SHARED_DATA", ROOT.parent / "shared" / "data"))
DEMO = ROOT / "dataprep" / "assets" / "demo"
OUTPUT = ROOT / "dataprep" / "assets" / "quality" / "page_quality.bin"
PARAMS = {"dim": 16, "bucket": 20_000, "wordNgrams": 2, "minCount": 2, "epoch": 10, "lr": 0.3, "thread": 1}

_UI = {
    "en": {
        "form": [
            "First name",
            "Last name",
            "Email address",
            "Password",
            "Confirm password",
            "Username",
            "Forgot your password?",
            "Remember me",
            "Log in",
            "Sign in",
            "Sign up",
            "Create an account",
            "Register now",
            "Submit",
            "Send",
            "Required field",
            "Please enter a valid email address",
            "I agree to the terms and conditions",
            "Subscribe to our newsletter",
            "Subscribe now",
            "Thank you for subscribing!",
            "You can unsubscribe at any time.",
            "Please log in to continue",
            "You do not have permission to view this page.",
            "Your session has expired.",
            "Reset password",
        ],
        "consent": [
            "We use cookies",
            "Accept all cookies",
            "Only essential cookies",
            "Cookie settings",
            "Manage preferences",
            "Privacy settings",
            "Necessary",
            "Statistics",
            "Marketing",
            "External media",
            "Save settings",
            "This website uses cookies to improve your experience.",
            "By continuing to browse you agree to our use of cookies.",
            "Learn more",
            "Decline",
        ],
        "nav": [
            "Home",
            "About us",
            "Contact",
            "Blog",
            "Shop",
            "Cart",
            "Checkout",
            "My account",
            "Wishlist",
            "Help",
            "FAQ",
            "Sitemap",
            "Back to top",
            "Next page",
            "Previous page",
            "Load more",
            "Show all",
            "Read more",
            "Continue reading",
            "Share this page",
            "Print this page",
            "Follow us",
            "Facebook Twitter Instagram LinkedIn YouTube",
            "Related articles",
            "You may also like",
            "Popular posts",
            "Recent comments",
            "Categories",
            "Archives",
            "Tags",
            "Search",
            "Menu",
            "Copyright 2024 All rights reserved",
            "Terms of service",
            "Privacy policy",
            "Imprint",
        ],
        "booking": [
            "Select a date",
            "Check-in",
            "Check-out",
            "Adults",
            "Children",
            "Rooms",
            "Book now",
            "Availability",
            "Add to cart",
            "Quantity",
            "In stock",
            "Out of stock",
            "Free shipping",
            "Price",
            "Sort by",
            "Filter",
            "Results per page",
            "Page 1 of 12",
            "Mon Tue Wed Thu Fri Sat Sun",
            "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec",
            "View details",
            "Compare",
            "Reviews (0)",
        ],
        "spam": [
            "Great post! Visit my website for {x}.",
            "Thanks for sharing. Check out my site about {x}.",
            "Nice article, very helpful. Here is my page: {x}.",
            "Awesome blog! Take a look at {x} too.",
            "I really enjoyed this, bookmarked. Best {x} here.",
            "Buy {x} online, cheap {x}, best price {x}.",
            "Click here for {x}!",
            "Limited offer: {x} today only.",
            "Get {x} now and save 70%.",
        ],
        "goods": [
            "cheap watches",
            "payday loans",
            "casino bonus",
            "free spins",
            "diet pills",
            "seo services",
            "followers",
            "essay writing",
            "crypto signals",
            "replica bags",
            "cheap flights",
            "vpn deals",
        ],
    },
    "de": {
        "form": [
            "Vorname",
            "Nachname",
            "E-Mail-Adresse",
            "Passwort",
            "Passwort vergessen?",
            "Angemeldet bleiben",
            "Anmelden",
            "Registrieren",
            "Konto erstellen",
            "Absenden",
            "Pflichtfeld",
            "Newsletter abonnieren",
            "Jetzt abonnieren",
            "Vielen Dank für Ihre Anmeldung!",
            "Sie können sich jederzeit abmelden.",
            "Bitte melden Sie sich an",
            "Sie haben keine Berechtigung, diese Seite zu sehen.",
        ],
        "consent": [
            "Wir verwenden Cookies",
            "Alle akzeptieren",
            "Nur essenzielle Cookies akzeptieren",
            "Individuelle Datenschutzeinstellungen",
            "Cookie-Details",
            "Essenziell",
            "Statistiken",
            "Externe Medien",
            "Einstellungen speichern",
            "Ablehnen",
            "Mehr erfahren",
        ],
        "nav": [
            "Startseite",
            "Über uns",
            "Kontakt",
            "Impressum",
            "Datenschutz",
            "AGB",
            "Warenkorb",
            "Mein Konto",
            "Merkliste",
            "Hilfe",
            "Nach oben",
            "Weiter",
            "Zurück",
            "Mehr laden",
            "Alle anzeigen",
            "Weiterlesen",
            "Seite teilen",
            "Seite drucken",
            "Folgen Sie uns",
            "Das könnte Sie auch interessieren",
            "Beliebte Beiträge",
            "Kategorien",
            "Archiv",
            "Suche",
            "Alle Rechte vorbehalten",
        ],
        "booking": [
            "Datum wählen",
            "Anreise",
            "Abreise",
            "Erwachsene",
            "Kinder",
            "Jetzt buchen",
            "Verfügbarkeit",
            "In den Warenkorb",
            "Menge",
            "Auf Lager",
            "Versandkostenfrei",
            "Preis",
            "Sortieren nach",
            "Ergebnisse pro Seite",
            "Seite 1 von 12",
            "Details ansehen",
            "Bewertungen (0)",
        ],
    },
}
_KINDS = ("form", "consent", "nav", "booking")


def _demo_texts(name: str) -> list[str]:
    return [
        f"{page.get('title', '')}\n\n{page['text']}"
        for page in yaml.safe_load((DEMO / name).read_text())
        if page.get("text")
    ]


def content_pages(rng: random.Random) -> list[str]:
    """Pages of running prose, a share of them with the residue real pages keep around it."""
    by_lang: dict[str, list[str]] = {}
    with open(SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            by_lang.setdefault(row["lang"], []).append(row["text"])
    chrome = yaml.safe_load((DEMO / "chrome.yaml").read_text())
    pages = []
    for lang, sentences in sorted(by_lang.items()):
        for i in range(0, len(sentences), 10):
            chunk = sentences[i : i + 10]
            paragraphs = [" ".join(chunk[j : j + 3]) for j in range(0, len(chunk), 3)]
            if rng.random() < 0.4:  # a title, date, author or share line, as extraction leaves them
                ui = chrome.get(lang, chrome["en"])
                paragraphs = (
                    [chunk[0][:60], f"{rng.randint(1, 28)}.{rng.randint(1, 12)}.20{rng.randint(10, 24)}"]
                    + paragraphs
                    + [ui["share"]]
                )
            pages.append("\n\n".join(paragraphs))
    return pages + _demo_texts("good_en.yaml") + _demo_texts("good_multilingual.yaml")


def boilerplate_pages(rng: random.Random, n: int) -> list[str]:
    """Pages made of interface lines, comment spam and counted listings, in English and German mostly."""
    chrome = yaml.safe_load((DEMO / "chrome.yaml").read_text())
    pages = _demo_texts("boilerplate.yaml") + _demo_texts("spam.yaml")
    while len(pages) < n:
        lang = rng.choice(["en", "en", "de", "de"] + sorted(chrome))
        ui, words = chrome[lang], _UI.get(lang, _UI["en"])
        pool = [
            ui["skip"],
            ui["search"],
            ui["cookie"],
            ui["accept"],
            ui["reject"],
            ui["share"],
            ui["most_read"],
            ui["newsletter"],
            ui["subscribe"],
            ui["ad"],
            ui["rights"],
            *ui["nav"],
            *ui["footer"],
        ]
        kind = rng.choice(_KINDS + ("spam", "listing"))
        if kind == "spam":
            lines = [
                rng.choice(_UI["en"]["spam"]).format(x=rng.choice(_UI["en"]["goods"]))
                for _ in range(rng.randint(5, 14))
            ]
        elif kind == "listing":
            lines = [
                f"{rng.randint(2, 9_999_999):,} {rng.choice(pool + words['nav'])}" for _ in range(rng.randint(6, 20))
            ]
        else:
            lines = rng.sample(words[kind], min(len(words[kind]), rng.randint(5, 15)))
        lines += rng.sample(pool, rng.randint(2, 8))
        rng.shuffle(lines)
        pages.append("\n".join(lines))
    return pages


def main() -> int:
    from dataprep.classify.fasttext_classifier import FastTextClassifier

    rng = random.Random(0)
    good = content_pages(rng)
    bad = boilerplate_pages(rng, len(good) // 2)
    texts, labels = good + bad, ["hq"] * len(good) + ["boilerplate"] * len(bad)
    order = list(range(len(texts)))
    rng.shuffle(order)
    FastTextClassifier.train([texts[i] for i in order], [labels[i] for i in order], str(OUTPUT), seed=0, **PARAMS)
    print(
        f"{OUTPUT.relative_to(ROOT)}: {len(good)} hq and {len(bad)} boilerplate pages, "
        f"{OUTPUT.stat().st_size / 1e6:.1f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
