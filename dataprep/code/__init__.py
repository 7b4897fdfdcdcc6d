"""Code as a source: the language of a file (``languages``), the licence of a repository and the licence
policy stage ``code_license`` (``licenses``). The code reader, of repositories, archives and The
Stack-style records, is ``dataprep.readers.code``."""
