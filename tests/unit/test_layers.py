"""The package's layers, read from the source: every import statement (inside functions too)."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "src" / "scalebench"

# lowest first; a module may import its own package and any package of a lower rank
LAYERS = [("core",), ("cell", "store"), ("analysis",), ("report",), ("orchestration",), ("tools",), ("cli",)]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
AIRFLOW_BOUND = {"orchestration", "cli"}  # the only places that may import Airflow
NEVER = {"analysis": {"store"}}  # analysis is handed a store or its rows; it never opens one
# orchestration's rooms, lowest first: a room may import its own modules and lower rooms'
ROOMS = [("notes", "dag_bundle", "airflow_steps"), ("cell_run", "cell_operator"), ("dags",), ("ui",)]
ROOM_RANK = {name: rank for rank, names in enumerate(ROOMS) for name in names}
ROOM_NEVER = {"ui": {"dags", "cell_run", "cell_operator", "notes"}}  # the pages name DAGs by core.dag_ids, never import them


def package_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def modules():
    return sorted(p for p in PKG.rglob("*.py") if "migrations" not in p.parts and p != PKG / "__init__.py")


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    parts = ["scalebench", *path.relative_to(PKG).with_suffix("").parts]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = parts[:-node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
                names = [f"{mod}.{a.name}" for a in node.names] if not node.module else [mod]
                out += [(node.lineno, n) for n in names]
            else:
                out.append((node.lineno, node.module))
                if node.module == "scalebench":
                    out += [(node.lineno, f"scalebench.{a.name}") for a in node.names]
    return out


def test_the_layer_list_names_every_package_and_nothing_else():
    found = {package_of(p) for p in modules()}
    assert found == set(RANK), f"packages not in the layer list: {found - set(RANK)}; listed but absent: {set(RANK) - found}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_follow_the_layers(path):
    mine = package_of(path)
    wrong = []
    for line, name in imports(path):
        top = name.split(".")
        if top[0] == "airflow" and mine not in AIRFLOW_BOUND:
            wrong.append(f"line {line}: imports {name}, but only {sorted(AIRFLOW_BOUND)} may import Airflow")
        if top[0] != "scalebench" or len(top) < 2:
            continue
        other = top[1]
        if other not in RANK:
            wrong.append(f"line {line}: imports {name}, which is in no layer")
        elif other != mine and (RANK[other] >= RANK[mine] or other in NEVER.get(mine, ())):
            wrong.append(f"line {line}: {mine} (layer {RANK[mine]}) imports {name} (layer {RANK[other]})")
    assert not wrong, f"{path.relative_to(PKG)}:\n" + "\n".join(wrong)


def room_of(path: Path) -> str | None:
    rel = path.relative_to(PKG)
    if rel.parts[0] != "orchestration" or rel.name == "__init__.py" and len(rel.parts) == 2:
        return None
    return rel.parts[1] if len(rel.parts) > 2 else rel.stem


ORCHESTRATION = sorted(p for p in modules() if room_of(p))


def test_the_room_list_names_every_room_of_orchestration():
    assert {room_of(p) for p in ORCHESTRATION} == set(ROOM_RANK)


@pytest.mark.parametrize("path", ORCHESTRATION, ids=lambda p: str(p.relative_to(PKG)))
def test_orchestrations_rooms_import_only_lower_rooms(path):
    mine = room_of(path)
    wrong = []
    for line, name in imports(path):
        parts = name.split(".")
        if parts[:2] != ["scalebench", "orchestration"] or len(parts) < 3:
            continue
        other = parts[2]
        if other not in ROOM_RANK:
            wrong.append(f"line {line}: imports {name}, which is in no room")
        elif other != mine and (ROOM_RANK[other] > ROOM_RANK[mine] or other in ROOM_NEVER.get(mine, ())):
            wrong.append(f"line {line}: room {mine} imports {name} (room {other})")
    assert not wrong, f"{path.relative_to(PKG)}:\n" + "\n".join(wrong)


# Inside the command line and the UI: parts of one concern each (every module of the folder but the
# one that assembles them and what they share), which never import one another.
PARTS = {
    "cli/commands": {"assembler": "__init__", "shared": ("scalebench.cli.arguments", "scalebench.cli.listing")},
    "orchestration/ui": {"assembler": "webapp", "shared": ("scalebench.orchestration.ui.shared",
                                                           "scalebench.orchestration.ui.pages",
                                                           "scalebench.orchestration.ui.profile_sections")},
}


@pytest.mark.parametrize("folder", sorted(PARTS))
def test_the_parts_of_the_cli_and_the_ui_import_none_of_each_other(folder):
    rule = PARTS[folder]
    package = "scalebench." + folder.replace("/", ".")
    parts = {p.stem for p in (PKG / folder).glob("*.py")} - {rule["assembler"], "__init__"} - \
        {name.rsplit(".", 1)[1] for name in rule["shared"] if name.startswith(package + ".")}
    assert len(parts) >= 3, f"{folder}: {parts}"
    wrong = []
    for part in sorted(parts):
        for line, name in imports(PKG / folder / f"{part}.py"):
            other = name.removeprefix(package + ".").split(".")[0] if name.startswith(package + ".") else None
            if other in parts and other != part:
                wrong.append(f"{folder}/{part}.py line {line}: imports {name}; share it through {rule['shared']}")
    assert not wrong, "\n".join(wrong)


def test_no_module_of_the_cli_or_the_ui_is_over_250_lines():
    """One page a newcomer reads: a command group, a router, the pages' values."""
    long = [f"{p.relative_to(PKG)}: {n} lines" for folder in ("cli", "orchestration/ui") for p in (PKG / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 250]
    assert not long, long


def test_one_module_talks_to_docker_and_none_is_over_500_lines():
    """cell.engine is the Docker adapter: every other module asks it (its labels, containers, images)."""
    talks = sorted(str(p.relative_to(PKG)) for p in modules()
                   if any(name == "docker" or name.startswith("docker.") for _, name in imports(p)))
    assert talks == ["cell/engine.py"]
    assert [str(p.relative_to(PKG)) for p in modules() if len(p.read_text().splitlines()) > 500] == []


def test_the_benchmark_dag_factory_never_asks_which_kind_it_builds():
    """Every difference between the nightly, accuracy and probe DAGs is data in dag_specs."""
    tree = ast.parse((PKG / "orchestration/dags/dag_factory.py").read_text())
    def a_kind(x) -> bool:  # "accuracy", cellmod.PROBE, NIGHTLY, spec.kind, kind
        text = ast.unparse(x)
        return (isinstance(x, ast.Constant) and x.value in ("nightly", "accuracy", "probe")
                or text.split(".")[-1] in ("NIGHTLY", "ACCURACY", "PROBE", "kind"))
    compared = [ast.unparse(n) for n in ast.walk(tree)
                if isinstance(n, ast.Compare) and any(a_kind(x) for x in (n.left, *n.comparators))]
    assert compared == []


def test_every_dag_is_opened_from_a_spec():
    """One place opens a DAG (dag_specs.open_dag): the settings every scalebench DAG shares live there."""
    opened = [f"{p.relative_to(PKG)}:{n.lineno}" for p in (PKG / "orchestration").rglob("*.py")
              for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.Call) and ast.unparse(n.func) == "DAG"]
    assert opened == ["orchestration/dags/dag_specs.py:" + str(next(
        n.lineno for n in ast.walk(ast.parse((PKG / "orchestration/dags/dag_specs.py").read_text()))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "DAG"))]


def test_a_trainer_is_its_model_data_and_step_in_the_kits_skeleton():
    """No trainer's main() is over 40 lines, and none imports another stack's trainer."""
    root = PKG.parents[1] / "containers"
    for path in sorted(root.glob("*/trainers/*.py")):
        tree = ast.parse(path.read_text())
        mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
        assert all(m.end_lineno - m.lineno + 1 <= 40 for m in mains), path
        own = {p.stem for p in path.parent.glob("*.py")}
        others = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                  and n.module.startswith("trainers.") and n.module.split(".")[1] not in own]
        assert others == [], f"{path} imports another stack's trainer: {others}"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    """The rule must catch a lazy import, as four modules once imported Airflow inside functions."""
    probe = PKG / "core" / "_probe_never_committed.py"
    probe.write_text("def f():\n    from airflow.sdk import DAG\n    from ..orchestration import notes\n")
    try:
        found = [name for _, name in imports(probe)]
    finally:
        probe.unlink()
    assert found == ["airflow.sdk", "scalebench.orchestration"]


def test_shared_names_are_not_defined_twice():
    """Keys and file names shared with the trainers come from scalebench_kit.names only."""
    import scalebench_kit.names as names

    shared = {k: getattr(v, "name", v) for k, v in vars(names).items() if k.isupper()}
    shared = {k: v for k, v in shared.items() if isinstance(v, str)}  # file names, event keys, metric names
    again = []
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for t in node.targets:
                    if isinstance(t, ast.Name) and shared.get(t.id) == node.value.value:
                        again.append(f"{path.relative_to(PKG)}:{node.lineno} {t.id}")
    assert not again, f"defined again beside scalebench_kit.names: {again}"
