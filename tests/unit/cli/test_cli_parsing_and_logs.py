"""The ``braid`` argument parser and the logfmt formatter (pure: no process, no files)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from braid.cli.logs import LogfmtFormatter
from braid.cli.main import _standalone_overrides, build_parser


def test_standalone_flags_become_config_overrides() -> None:
    args = build_parser().parse_args(
        [
            "standalone",
            "--data-dir",
            "/d",
            "--port",
            "7000",
            "--web-port",
            "7001",
            "--bind",
            "0.0.0.0",
            "--advertised-address",
            "broker.local",
            "--log-level",
            "debug",
        ]
    )
    assert args.log_level == "DEBUG"
    assert _standalone_overrides(args) == {
        "dataDir": "/d",
        "brokerServicePort": "7000",
        "webServicePort": "7001",
        "bindAddress": "0.0.0.0",
        "advertisedAddress": "broker.local",
    }
    assert args.config is None


def test_unset_flags_do_not_override_the_file_or_environment() -> None:
    args = build_parser().parse_args(["standalone", "--config", "conf/broker.conf"])
    assert _standalone_overrides(args) == {}
    assert args.config == Path("conf/broker.conf")
    assert args.log_level is None  # the command picks its own default


def test_help_explains_commands_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as top:
        build_parser().parse_args(["--help"])
    assert top.value.code == 0
    text = capsys.readouterr().out
    assert "standalone" in text and "demo" in text
    with pytest.raises(SystemExit):
        build_parser().parse_args(["standalone", "--help"])
    text = capsys.readouterr().out
    assert "examples:" in text
    assert "BRAID_" in text
    assert "brokerServicePort" in text


def test_bad_flag_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["standalone", "--port", "many"])
    assert info.value.code == 2
    assert "--port" in capsys.readouterr().err


def _record(msg: str, **kwargs: object) -> logging.LogRecord:
    record = logging.LogRecord("braid.test", logging.INFO, __file__, 1, msg, (), None)
    for key, value in kwargs.items():
        setattr(record, key, value)
    return record


def test_logfmt_is_one_line_with_quoted_values_and_fields() -> None:
    line = LogfmtFormatter().format(
        _record('topic "a" loaded\nnext', fields={"url": "pulsar://h:1", "note": "two words"})
    )
    assert "\n" not in line
    assert "level=INFO" in line and "logger=braid.test" in line
    assert 'msg="topic \\"a\\" loaded\\nnext"' in line
    assert "url=pulsar://h:1" in line
    assert 'note="two words"' in line


def test_logfmt_folds_a_traceback_into_one_field() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = _record("failed", exc_info=sys.exc_info())
    line = LogfmtFormatter().format(record)
    assert "\n" not in line
    assert "exc=" in line and "ValueError: boom" in line
