"""The demo corpus: pages written for the purpose (dataprep/assets/demo/), rendered into a WARC crawl."""
