"""Content versions of code: digests of what a function's behaviour depends on, so that editing it changes its
version whether or not anyone bumps a `VERSION`.

- `module_digest(module)`: a module's source text (what a rule's identity covers).
- `function_digest(fn)`: which function it is (qualified name, code, defaults and captured values).
- `closure_digest(fn)`: the source of the module defining `fn` and of every project module it imports,
  transitively: an edit to a helper in another module changes it as much as an edit to `fn` itself.

What counts as imported: the `import` statements at a module's top level (inside `if` / `try` / `with`
blocks too, not inside functions or classes: the registry loads every component lazily from inside a function,
and following that would tie every analysis to every other). Importing `a.b.c` follows `a.b.c`, not the
packages `a` and `a.b` it runs on the way, for the same reason. A project module is one in the top-level package
of `fn`, in this framework's top-level package, or in any file outside the interpreter's standard library and
site-packages (code being edited, as in a checkout or an editable install); third-party packages and the
standard library are not digested (their versions are the environment's).

Source is read once per module and run (`evaluators.core.memo`; outside a run, once per process), when first asked
(an edit saved between the import and then is attributed to the loaded code). A module without source (a
`.pyc`-only install, code built by `exec`) falls back to the bytes of its functions' and classes' code objects
(`co_code`, `co_names`, `co_consts` recursively) and its plain constants, and follows the modules, functions and
classes among its names instead of its import statements: exact for the loaded code, but bytecode differs between
Python versions, so the first run after an interpreter upgrade reruns what it covers.
"""

from __future__ import annotations

import ast
import inspect
import sys
import sysconfig
from collections.abc import Callable, Iterator
from functools import lru_cache, partial
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from agent_factory.digest import digest as sha256_digest
from agent_factory.digest import stable_id
from agent_factory.evaluators.core.memo import memos

_FRAMEWORK = __name__.partition(".")[0]
_PLAIN = (str, int, float, bool, bytes, type(None))


def _source(module: ModuleType) -> str | None:
    try:
        return inspect.getsource(module)
    except (OSError, TypeError):
        return None


def code_digest(code: CodeType) -> str:
    """The loaded code itself: bytecode, names and constants, nested code objects (inner functions,
    comprehensions) included."""
    return stable_id(code.co_code, code.co_names, tuple(_const(c) for c in code.co_consts))


def _const(c: object) -> object:
    if isinstance(c, CodeType):
        return code_digest(c)
    if isinstance(c, tuple | frozenset):
        return tuple(_const(x) for x in (sorted(c, key=repr) if isinstance(c, frozenset) else c))
    return repr(c)


def _value(v: object) -> object:
    """A default or captured value as content: plain values as themselves, functions as their code, anything
    else by type (its content is its module's source, covered by the closure)."""
    if isinstance(v, _PLAIN):
        return repr(v)
    if isinstance(v, frozenset | set):
        return tuple(sorted((_value(x) for x in v), key=repr))  # no hash order: it changes between processes
    if isinstance(v, tuple | list):
        return tuple(_value(x) for x in v)
    code = getattr(v, "__code__", None)
    if isinstance(code, CodeType):
        return code_digest(code)
    return f"{type(v).__module__}.{type(v).__qualname__}"


def function_digest(fn: Callable[..., Any]) -> str:
    """Which function `fn` is: its qualified name, code, defaults, attributes and the values its closure
    captured (two functions of one module, or two made by one factory with different parameters, differ). A
    `functools.partial` is its function and bound arguments; a callable object, its class's `__call__` and its
    attributes."""
    if isinstance(fn, partial):
        return stable_id("partial", function_digest(fn.func), _value(fn.args), _value(sorted(fn.keywords.items())))
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if not isinstance(code, CodeType):
        code = getattr(type(fn).__call__, "__code__", None)
    return stable_id(getattr(fn, "__qualname__", type(fn).__qualname__),
                     code_digest(code) if isinstance(code, CodeType) else None,
                     _value(getattr(fn, "__defaults__", None) or ()),
                     _value(sorted((getattr(fn, "__kwdefaults__", None) or {}).items())),
                     _value(sorted(getattr(fn, "__dict__", {}).items())), _cells(fn))


def _cells(fn: Any) -> tuple[object, ...]:
    out: list[object] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            out.append(_value(cell.cell_contents))
        except ValueError:  # a cell not assigned yet
            out.append(None)
    return tuple(out)


def module_digest(module: ModuleType) -> str:
    """16 hex of the sha256 of the module's source text (the digest rule identities have always used); without
    source, of its own functions', classes' and plain constants' content."""
    return _read(module)[1]


def closure_digest(fn: Callable[..., Any]) -> str:
    """The source of `fn`'s module and of every project module it imports, transitively (see the module's
    docstring for what is followed). Module names are left out: moving code changes nothing."""
    while isinstance(fn, partial):
        fn = fn.func
    root = sys.modules.get(getattr(inspect.unwrap(fn), "__module__", None) or "")
    if root is None:
        return function_digest(fn)
    roots = frozenset({root.__name__.partition(".")[0], _FRAMEWORK})
    return stable_id(*sorted(module_digest(m) for m in _closure(root, roots)))


def _closure(root: ModuleType, roots: frozenset[str]) -> Iterator[ModuleType]:
    seen, todo = set(), [root.__name__]
    while todo:
        name = todo.pop()
        module = sys.modules.get(name)
        if name in seen or module is None:
            continue
        seen.add(name)
        yield module
        todo.extend(n for n in _read(module)[2] if _followed(n, roots))


def _read(module: ModuleType) -> tuple[ModuleType, str, frozenset[str]]:
    """(the module, its digest, the modules it imports), read once per module object in a run (`core.memo`):
    a module replaced in `sys.modules` (another object) is read again."""
    return memos().identity("source.modules", max_entries=4096).get(None, module, None, lambda: _read_now(module))


def _read_now(module: ModuleType) -> tuple[ModuleType, str, frozenset[str]]:
    source = _source(module)
    if source is None:
        digest, imports = _compiled(module)
    else:
        digest = sha256_digest(source, n=16)
        imports = frozenset(_imports(module, source))
    return module, digest, imports


def _compiled(module: ModuleType) -> tuple[str, frozenset[str]]:
    """A module without source: its own functions and classes by code, its plain constants by value; what it
    imports, from the modules and foreign functions and classes among its names."""
    parts: list[object] = []
    imports: set[str] = set()
    for name, v in sorted(vars(module).items()):
        if isinstance(v, ModuleType):
            imports.add(v.__name__)
        elif getattr(v, "__module__", None) not in (None, module.__name__):
            imports.add(v.__module__)
        elif isinstance(v, type):
            parts.append((name, tuple(function_digest(m) for _k, m in sorted(vars(v).items())
                                      if isinstance(getattr(m, "__code__", None), CodeType))))
        elif callable(v):
            parts.append((name, function_digest(v)))
        elif isinstance(v, (*_PLAIN, tuple, frozenset)) and not name.startswith("__"):
            parts.append((name, _value(v)))
    return stable_id(*parts), frozenset(imports)


_PARSE_ATTEMPTS = 3


def _parse(source: str) -> ast.Module:
    """`ast.parse`, asked again when it fails with a `SystemError`: CPython 3.11 shares the AST builder's recursion
    counter between threads (gh-106905), so a library's thread compiling meanwhile (litellm's) makes a valid
    parse fail now and then, and the same parse succeeds when asked again (a CI run failed on it)."""
    for attempt in range(_PARSE_ATTEMPTS):
        try:
            return ast.parse(source)
        except SystemError:
            if attempt == _PARSE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def _imports(module: ModuleType, source: str) -> Iterator[str]:
    """The modules `module` imports at its top level (see the module's docstring)."""
    try:
        body = _parse(source).body
    except SyntaxError:
        return
    package = module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0]
    todo: list[ast.stmt] = list(body)
    while todo:
        s = todo.pop()
        if isinstance(s, ast.Import):
            yield from (a.name for a in s.names)
        elif isinstance(s, ast.ImportFrom):
            base = s.module or ""
            if s.level:
                parts = package.split(".")
                prefix = ".".join(parts[: len(parts) - s.level + 1])
                base = f"{prefix}.{base}" if base else prefix
            yield base
            yield from (f"{base}.{a.name}" for a in s.names if isinstance(sys.modules.get(f"{base}.{a.name}"),
                                                                           ModuleType))
        elif isinstance(s, ast.If | ast.Try | ast.TryStar | ast.With):
            for block in ("body", "orelse", "finalbody"):
                todo.extend(getattr(s, block, ()))
            todo.extend(st for h in getattr(s, "handlers", ()) for st in h.body)


def _followed(name: str, roots: frozenset[str]) -> bool:
    top = name.partition(".")[0]
    if top in roots:
        return True
    if top in sys.stdlib_module_names:
        return False
    file = getattr(sys.modules.get(name), "__file__", None)
    return isinstance(file, str) and not _installed(file)


@lru_cache(maxsize=4096)
def _installed(file: str) -> bool:
    """Whether `file` lies in the standard library or in a site-packages directory."""
    path = Path(file).resolve()
    return "site-packages" in path.parts or "dist-packages" in path.parts or any(
        path.is_relative_to(d) for d in _stdlib_dirs())


@lru_cache(maxsize=1)
def _stdlib_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return tuple(sorted({Path(paths[k]).resolve() for k in ("stdlib", "platstdlib") if k in paths}))
