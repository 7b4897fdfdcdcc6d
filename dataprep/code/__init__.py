"""Code as a source: the language of a file (``languages``), the licence of a repository and the licence
policy stage ``code_license`` (``licenses``). The readers of repositories, archives and The Stack-style
records are in ``dataprep.readers.code``."""
