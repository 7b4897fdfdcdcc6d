"""Deduplication and decontamination.

Global stages (their Spark runners live on the Spark side):
``exact_dedup`` (hash of normalized text), ``minhash_dedup`` (MinHash LSH), both able to save and load
indexes of earlier runs (``index.py``); ``paragraph_dedup`` (lines, paragraphs, sentence spans);
``url_dedup`` (normalized URL). Document stage: ``decontaminate`` (n-gram overlap with evaluation sets).
"""
