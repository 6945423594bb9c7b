"""schemathesis against a running `rebill serve`, each API version's document (issue 17, "Proof"):
no 5xx, every reply inside the document (status, content type, headers, body), and no invalid
data accepted. The run is schemathesis' own command line with tests/fuzz/schemathesis.toml, so
`make fuzz` runs the very same thing longer; a failure shows schemathesis' report.

A fixed seed and a bounded number of examples per operation (``REBILL_FUZZ_EXAMPLES``, 6 here:
the coverage phase's boundary cases come on top, whatever the number) keep it to a minute or two
a version on two cores. `make fuzz` sets 100; ``REBILL_FUZZ_SEED`` changes the seed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebill.api.openapi import document
from rebill.api.versions import VERSIONS as ALL_VERSIONS
from rebill.errors import NOT_READABLE_HTTP
from tests.served import TOKEN_HEADER, Server, serve

CONFIG = Path(__file__).with_name("schemathesis.toml")
VERSIONS = ("2021-01", "2021-11")
EXAMPLES = int(os.environ.get("REBILL_FUZZ_EXAMPLES", "6"))
SEED = os.environ.get("REBILL_FUZZ_SEED", "")  # else the configuration's
# The CLI's entry point, run by this interpreter (the one the project's environment installed).
SCHEMATHESIS = [sys.executable, "-c", "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"]


# What schemathesis' coverage phase sends as "unspecified HTTP methods" unless told otherwise.
PROBED = ("delete", "get", "options", "patch", "post", "put", "query", "trace")
METHODS = {"delete", "get", "patch", "post", "put"}


def other_versions_methods() -> dict[str, set[str]]:
    """Path -> the methods some version serves on it but another does not."""
    served = {name: {path: {m for m in item if m in METHODS} for path, item in document(name)["paths"].items()}
              for name in ALL_VERSIONS}
    out: dict[str, set[str]] = {}
    for name, paths in served.items():
        for path, methods in paths.items():
            missing = set().union(*(other.get(path, set()) for other in served.values())) - methods
            if missing:
                out.setdefault(path, set()).update(missing)
    return out


def configuration(folder: Path) -> Path:
    """tests/fuzz/schemathesis.toml, and for each path where the versions serve different
    methods, the coverage phase's probe of unspecified methods without those: decisions §2.1
    answers the other version's endpoint 501 (spec 01's "not implemented in the current
    version"), which not_a_server_error would rightly call a 5xx everywhere else."""
    blocks = [CONFIG.read_text()]
    for path, methods in sorted(other_versions_methods().items()):
        probed = ", ".join(f'"{m}"' for m in PROBED if m not in methods)
        other = ", ".join(sorted(methods)).upper()
        blocks.append(f"[[operations]]  # {other} {path}: the other version's endpoint, 501\n"
                      f'include-path = "{path}"\nphases.coverage.unexpected-methods = [{probed}]\n')
    written = folder / "schemathesis.toml"
    written.write_text("\n".join(blocks))
    return written


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("fuzz")) as running:
        yield running


def schemathesis_command(server: Server, version: str, folder: Path, examples: int = EXAMPLES) -> list[str]:
    command = [*SCHEMATHESIS, "--config-file", str(configuration(folder)), "--no-color", "run",
               f"{server.base_url}/openapi.json?version={version}", "--url", server.base_url,
               "--header", f"{TOKEN_HEADER}: {server.token}", "--header", f"X-Service-Version: {version}",
               "--max-examples", str(examples), "--report", "junit", "--report-dir", str(folder)]
    if SEED:
        command += ["--seed", SEED]
    return command


@pytest.mark.parametrize("version", VERSIONS)
def test_schemathesis_finds_nothing(server: Server, version: str, tmp_path: Path) -> None:
    started = time.monotonic()
    ran = subprocess.run(schemathesis_command(server, version, tmp_path), capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "120"}, timeout=3600)
    report = ran.stdout + ran.stderr
    phases = [line.strip() for line in report.splitlines() if "(in " in line]  # each phase and its time
    print(f"schemathesis, {version}: {time.monotonic() - started:.1f} s; {'; '.join(phases)}\n{report[-2000:]}")
    assert server.process.poll() is None, f"rebill serve died:\n{server.output()}"
    assert ran.returncode == 0, f"schemathesis found problems in {version}:\n{report}\n--- server log:\n" \
                                f"{server.output(20000)}"


def test_a_request_target_over_64_kib_answers_the_documented_400(server: Server) -> None:
    """What schemathesis met first on GET /products (a filter of thousands of ids): the HTTP server
    refuses the request line itself, before the API, in the error shape (http/protocol.py); the
    document says so for every operation."""
    import urllib.error
    import urllib.request
    sent = urllib.request.Request(f"{server.base_url}/products?ids={'1,' * 33_000}1", headers={
        TOKEN_HEADER: server.token, "X-Service-Version": "2021-01"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(sent, timeout=30)
    assert refused.value.code == 400
    assert refused.value.headers["content-type"] == "application/json"
    assert len(refused.value.headers["x-request-id"]) == 32
    assert json.loads(refused.value.read()) == {"errors": NOT_READABLE_HTTP}
    for version in VERSIONS:
        assert document(version)["paths"]["/products"]["get"]["responses"]["400"] == {
            "$ref": "#/components/responses/NotReadableHttp"}
