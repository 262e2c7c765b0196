"""The package imports and the CLI answers --help."""

import subprocess
import sys

import mmdkit


def test_public_names():
    assert callable(mmdkit.load) and callable(mmdkit.save)
    err = mmdkit.FormatError("bad count", path="x.pmx", section="vertices", offset=12)
    assert str(err) == "x.pmx, section 'vertices', byte 12: bad count"


def test_cli_help():
    out = subprocess.run([sys.executable, "-m", "mmdkit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Usage" in out.stdout


def test_numba_threads_sleep_while_they_wait():
    """A fresh process that imports mmdkit's kernels runs numba on OpenMP whose idle threads sleep
    at once (libgomp's own report of its settings: spin count 0, where it spins 300,000 turns by
    default): with another process busy on one core, skinning then costs ~1.3x, not ~100x
    (benchmarks/bench_busy_core.py). What the user set in the environment wins."""
    import os

    code = "import numba, mmdkit.skinning.cpu\nnumba.get_num_threads()\nprint(numba.threading_layer())\n"
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OMP_", "GOMP_", "NUMBA_THREADING_LAYER", "NUMBA_NUM_THREADS"))}
    seen = {}
    for name, extra in (("mmdkit", {}), ("user", {"OMP_WAIT_POLICY": "ACTIVE"})):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env={**clean, **extra, "OMP_DISPLAY_ENV": "VERBOSE"})
        assert r.returncode == 0, r.stderr
        spin = [line.split("=")[1].strip(" '") for line in r.stderr.splitlines() if "GOMP_SPINCOUNT" in line]
        seen[name] = (r.stdout.strip(), spin)
    assert seen["mmdkit"] == ("omp", ["0"])
    assert seen["user"][0] == "omp" and int(seen["user"][1][0]) > 300_000


# --- the import graph: layers and cycles, counting what a module-level scan misses --------------------------

PACKAGE = __import__("pathlib").Path(mmdkit.__file__).parent
TIERS = ({"numba_inline"}, {"errors", "fileutil", "mathutil", "text", "threads"}, {"model"}, {"animation"}, {"formats"}, {"importers"},
         {"pose"}, {"physics", "skinning", "retarget"}, {"runtime"}, {"render", "export", "viewer"}, {"io"},
         {"batch"}, {"demo"}, {"mmdkit"}, {"cli"}, {"__main__"})
"""Units (the first package or module under mmdkit; ``mmdkit`` is the package's own front door),
low to high, as docs/ARCHITECTURE.md and the layers hook order them (``numba_inline``, the compile-time
patch ``mathutil`` installs, below the base utilities): a unit imports only from
lower tiers (never sideways). Importers sit above formats (they read files through the formats'
readers and register their own readers into its registry); the CLI above the front door and
the demo data it builds on."""


def _modules() -> dict[str, object]:
    """{dotted name: path} of every mmdkit module (packages by their __init__.py)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_module(name: str, modules) -> bool:
    """``name`` is a module: a source file here, or a compiled extension (found where Python finds it)."""
    import importlib.util

    if name in modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _imports(module: str, path, modules) -> list[tuple[str, int]]:
    """(module imported, line) for every import in ``module``'s source — at module level, inside
    functions and classes, ``importlib.import_module('mmdkit…')`` and any other string that names
    an mmdkit module ('mmdkit.x.y' or 'mmdkit.x.y:function', docstrings aside). ``from P import n``
    counts as importing P.n when that is a module, else P."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            subs = [f"{base}.{a.name}" for a in node.names
                    if base in modules and _is_module(f"{base}.{a.name}", modules)]
            found += [(m, node.lineno) for m in subs]
            if len(subs) < len(node.names):
                found.append((base, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            name = node.value.partition(":")[0]
            if name.startswith("mmdkit.") and name in modules:
                found.append((name, node.lineno))
    return [(m, line) for m, line in found if m in modules and m != module]


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mmdkit"


def _graph() -> dict[str, dict[str, int]]:
    """{module: {module it imports: first line}} over the whole package."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        for target, line in _imports(module, path, modules):
            graph.setdefault(module, {}).setdefault(target, line)
    return graph


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_import_cycle_between_modules():
    """No mmdkit module reaches itself through imports, counting imports inside functions and
    modules named by string (a cycle hidden in a function is still one: which module finishes
    first then depends on who is imported first)."""
    cycles = _cycles(_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_only_go_down_the_layers():
    """Each unit imports only from lower tiers (``TIERS``), also inside functions and by string:
    no output layer imports another (render ↔ export), formats never reach up to the importers."""
    tier = {unit: k for k, units in enumerate(TIERS) for unit in units}
    graph = _graph()
    assert {_unit(m) for m in graph} <= set(tier), "a unit TIERS does not place"
    wrong = [f"{a}:{line} imports {b}" for a, targets in graph.items() for b, line in targets.items()
             if _unit(a) != _unit(b) and tier[_unit(b)] >= tier[_unit(a)]]
    assert not wrong, "\n".join(wrong)
