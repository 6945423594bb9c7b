"""Log lines as text or as one JSON object each (``--log-format text|json``, ``REBILL_LOG_FORMAT``;
issue 18, docs/operations.md "Metrics and logs").

One configuration for every process: `rebill serve` hands ``logging_config`` to uvicorn, which
applies it in each worker process it starts; `rebill worker` and any other long-running command
call ``configure``. Lines go to standard error, Rebill's and uvicorn's alike; standard output
stays for what a command prints (`rebill serve`'s first token).

Besides what Rebill and uvicorn log, two loggers write a line of their own:

- ``rebill.requests``: one per request answered (``http/observe.py``): ``request_id``,
  ``store_id`` (null before a token named one), ``method``, ``path`` (no query string: it may
  carry a customer's email), ``route`` (the template), ``version``, ``status``, ``duration_ms``.
  ``REBILL_LOG_REQUESTS=off`` raises it to WARNING, and the request path then skips it whole.
- ``rebill.jobs``: one per run of a background job that did something or failed, and one per
  store a billing run paid charges of (``record.py``): ``job``, ``job_id`` (one run's lines
  share it), ``store_id`` where one store's, ``result``, ``duration_ms`` and the run's figures.

JSON lines carry ``time`` (UTC, milliseconds), ``level``, ``logger``, ``message``, ``pid`` (which
of the server's processes wrote it) and those fields, and ``exception`` with the traceback when there is one. Text lines carry the same
fields as ``key=value`` after the message, so that the two formats say the same.
"""

from __future__ import annotations

import logging
import logging.config
import os
import time
from typing import Any

import msgspec

from rebill.settings import LOG_FORMATS

# The attributes every LogRecord has; anything else on a record came in ``extra=``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message", "taskName"}
_encoder = msgspec.json.Encoder(enc_hook=str, decimal_format="string")
_second: tuple[int, str] = (0, "")
FIELDS = "rebill_fields"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's own fields: a request's line brings them in one dict (``log_request``),
    sparing the look through every attribute that ``extra=`` needs."""
    own = record.__dict__.get(FIELDS)
    if own is not None:
        return own  # type: ignore[no-any-return]
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


def _utc(created: float) -> str:
    """``2026-11-26T04:23:29.075+00:00``; the part up to the second is made once a second (a
    line per request would otherwise format the same date thousands of times)."""
    global _second
    whole = int(created)
    second = _second
    if second[0] != whole:
        second = _second = (whole, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)))
    return f"{second[1]}.{int((created - whole) * 1000):03d}+00:00"


class JsonFormatter(logging.Formatter):
    """A record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _utc(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "pid": os.getpid(),  # which of the server's processes (records leave it out: ``lighten``)
        }
        line.update(_fields(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # Each line is one object even when a message or a traceback spans lines.
        return _encoder.encode(line).decode()


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...``: the JSON line's fields, for a reader."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return _utc(record.created)  # UTC, as the JSON lines and every time Rebill stores

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        text = super().formatMessage(record)
        fields = _fields(record)
        if fields:
            text += " " + " ".join(f"{k}={'-' if v is None else v}" for k, v in fields.items())
        return text


def logging_config(log_format: str = "text", *, requests: bool = True, level: str = "INFO") -> dict[str, Any]:
    """The configuration (``logging.config.dictConfig``) of a Rebill process."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"rebill": {"()": f"{formatter.__module__}.{formatter.__qualname__}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "rebill", "stream": "ext://sys.stderr"}},
        "loggers": {
            "rebill": {"handlers": ["stderr"], "level": level, "propagate": False},
            "rebill.requests": {"level": level if requests else "WARNING"},
            "uvicorn": {"handlers": ["stderr"], "level": level, "propagate": False},
            # Rebill writes its own line per request, with the route, store and request id.
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
        # Libraries' warnings (APScheduler, SQLAlchemy...) in the same format.
        "root": {"handlers": ["stderr"], "level": "WARNING"},
    }


def configure(log_format: str = "text", *, requests: bool = True, level: str = "INFO") -> None:
    """Applies ``logging_config`` to this process: for commands that run without uvicorn
    (`rebill worker`). Call it before creating the app: the app looks at the request logger's
    level once, when it is built."""
    lighten()
    logging.config.dictConfig(logging_config(log_format, requests=requests, level=level))


def lighten() -> None:
    """Records stop computing what no line of Rebill's shows (the thread's name, the process's
    name and id: the JSON line asks for the id itself), as the logging HOWTO's "Optimization"
    section advises: with a line per request, each costs every request."""
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


requests_log = logging.getLogger("rebill.requests")
jobs_log = logging.getLogger("rebill.jobs")
_INFO = logging.INFO
_REQUEST_MESSAGE = "%s %s %d %.1f ms"


def requests_logged() -> bool:
    return requests_log.isEnabledFor(logging.INFO)


def log_request(request_id: str, store_id: int | None, method: str, path: str, route: str, version: str,
                status: int, seconds: float) -> None:
    """The request's line. Its record is made and handed to the handlers straight: the logger's
    own path (``info``) looks for the caller's file and line in the stack, which no line shows.
    The caller knows the logger takes INFO (``requests_logged``, once, when the app is built)."""
    ms = round(seconds * 1000, 3)
    record = requests_log.makeRecord("rebill.requests", _INFO, "", 0, _REQUEST_MESSAGE, (method, path, status, ms),
                                     None, extra={FIELDS: {"request_id": request_id, "store_id": store_id,
                                                           "method": method, "path": path, "route": route,
                                                           "version": version, "status": status, "duration_ms": ms}})
    requests_log.handle(record)
