"""code_secrets: planted secrets become typed placeholders and are counted; look-alikes (documentation
keys, placeholders, references, hashes, UUIDs) stay (the labelled set: tests/bench/test_secrets_eval.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dataprep.core.config import parse_stages

CONFIG = """
aws_access_key_id = "AKIA2E0A8F3B244C9986"
example_key = "AKIAIOSFODNN7EXAMPLE"
password = "Tr0ub4dor&3x"
db_password = os.environ["DB_PASSWORD"]
api_key = "your-api-key-here"
url = "postgresql://app:q8XnR2vLk4pZ@db.internal/main"
commit = "9fceb02d0ae598e95dc970b74767f19372d61af8"
request_id = "3f2b8c1e-4d5a-4e6f-9a7b-1c2d3e4f5a6b"
"""


@pytest.fixture
def redacted_config() -> tuple[pa.Table, object]:
    """CONFIG through the code_secrets stage: the kept table and the stage (for its counters)."""
    stage = parse_stages([{"stage": "code_secrets"}])[0]
    return stage.apply(pa.table({"id": ["a"], "text": [CONFIG]})).kept, stage


def test_secrets_are_replaced_by_placeholders(redacted_config):
    text = redacted_config[0].column("text")[0].as_py()
    assert 'aws_access_key_id = "<SECRET_AWS_KEY>"' in text and 'password = "<SECRET_PASSWORD>"' in text
    assert "postgresql://app:<SECRET_PASSWORD>@db.internal/main" in text


def test_secret_look_alikes_stay(redacted_config):
    text = redacted_config[0].column("text")[0].as_py()
    for stays in ("AKIAIOSFODNN7EXAMPLE", 'os.environ["DB_PASSWORD"]', "your-api-key-here",
                  "9fceb02d0ae598e95dc970b74767f19372d61af8", "3f2b8c1e-4d5a-4e6f-9a7b-1c2d3e4f5a6b"):  # fmt: skip
        assert stays in text


def test_secrets_are_counted_by_kind(redacted_config):
    out, stage = redacted_config
    assert out.column("secrets_aws_key")[0].as_py() == 1 and out.column("secrets_password")[0].as_py() == 1
    assert out.column("secrets_count")[0].as_py() == 3
    assert stage.take_counters() == {
        "redacted:aws_key": 1,
        "redacted:password": 1,
        "redacted:connection_string": 1,
    }  # the stats' counts


def test_an_unknown_type_is_a_config_error():
    with pytest.raises(ValueError, match="aws_keys"):
        parse_stages([{"stage": "code_secrets", "types": ["aws_keys"]}])
