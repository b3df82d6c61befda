"""Grade one answer the way the notebook grades it, without a notebook or nbgrader.

    .venv/bin/python -m tests.exercises.try_answer ANSWER.py [--only GRADE_ID ...]

ANSWER.py is Python that defines some of a notebook's answers under their prompt's names (a
function, a class, a number). Every exercise whose answer it defines is run through its real test
cell, hidden tests included, in the namespace the notebook would have (the setup cell and the
solution's other answers), and the result is printed: `PASSED`, or `FAILED` with the message the
student would read. This is how a contributor tries a wrong answer nobody catalogued: if it
prints PASSED, the tests have a hole (add it to tests/exercises/uncatalogued_<topic>.py).
"""
import argparse
import ast
import pathlib
import sys
import traceback

from tests.exercises.test_mutations import EXERCISES, run_test_cell, solved_namespace, spec


def answered_exercises(names):
    """The (notebook, exercise) pairs whose answer is one of `names`."""
    return [(nb, ex) for nb, ex in EXERCISES if spec(ex).function_name in names]


def bound_names(source):
    """The names ANSWER.py binds at its top level (def, class, assignment, import)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def verdict(notebook, exercise, answer_namespace):
    """'PASSED', or 'FAILED: <what the student reads>' (a GradingError's message, or the
    traceback's last line for any other exception, which a student would see as a crash)."""
    name = spec(exercise).function_name
    extra = {k: v for k, v in answer_namespace.items() if not k.startswith("__")}
    try:
        run_test_cell(notebook, exercise, answer_namespace[name], extra=extra)
    except Exception as error:  # noqa: BLE001  (any failure is a verdict)
        from course_utils.grading import GradingError

        kind = "" if isinstance(error, GradingError) else f"[{type(error).__name__}, not a GradingError] "
        return f"FAILED: {kind}{error}"
    return "PASSED"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("answer", type=pathlib.Path)
    parser.add_argument("--only", nargs="*", default=None, help="grade ids to try")
    args = parser.parse_args(argv)
    source = args.answer.read_text()
    bound = bound_names(source)
    pairs = answered_exercises(set(compile(source, str(args.answer), "exec").co_names))
    if args.only:
        pairs = [(nb, ex) for nb, ex in pairs if ex.grade_id in args.only]
    if not pairs:
        print("ANSWER.py defines none of the exercises' answer names", file=sys.stderr)
        return 2
    for notebook, exercise in pairs:
        # Answers may use what the notebook's setup cell imports (np, torch, nn...): start from there.
        namespace = dict(solved_namespace(notebook))
        try:
            exec(compile(source, str(args.answer), "exec"), namespace)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            return 2
        # What ANSWER.py binds, by name: a value equal to the solution's own (a small int is even the
        # same object) is still the answer being tried.
        answer_namespace = {k: v for k, v in namespace.items()
                            if k in bound or k not in solved_namespace(notebook) or v is not solved_namespace(notebook)[k]}
        if spec(exercise).function_name not in answer_namespace:
            continue
        print(f"{exercise.grade_id}: {verdict(notebook, exercise, answer_namespace)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
