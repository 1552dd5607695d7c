"""Content digests of code (evaluators.core.source): what makes an analysis's content version change."""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from agent_factory.evaluators.components.execution import analysis as execution
from agent_factory.evaluators.core import Analysis, Result
from agent_factory.evaluators.core.source import closure_digest, function_digest, module_digest

BODY = '''
LIMIT = {limit}


def probe(obs, pack):
    return [r for r in obs.layer("trace")][:LIMIT]


def other(obs, pack):
    return []
'''


@pytest.fixture
def sourceless() -> Iterator[list[str]]:
    """Modules built from strings (no file, so no source), removed from `sys.modules` afterwards."""
    names: list[str] = []
    yield names
    for n in names:
        sys.modules.pop(n, None)


def _module(names: list[str], text: str) -> ModuleType:
    name = f"af_sourceless_{len(names)}"
    module = ModuleType(name)
    exec(compile(text, f"<{name}>", "exec"), module.__dict__)
    names.append(name)
    sys.modules[name] = module
    return module


def test_a_module_digest_is_the_sha256_of_its_source_as_rule_identities_had_it() -> None:
    source = inspect.getsource(execution)
    assert module_digest(execution) == hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def test_the_content_version_keeps_the_label_and_changes_with_every_declared_field() -> None:
    a = Analysis("execution.failure_rate", "2", execution.failure_rate)
    assert a.content_version.startswith("2+") and len(a.content_version) == len("2+") + 12
    assert a.content_version == Analysis("execution.failure_rate", "2", execution.failure_rate).content_version
    variants = [Analysis("execution.failure_rate", "3", execution.failure_rate),
                Analysis("execution.failure_rate", "2", execution.failure_by_chain),
                Analysis("execution.failure_rate", "2", execution.failure_rate, reads=("results",)),
                Analysis("execution.failure_rate", "2", execution.failure_rate, reads_clauses=True),
                Analysis("execution.other_name", "2", execution.failure_rate)]
    versions = {v.content_version for v in variants} | {a.content_version}
    assert len(versions) == len(variants) + 1


def test_functions_differ_by_name_code_and_what_they_captured() -> None:
    def make(limit: int) -> Callable[[object, object], list[Result]]:
        def fn(obs: object, pack: object) -> list[Result]:
            return [] if limit else []
        return fn

    assert function_digest(make(1)) == function_digest(make(1))
    assert function_digest(make(1)) != function_digest(make(2))
    assert function_digest(execution.failure_rate) != function_digest(execution.failure_by_chain)
    # Two functions of one module share its closure digest: editing the module reruns both.
    assert closure_digest(execution.failure_rate) == closure_digest(execution.failure_by_chain)


def test_without_source_the_loaded_code_and_plain_constants_are_digested(sourceless: list[str]) -> None:
    a, same = _module(sourceless, BODY.format(limit=3)), _module(sourceless, BODY.format(limit=3))
    with pytest.raises((OSError, TypeError)):
        inspect.getsource(a)
    assert closure_digest(a.probe) == closure_digest(same.probe)
    assert Analysis("p", "1", a.probe).content_version == Analysis("p", "1", same.probe).content_version
    constant = _module(sourceless, BODY.format(limit=4))
    assert closure_digest(constant.probe) != closure_digest(a.probe)
    body = _module(sourceless, BODY.format(limit=3).replace("[:LIMIT]", "[-LIMIT:]"))
    assert closure_digest(body.probe) != closure_digest(a.probe)
    assert function_digest(body.probe) != function_digest(a.probe)
    # A change to one function changes the module's digest, so the other function's version moves with it.
    assert closure_digest(body.other) != closure_digest(a.other)
    assert function_digest(body.other) == function_digest(a.other)


def test_a_spurious_systemerror_of_the_parser_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # CPython 3.11's AST builder (gh-106905) fails now and then while another thread compiles: one such failure
    # must not fail the digest, three in a row still surface.
    import ast

    from agent_factory.evaluators.core import source

    real, failures = ast.parse, [1]

    def flaky(text: str) -> ast.Module:
        if failures:
            failures.pop()
            raise SystemError("AST constructor recursion depth mismatch (before=174, after=193)")
        return real(text)

    monkeypatch.setattr(source.ast, "parse", flaky)
    assert source._parse("import json\n").body[0].names[0].name == "json"  # type: ignore[attr-defined]
    failures.extend([1, 1, 1])
    with pytest.raises(SystemError):
        source._parse("import json\n")
