"""The deployment files (issue 18; docs/operations.md, "Three machines"): Dockerfile, compose.yaml,
.dockerignore and .env.example. No container runtime runs here, so they are parsed, and every
claim they make is checked against the code that will run them: each `rebill` command line
through the CLI's own parser, each REBILL_* variable through the settings, the ports, the order
of the services, the user, the health checks.

Each check is a function that returns the problems it finds; the last tests break the files on
purpose and see each problem named, so that none of the checks passes whatever the files say.
"""

from __future__ import annotations

import copy
import http.server
import importlib
import inspect
import json
import re
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml  # PyYAML: installed with swagger-ui-py (a runtime dependency) and schemathesis

from rebill.cli import app as cli_app
from rebill.http.docs import is_docs_path
from rebill.settings import BACKGROUND_JOBS, RateLimit, Settings, background_jobs, log_format

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"


# --- The Dockerfile --------------------------------------------------------------------------

@dataclass
class Instruction:
    keyword: str
    args: str

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD/HEALTHCHECK CMD, None for the shell form."""
        text = self.args
        if self.keyword == "HEALTHCHECK":
            text = re.sub(r"^(--\S+\s+)*CMD\s+", "", text)
        if not text.startswith("["):
            return None
        value = json.loads(text)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), text
        return value


def instructions(text: str) -> list[Instruction]:
    """Docker's instruction syntax, as much as a Dockerfile of ours uses: comment lines (also
    between continued lines, which Docker drops), a trailing backslash continuing a line."""
    found: list[Instruction] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        current += line
        keyword, _, rest = current.partition(" ")
        found.append(Instruction(keyword.upper(), rest.strip()))
        current = ""
    assert not current, f"the Dockerfile ends inside a continued line: {current!r}"
    return found


@dataclass
class Image:
    """What the final stage of the Dockerfile makes: what a container of it runs and as whom."""

    stages: list[list[Instruction]]
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    user: str | None = None
    expose: set[int] = field(default_factory=set)
    healthcheck: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def final(self) -> list[Instruction]:
        return self.stages[-1]


def image_of(text: str) -> Image:
    stages: list[list[Instruction]] = []
    for instruction in instructions(text):
        if instruction.keyword == "FROM":
            stages.append([])
        assert stages, f"{instruction.keyword} before the first FROM"
        stages[-1].append(instruction)
    image = Image(stages)
    for instruction in image.final:
        if instruction.keyword == "ENTRYPOINT":
            image.entrypoint = instruction.exec_form() or ["/bin/sh", "-c", instruction.args]
            image.cmd = []  # Docker: a new ENTRYPOINT resets an inherited CMD
        elif instruction.keyword == "CMD":
            image.cmd = instruction.exec_form() or ["/bin/sh", "-c", instruction.args]
        elif instruction.keyword == "USER":
            image.user = instruction.args
        elif instruction.keyword == "EXPOSE":
            image.expose |= {int(port.split("/")[0]) for port in instruction.args.split()}
        elif instruction.keyword == "HEALTHCHECK":
            image.healthcheck = None if instruction.args == "NONE" else instruction.exec_form()
        elif instruction.keyword == "ENV":
            image.env.update(dict(re.findall(r"(\w+)=(\S+)", instruction.args)))
    return image


# --- The CLI and the settings ----------------------------------------------------------------

def script_name() -> str:
    """The command pyproject.toml installs, and the function it runs."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert len(scripts) == 1, scripts
    ((name, target),) = scripts.items()
    module, _, function = target.partition(":")
    assert callable(getattr(importlib.import_module(module), function)), target
    return name


@dataclass
class Invocation:
    command: tuple[str, ...]  # ("serve",), ("tokens", "create")...
    params: dict[str, Any]


def parse_rebill(argv: list[str]) -> Invocation:
    """``argv`` (after the script's name) through the CLI's own parser, options, types and ranges
    included, without running anything; raises what `rebill` would answer (a usage error)."""
    command: Any = typer.main.get_command(cli_app)
    ctx = command.context_class(command, info_name="rebill")
    names: list[str] = []
    args = list(argv)
    while hasattr(command, "commands"):  # a group: the next word names a command of it
        if not args:
            raise ValueError(f"`rebill {' '.join(names)}` names no command")
        name = args.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            raise ValueError(f"`rebill {' '.join(names + [name])}`: no such command")
        names.append(name)
        if hasattr(sub, "commands"):
            ctx = sub.context_class(sub, info_name=name, parent=ctx)
        command = sub
    parsed = command.make_context(names[-1], args, parent=ctx)
    params = dict(parsed.params)
    # The values the commands parse themselves (cli/serve.py, cli/worker.py).
    if params.get("jobs") is not None:
        background_jobs(params["jobs"])
    if params.get("log_format") is not None:
        log_format(params["log_format"])
    if params.get("rate_limit") is not None:
        RateLimit.parse(params["rate_limit"])
    return Invocation(tuple(names), params)


def settings_read() -> set[str]:
    """The REBILL_* variables the settings read (``Settings.from_env``)."""
    return set(re.findall(r"\"(REBILL_[A-Z_]+)\"", inspect.getsource(Settings.from_env)))


def effective_settings(env: dict[str, str], invocation: Invocation) -> Settings:
    """The settings a process starts with: the environment, then its command line's options (as
    cli/common.settings_for and cli/serve.py apply them)."""
    settings = Settings.from_env({k: v for k, v in env.items() if k.startswith("REBILL_")})
    params = invocation.params
    return settings.with_(
        database_url=params.get("database"),
        background_jobs=background_jobs(params["jobs"]) if params.get("jobs") else None,
        log_format=log_format(params["log_format"]) if params.get("log_format") else None,
    )


# --- compose.yaml ----------------------------------------------------------------------------

VARIABLE = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)")


class Unset(Exception):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}`` through a document."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value
    assert "$$" not in value, "no escaped dollars are expected in compose.yaml"

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(4)
        kind, word = match.group(2), match.group(3) or ""
        found = env.get(name)
        empty = found is None or (found == "" and kind is not None and kind.startswith(":"))
        if kind and kind.endswith("?") and empty:
            raise Unset(f"{name}: {word}")
        if kind and kind.endswith("-") and empty:
            return word
        return found or ""

    return VARIABLE.sub(one, value)


def variables(value: Any) -> set[str]:
    """Every variable compose.yaml interpolates."""
    if isinstance(value, dict):
        return set().union(*(variables(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(variables(v) for v in value)) if value else set()
    if isinstance(value, str):
        return {m.group(1) or m.group(4) for m in VARIABLE.finditer(value)}
    return set()


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def runs_rebill(service: dict[str, Any]) -> bool:
    """A service of this tree's image (built from it, or named rebill:TAG)."""
    return "build" in service or str(service.get("image", "")).startswith("rebill")


def argv(service: dict[str, Any], image: Image) -> list[str]:
    """What the container runs: its entrypoint (the image's unless it names one) and command."""
    entrypoint = service.get("entrypoint", image.entrypoint)
    command = service.get("command", image.cmd if "entrypoint" not in service else [])
    entrypoint = entrypoint.split() if isinstance(entrypoint, str) else list(entrypoint)
    command = command.split() if isinstance(command, str) else list(command)
    return [str(word) for word in entrypoint + command]


def ready_before(service: dict[str, Any], other: str, condition: str) -> bool:
    depends = service.get("depends_on") or {}
    if isinstance(depends, list):
        return False  # a list only orders the starts: nothing waits for a completion or a health
    return (depends.get(other) or {}).get("condition") == condition


def health_url(test: list[str] | None) -> str | None:
    """The URL a health check's `python -c` asks."""
    if not test:
        return None
    found = re.search(r"https?://[^'\"\s)]+", " ".join(test))
    return found.group(0) if found else None


def address_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def published(ports: list[Any]) -> dict[int, str]:
    """Container port -> the host side of each `ports:` entry (short syntax)."""
    found = {}
    for entry in ports:
        host, _, container = str(entry).rpartition(":")
        found[int(container.split("/")[0])] = host
    return found


def seconds(text: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"([\d.]+)(ms|s|m|h)", str(text)))


# --- The checks ------------------------------------------------------------------------------

def image_problems(text: str) -> list[str]:
    problems: list[str] = []
    image = image_of(text)
    for stage in image.stages:
        base = stage[0].args.split()[0]
        if base != "python:3.11-slim":
            problems.append(f"a stage starts from {base}, not python:3.11-slim")
    name = script_name()
    argv = image.entrypoint + image.cmd
    if any(i.keyword in {"ENTRYPOINT", "CMD"} and i.exec_form() is None for i in image.final):
        # /bin/sh as PID 1 keeps SIGTERM from rebill: a worker could not finish its batches.
        problems.append("ENTRYPOINT/CMD in the shell form")
    if not argv or argv[0] != name:
        problems.append(f"the image runs {argv[:1]}, not the entry point {name!r} pyproject.toml installs")
        return problems
    try:
        serve = parse_rebill(argv[1:])
    except Exception as exc:  # what `rebill` would refuse
        return problems + [f"the image's command {argv}: {exc}"]
    if serve.command != ("serve",):
        problems.append(f"the image runs `rebill {' '.join(serve.command)}` by default, not `rebill serve`")
    if serve.params.get("host") != "0.0.0.0":
        problems.append("rebill serve listens on loopback inside the container: no one outside reaches it")
    if serve.params.get("port") not in image.expose:
        problems.append(f"rebill serve's port {serve.params.get('port')} is not EXPOSEd ({image.expose})")

    # Non-root: the last USER is a user a RUN of the final stage creates, with its numeric id.
    user = (image.user or "root").split(":")[0]
    if user in {"root", "0"}:
        problems.append("the image runs as root")
    else:
        created = [i.args for i in image.final if i.keyword == "RUN" and "useradd" in i.args]
        uids = set(re.findall(r"--uid[ =](\d+)", " ".join(created)))
        names = set(re.findall(r"useradd\b.*?\s([a-z_][\w-]*)\s*(?:&&|$)", " ".join(created)))
        if user not in uids | names:
            problems.append(f"USER {user} is not a user the image creates ({uids | names})")
    keywords = [i.keyword for i in image.final]
    if "USER" in keywords and "RUN" in keywords[keywords.index("USER"):]:
        problems.append("a RUN after USER: the image's own steps should run before it drops root")

    # The project from pyproject.toml as a wheel, without the test extras.
    installs = [i.args for i in image.final if i.keyword == "RUN" and "pip install" in i.args]
    if not installs:
        problems.append("the final stage installs nothing with pip")
    for line in installs:
        if "[" in line or " -e " in line or "--editable" in line or "requirements" in line:
            problems.append(f"the install is not the bare project (extras, editable or another list): {line}")
    copied = {word.rstrip("/") for stage in image.stages[:-1] for i in stage if i.keyword == "COPY"
              for word in i.args.split()[:-1] if not word.startswith("--")}
    for needed in ("pyproject.toml", "src"):
        if needed not in copied:
            problems.append(f"the wheel stage does not copy {needed}")

    # The health check: the API's port, a path that needs no token (http/edge.py, http/docs.py).
    url = health_url(image.healthcheck)
    if url is None:
        problems.append("no HEALTHCHECK asking the API")
    else:
        parts = urlsplit(url)
        if parts.port != serve.params.get("port"):
            problems.append(f"the health check asks port {parts.port}, rebill serve listens on {serve.params.get('port')}")
        if not is_docs_path(parts.path):
            problems.append(f"the health check asks {parts.path}, which needs a token")
    return problems


def compose_problems(compose: dict[str, Any], image: Image) -> list[str]:
    problems: list[str] = []
    services: dict[str, Any] = compose.get("services") or {}
    expected_images = {"postgres": "postgres:15", "redis": "redis:7"}
    for name, wanted in expected_images.items():
        if (services.get(name) or {}).get("image") != wanted:
            problems.append(f"service {name} is not {wanted}")
    read = settings_read()
    runs: dict[str, tuple[Invocation, Settings, dict[str, str]]] = {}
    for name, service in services.items():
        if not runs_rebill(service):
            continue
        env = environment(service)
        for key in env:
            if key.startswith("REBILL_") and key not in read:
                problems.append(f"{name} sets {key}, which no setting reads")
        words = argv(service, image)
        if not words or words[0] != script_name():
            problems.append(f"{name} runs {words[:1]}, not rebill")
            continue
        try:
            invocation = parse_rebill(words[1:])
            runs[name] = (invocation, effective_settings(env, invocation), env)
        except Exception as exc:  # a usage error or a setting the settings refuse
            problems.append(f"{name}: `{' '.join(words)}`: {exc}")
    by_command: dict[str, list[str]] = {}
    for name, (invocation, _, _) in runs.items():
        by_command.setdefault(invocation.command[0], []).append(name)
    for command in ("migrate", "serve", "worker"):
        if command not in by_command:
            problems.append(f"no service runs `rebill {command}`")
    if problems:
        return problems

    migrate = by_command["migrate"][0]
    if services[migrate].get("restart", "no") != "no":
        problems.append(f"{migrate} restarts: a one-shot must end for the others to start")
    if not (services[migrate].get("healthcheck") or {}).get("disable"):
        problems.append(f"{migrate} inherits the image's API health check")
    if not ready_before(services[migrate], "postgres", "service_healthy"):
        problems.append(f"{migrate} may start before PostgreSQL accepts connections")
    urls = {name: settings.database_url for name, (_, settings, _) in runs.items()}
    if len(set(urls.values())) != 1:
        problems.append(f"the services use different databases: {urls}")
    postgres_env = environment(services["postgres"])
    db = urlsplit(next(iter(urls.values())))
    if (db.scheme, db.hostname, db.port or 5432, db.path.lstrip("/"), db.username, db.password) != (
            "postgresql", "postgres", 5432, postgres_env.get("POSTGRES_DB"), postgres_env.get("POSTGRES_USER"),
            postgres_env.get("POSTGRES_PASSWORD")):
        problems.append(f"REBILL_DATABASE_URL {db.geturl()} is not the postgres service's database")
    keys = {runs[name][1].secret_key for name in runs}
    if len(keys) != 1:
        problems.append("the services have different REBILL_SECRET_KEY: a worker could not read the stores' Stripe keys")

    for api in by_command["serve"]:
        invocation, settings, env = runs[api]
        service = services[api]
        for other in by_command["migrate"]:
            if not ready_before(service, other, "service_completed_successfully"):
                problems.append(f"{api} may start before {other} completes")
        if by_command.get("worker") and settings.background_jobs != "off":
            problems.append(f"{api} runs the background jobs ({settings.background_jobs}) beside a worker service")
        assert settings.background_jobs in BACKGROUND_JOBS
        port = invocation.params["port"]
        ports = published(service.get("ports") or [])
        if port not in ports:
            problems.append(f"{api} publishes {sorted(ports)}, rebill serve listens on {port}")
        if port not in image.expose:
            problems.append(f"{api}'s port {port} is not EXPOSEd by the image")
        if invocation.params.get("host") != "0.0.0.0":
            problems.append(f"{api} listens on {invocation.params.get('host')}: unreachable from its port mapping")
        if invocation.params.get("workers", 1) < 2:
            problems.append(f"{api} runs one API process")
        if settings.log_format != "json":
            problems.append(f"{api} logs {settings.log_format}, not json")
        redis = urlsplit(settings.redis_url or "")
        if redis.hostname != "redis" or not ready_before(service, "redis", "service_healthy"):
            problems.append(f"{api} does not share its rate limits through the redis service")
        check = service.get("healthcheck", {}).get("test") if "healthcheck" in service else image.healthcheck
        url = health_url(check)
        if url is None or urlsplit(url).port != port:
            problems.append(f"{api}'s health check asks {url}, not its port {port}")

    for worker in by_command.get("worker", []):
        invocation, settings, env = runs[worker]
        service = services[worker]
        for other in by_command["migrate"]:
            if not ready_before(service, other, "service_completed_successfully"):
                problems.append(f"{worker} may start before {other} completes")
        if settings.log_format != "json":
            problems.append(f"{worker} logs {settings.log_format}, not json")
        if seconds(service.get("stop_grace_period", "10s")) <= settings.jobs_stop_seconds:
            problems.append(f"{worker} is killed before its jobs may finish their batches "
                            f"(REBILL_JOBS_STOP_SECONDS={settings.jobs_stop_seconds:g})")
        # Its health check reads its own /metrics: on, on an address the check reaches.
        url = health_url((service.get("healthcheck") or {}).get("test"))
        host, port = address_port(settings.worker_metrics_address)
        if not settings.metrics or url is None or urlsplit(url).port != port or urlsplit(url).path != "/metrics":
            problems.append(f"{worker}'s health check asks {url}, not its metrics on {settings.worker_metrics_address} "
                            f"(REBILL_METRICS {'on' if settings.metrics else 'off'})")
        if host not in {"0.0.0.0", ""} or port not in image.expose:
            problems.append(f"{worker}'s metrics on {settings.worker_metrics_address}: not reachable by Prometheus "
                            f"(0.0.0.0 and an EXPOSEd port)")
    return problems


# --- Fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def compose(raw_compose: dict[str, Any]) -> dict[str, Any]:
    """compose.yaml as an operator who copied .env.example to .env runs it."""
    return interpolate(raw_compose, env_example())


# --- The files as they are -------------------------------------------------------------------

def test_the_image_runs_rebill_serve_as_a_non_root_user_with_the_project_installed_without_test_extras(dockerfile):
    assert image_problems(dockerfile) == []


def test_compose_runs_migrate_then_the_api_and_the_workers_on_one_database(compose, dockerfile):
    assert compose_problems(compose, image_of(dockerfile)) == []
    assert set(compose["services"]) == {"postgres", "redis", "migrate", "api", "worker"}


def test_compose_commits_no_secret_and_every_variable_it_reads_is_in_the_env_example(raw_compose):
    names = variables(raw_compose)
    example = env_example()
    assert names <= set(example), names - set(example)
    # The database's password has no default: without it compose refuses to start.
    without = {k: v for k, v in example.items() if k != "POSTGRES_PASSWORD"}
    with pytest.raises(Unset, match="POSTGRES_PASSWORD"):
        interpolate(raw_compose, without)
    # No literal secret: the password and the Fernet key come from the environment only.
    env = environment(raw_compose["x-rebill"])
    assert "${POSTGRES_PASSWORD" in env["REBILL_DATABASE_URL"]
    assert env["REBILL_SECRET_KEY"].startswith("${REBILL_SECRET_KEY")
    assert environment(raw_compose["services"]["postgres"])["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD")
    # The example's secret is empty and its password a placeholder, and .env stays out of builds.
    assert example["REBILL_SECRET_KEY"] == "" and example["POSTGRES_PASSWORD"] == "change-me"
    assert excluded(".env")


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    """.dockerignore as Docker reads it: each line a pattern (``!`` re-includes), the last that
    matches a path or one of its parent folders decides; ``**`` spans folders, ``*`` does not."""
    patterns = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
            regex += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
        patterns.append((negated, re.compile(regex + r"\Z")))
    return patterns


def excluded(path: str) -> bool:
    parts = path.split("/")
    result = False
    for negated, regex in dockerignore_patterns():
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            result = not negated
    return result


def test_the_build_context_holds_what_the_wheel_needs_and_none_of_the_venv_databases_or_secrets():
    for path in (".venv/bin/python", "var/rebill.db", "var/rebill.db-wal", ".git/HEAD", ".env", "tests/conftest.py",
                 "bench/results/run.json", "src/rebill/__pycache__/app.cpython-311.pyc", "src/rebill.egg-info/PKG-INFO",
                 "src/rebill/x.db", ".pytest_cache/v/cache", "build/lib/rebill/app.py", "dist/rebill.whl"):
        assert excluded(path), path
    needed = ["pyproject.toml"] + [
        p.relative_to(ROOT).as_posix() for p in (ROOT / "src" / "rebill").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts]
    assert len(needed) > 100  # the package, its migrations and their template
    assert [p for p in needed if excluded(p)] == []
    assert not excluded("src/rebill/db/migrations/script.py.mako") and not excluded("src/rebill/py.typed")


class _Answer(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_HEAD(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(self.status)
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[tuple[type[_Answer], int]]:
    handler = type("Answer", (_Answer,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield handler, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def run_check(test: list[str], port: int) -> int:
    """A health check's `python -c` against ``port`` instead of its own; its exit status."""
    assert test[-3:-1] == ["python", "-c"] or test[:2] == ["python", "-c"], test
    code = test[-1].replace(f":{urlsplit(health_url(test)).port}/", f":{port}/")  # type: ignore[arg-type]
    return subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, timeout=30).returncode


def test_the_health_checks_pass_on_an_answer_and_fail_on_an_error_or_on_silence(dockerfile, compose, answering):
    handler, port = answering
    checks = [image_of(dockerfile).healthcheck, compose["services"]["worker"]["healthcheck"]["test"]]
    for test in checks:
        assert test is not None
        handler.status = 200
        assert run_check(test, port) == 0, test
        handler.status = 503
        assert run_check(test, port) != 0, test
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused
    try:
        assert run_check(checks[0], silent.getsockname()[1]) != 0
    finally:
        silent.close()


# --- The checks can fail ---------------------------------------------------------------------

def test_the_cli_parser_refuses_what_rebill_would_refuse():
    assert parse_rebill(["worker", "--concurrency", "3"]).params["concurrency"] == 3
    assert parse_rebill(["serve"]).params["port"] == 8000  # the option's default
    # The one docs/operations.md runs through compose ("Three machines"): a command of a group.
    assert parse_rebill(["tokens", "create", "--store", "default", "--all-scopes"]).command == ("tokens", "create")
    for wrong in (["serv"], ["worker", "--concurrency", "0"], ["serve", "--wokers", "2"], ["serve", "--jobs", "some"],
                  ["serve", "--port", "http"], ["tokens"]):
        with pytest.raises(Exception):
            parse_rebill(wrong)
    assert {"REBILL_DATABASE_URL", "REBILL_BACKGROUND_JOBS", "REBILL_METRICS"} <= settings_read()


def _edit(compose: dict[str, Any], change: Any) -> dict[str, Any]:
    edited = copy.deepcopy(compose)
    change(edited["services"])
    return edited


COMPOSE_BREAKS = {
    "api runs the background jobs": lambda s: s["api"]["environment"].pop("REBILL_BACKGROUND_JOBS"),
    "api runs the background jobs (on)": lambda s: s["api"].update(
        command=s["api"]["command"] + ["--jobs", "on"]),
    "different databases": lambda s: s["worker"]["environment"].update(
        REBILL_DATABASE_URL="postgresql://rebill:x@postgres:5432/other"),
    "api may start before migrate completes": lambda s: s["api"]["depends_on"].pop("migrate"),
    "worker may start before migrate completes": lambda s: s["worker"].update(depends_on=["migrate", "postgres"]),
    "REBILL_METRIC, which no setting reads": lambda s: s["worker"]["environment"].update(REBILL_METRIC="on"),
    "REBILL_METRICS must be on or off": lambda s: s["api"]["environment"].update(REBILL_METRICS="yes please"),
    "is not in the range": lambda s: s["worker"].update(command=["worker", "--concurrency", "0"]),
    "no such command": lambda s: s["migrate"].update(command=["migrat"]),
    "publishes [8080]": lambda s: s["api"].update(ports=["127.0.0.1:8000:8080"]),
    "listens on 127.0.0.1": lambda s: s["api"].update(command=["serve", "--workers", "2"]),
    "killed before its jobs may finish": lambda s: s["worker"].update(stop_grace_period="10s"),
    "not its metrics on": lambda s: s["worker"]["environment"].pop("REBILL_METRICS"),
    "not reachable by Prometheus": lambda s: s["worker"]["environment"].update(
        REBILL_WORKER_METRICS_ADDRESS="127.0.0.1:9464"),
    "not the postgres service's database": lambda s: [
        s[n]["environment"].update(REBILL_DATABASE_URL="postgresql://rebill@db:5432/rebill")
        for n in ("api", "worker", "migrate")],
    "inherits the image's API health check": lambda s: s["migrate"].pop("healthcheck"),
    "service redis is not redis:7": lambda s: s["redis"].update(image="redis:6"),
    "does not share its rate limits": lambda s: s["api"]["environment"].pop("REBILL_REDIS_URL"),
}


@pytest.mark.parametrize("problem", COMPOSE_BREAKS)
def test_a_broken_compose_file_is_named(compose, dockerfile, problem):
    edited = _edit(compose, COMPOSE_BREAKS[problem])
    found = compose_problems(edited, image_of(dockerfile))
    assert any(problem in line for line in found), found


DOCKERFILE_BREAKS = {
    "runs as root": ("USER 10001:10001", "USER root"),
    "is not a user the image creates": ("USER 10001:10001", "USER 4242"),
    "shell form": ('CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]', "CMD serve --host 0.0.0.0"),
    "not the entry point 'rebill'": ('ENTRYPOINT ["rebill"]', 'ENTRYPOINT ["rebil"]'),
    "is not EXPOSEd": ("EXPOSE 8000 9464", "EXPOSE 8080 9464"),
    "which needs a token": ("8000/openapi.json", "8000/customers"),
    "the health check asks port 9000": ("127.0.0.1:8000/openapi.json", "127.0.0.1:9000/openapi.json"),
    "not the bare project": ("/tmp/wheels/rebill-*.whl", "'/tmp/wheels/rebill-*.whl[test]'"),
    "not python:3.11-slim": ("FROM python:3.11-slim\n", "FROM python:3.12\n"),
    "does not copy src": ("COPY src ./src\n", ""),
    "listens on loopback": ('"--host", "0.0.0.0", ', ""),
    "not `rebill serve`": ('CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]', 'CMD ["worker"]'),
}


@pytest.mark.parametrize("problem", DOCKERFILE_BREAKS)
def test_a_broken_dockerfile_is_named(dockerfile, problem):
    old, new = DOCKERFILE_BREAKS[problem]
    assert old in dockerfile, old
    found = image_problems(dockerfile.replace(old, new))
    assert any(problem in line for line in found), found
