"""No import cycles among the project's modules: the graph of every import statement in hgemm_common, triton_kernels,
ptx_kernels and compare (module level and inside functions alike: a lazy import still ties two modules together)
has no cycle. Read from the sources with ast, so nothing is imported."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hgemm_common", "triton_kernels", "ptx_kernels", "compare")


def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, whether it is a package's __init__)."""
    out = {}
    for package in PACKAGES:
        for f in sorted((ROOT / package).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (f, is_package)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports. `from x import y` counts as an import of x.y where y is a module,
    else of x; a module's package is not counted for its own imports (Python runs it first by itself)."""
    mods = modules()
    graph = {m: set() for m in mods}
    for name, (path, is_package) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # `import a.b.c` of a package's module: its nearest known module
                    t = t.rpartition(".")[0]
                if t and t != name:
                    graph[name].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One path per strongly connected component of more than one module (Tarjan), as a readable cycle."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_project():
    g = import_graph()
    assert {"triton_kernels.api", "triton_kernels.ops", "ptx_kernels", "ptx_kernels.ops", "compare.nn"} <= set(g)
    assert "triton_kernels.call" in g["triton_kernels.ops"] and "triton_kernels.ops" in g["triton_kernels.api"]
    assert "ptx_kernels.call" in g["ptx_kernels.ops"] and "hgemm_common.linear" in g["triton_kernels.nn"]


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (each a set of modules importing one another): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_hgemm_common_imports_no_kernel_package():
    """hgemm_common is the neutral ground both packages and the harness import: it imports none of them."""
    g = import_graph()
    bad = {m: sorted(t for t in ts if not t.startswith("hgemm_common")) for m, ts in g.items()
           if m.startswith("hgemm_common")}
    assert not any(bad.values()), bad
