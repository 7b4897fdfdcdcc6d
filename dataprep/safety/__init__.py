"""Safety scrubbing stages: URL blocklists (``url_filter``), toxicity scores (``toxicity``), adult,
gambling and contact spam (``harmful_content``) and PII redaction (``pii``). What they share (shipped
asset paths, list files, text folding and the word-list matcher) is in ``word_lists``.
"""
