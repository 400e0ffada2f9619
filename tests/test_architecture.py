"""docs/architecture.md stays true: every module, class, function, method, file and route it names in code quotes
exists in omnidub's source (read with ast, nothing imported)."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

PACKAGE = ROOT / "omnidub"
DOC = ROOT / "docs" / "architecture.md"


class Index:
    """Every module of the package, the names each defines at its top level (imported ones too), each class's
    members (methods, properties, fields), every function's name and every string constant."""

    def __init__(self) -> None:
        self.modules: dict[str, set[str]] = {}
        self.classes: dict[str, set[str]] = {}  # class name -> members (of every class of that name)
        self.functions: set[str] = set()
        self.strings: set[str] = set()
        for path in PACKAGE.rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            self.modules[name] = self._top(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, set()).update(self._members(node))
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.add(node.name)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    self.strings.add(node.value)

    @staticmethod
    def _top(tree: ast.Module) -> set[str]:
        names = set()
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        return names

    @staticmethod
    def _members(node: ast.ClassDef) -> set[str]:
        members = set()
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                members.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                members.add(item.target.id)
            elif isinstance(item, ast.Assign):
                members |= {t.id for t in item.targets if isinstance(t, ast.Name)}
        for item in ast.walk(node):  # attributes the methods set: self.name = ...
            if isinstance(item, ast.Attribute) and isinstance(item.value, ast.Name) and item.value.id == "self":
                if isinstance(getattr(item, "ctx", None), ast.Store):
                    members.add(item.attr)
        return members

    def member(self, name: str) -> bool:
        return any(name in members for members in self.classes.values())

    def dotted(self, parts: list[str]) -> bool:
        """``a.b.c``: a module and what it defines (then members of that class), else a class and its members."""
        if parts[0] == "omnidub":
            parts = parts[1:]
        for k in range(len(parts), 0, -1):
            # A module named from the package (review.desk) or from its own folder (fit: translate/fit.py).
            suffix = "." + ".".join(parts[:k])
            modules = [m for m in self.modules if m.endswith(suffix)]
            if modules:
                rest = parts[k:]
                return not rest or any(
                    (rest[0] in self.modules[m] or f"{m}.{rest[0]}" in self.modules) and self._of_class(rest)
                    for m in modules
                )
        return parts[0] in self.classes and self._of_class(parts)

    def _of_class(self, names: list[str]) -> bool:
        """``Class.member.further``: the member is the class's own; what follows, any class's."""
        if len(names) == 1:
            return True
        return names[1] in self.classes.get(names[0], set()) and all(self.member(name) for name in names[2:])


def quoted(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def missing(index: Index, token: str) -> bool:
    """Whether a code quote names something the source does not have (quotes of commands, flags and settings are
    not names, and are let be)."""
    if " " in token or token.startswith(("-", "@")) or "=" in token and "(" not in token:
        return False
    token = re.sub(r"\(.*\)$", "", token)  # a call: the name called
    if token.startswith("/"):  # a route of the review server
        return f'Route("{re.sub(r"(/[A-Z])+$", "/", token)}' not in (PACKAGE / "review" / "app.py").read_text()
    if "/" in token or token.endswith((".py", ".js")):
        return not any((base / token).exists() for base in (PACKAGE, ROOT)) and not list(PACKAGE.rglob(token))
    if re.fullmatch(r"[\w.]+\.(json|jsonl|toml|srt|wav)", token):
        return token not in index.strings
    if token.startswith("."):
        return not index.member(token[1:])
    if "." in token:
        return not index.dotted(token.split("."))
    if not token.isidentifier():
        return False
    if token[0].isupper():
        return not (any(token in names for names in index.modules.values()) or token in index.classes)
    return not (
        token in index.functions
        or index.member(token)
        or any(token in names for names in index.modules.values())
        or any(name.split(".")[-1] == token for name in index.modules)
        or token in index.strings
    )


def test_every_name_the_architecture_page_cites_exists():
    index = Index()
    gone = sorted({token for token in quoted(DOC.read_text(encoding="utf-8")) if missing(index, token)})
    assert gone == [], f"docs/architecture.md cites names the code does not have: {gone}"


def test_the_check_itself_finds_a_name_that_is_not_there():
    index = Index()
    for wrong in ("Job._render", "retakes.rank", "review.desk.Review._run", "Editor.no_such_verb", "nope.py"):
        assert missing(index, wrong), wrong
    for right in ("Job.render_pending", "takes.rank", "editor.VERBS", "Project.plan(prepare=False)", "/context/N"):
        assert not missing(index, right), right
