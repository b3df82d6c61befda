"""Report: what the class got wrong, exercise by exercise, named as the mistake catalogues name it.

Why here: graders that see one submission at a time cannot say "41 % of the class took the
softmax over the queries"; the batch has every student's verdict, and the hidden tests already
name each catalogued mistake in their message. This module only counts: it reads each graded
test cell's score and message (result.json of every student), matches the message against the
catalogue of that exercise, and writes

- `mistakes.csv`: assignment, exercise, outcome, students, share (one row per outcome: `passed`,
  a catalogued mistake's name, `uncatalogued`, `not run`), over the students whose submission
  was graded;
- `report.html`: one self-contained page (no JavaScript, images inline) with the class's five
  most common mistakes on top and a bar chart per notebook. No student appears in either file.
"""
import base64
import collections
import csv
import html
import importlib
import io
import os

NOT_RUN = ("NotRun", "Timeout", "KernelDied", "TamperError")
PASSED, UNCATALOGUED, DID_NOT_RUN = "passed", "uncatalogued", "not run"


def topic_of(assignment):
    """'05_self_attention' -> 'self_attention' (the catalogue module's name)."""
    return assignment.split("_", 1)[1] if "_" in assignment else assignment


def load_catalogue(assignment):
    """{exercise grade_id: Exercise} of an assignment, or {} when it has no catalogue."""
    try:
        module = importlib.import_module(f"course_utils.reference.mistakes.{topic_of(assignment)}")
    except ImportError:
        return {}
    return dict(getattr(module, "EXERCISES", {}))


def classify(cell, exercise):
    """The outcome of one graded test cell: passed, a mistake's name, not run, or uncatalogued."""
    if cell.get("max_score") and cell.get("score", 0) >= cell["max_score"]:
        return PASSED
    message = cell.get("message") or ""
    if message.split(":", 1)[0].strip() in NOT_RUN:
        return DID_NOT_RUN
    for mistake in getattr(exercise, "mistakes", ()):
        if mistake.message and mistake.message in message:
            return mistake.name
    return UNCATALOGUED


def tally(results, load=load_catalogue):
    """{(assignment, exercise): Counter(outcome -> students)} over the graded results."""
    catalogues, counts = {}, collections.defaultdict(collections.Counter)
    for result in results:
        if result.get("status") != "graded":
            continue
        assignment = result["assignment"]
        if assignment not in catalogues:
            catalogues[assignment] = load(assignment)
        for cell in result.get("cells", []):
            exercise_id = cell["grade_id"][: -len("_tests")] if cell["grade_id"].endswith("_tests") else cell["grade_id"]
            outcome = classify(cell, catalogues[assignment].get(exercise_id))
            counts[(assignment, exercise_id)][outcome] += 1
    return counts


def _rows(counts):
    rows = []
    for (assignment, exercise), counter in sorted(counts.items()):
        total = sum(counter.values())
        order = sorted(counter, key=lambda o: (o != PASSED, -counter[o], o))
        for outcome in order:
            rows.append((assignment, exercise, outcome, counter[outcome], f"{counter[outcome] / total:.3f}"))
    return rows


def _top_mistakes(counts, n=5):
    found = []
    for (assignment, exercise), counter in counts.items():
        total = sum(counter.values())
        for outcome, k in counter.items():
            if outcome not in (PASSED, DID_NOT_RUN):
                found.append((k / total, k, total, assignment, exercise, outcome))
    return sorted(found, key=lambda f: (-f[0], -f[1], f[3], f[4], f[5]))[:n]


def _chart(assignment, items):
    """A horizontal stacked bar per exercise (passed, each mistake, uncatalogued) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exercises = [exercise for exercise, _ in items]
    outcomes = sorted({o for _, c in items for o in c}, key=lambda o: (o != PASSED, o == UNCATALOGUED, o))
    height = max(0.8 + 0.45 * len(items), 0.6 + 0.2 * len(outcomes))  # room for bars and legend
    fig, ax = plt.subplots(figsize=(8, height), layout="constrained")
    left = [0.0] * len(items)
    # Green means passed, greys mean "no diagnosis"; mistakes get colours that are neither.
    palette = ["#d62728", "#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf"]
    fixed = {PASSED: "#2ca02c", UNCATALOGUED: "#555555", DID_NOT_RUN: "#bbbbbb"}
    mistakes = [o for o in outcomes if o not in fixed]
    for outcome in outcomes:
        shares = [c[outcome] / max(sum(c.values()), 1) for _, c in items]
        color = fixed.get(outcome) or palette[mistakes.index(outcome) % len(palette)]
        ax.barh(exercises, shares, left=left, label=outcome, color=color)
        left = [a + b for a, b in zip(left, shares)]
    ax.set_xlim(0, 1.0001)
    ax.set_xlabel("share of graded students")
    ax.set_title(f"{assignment}: outcome of each exercise")
    ax.invert_yaxis()
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _html(counts):
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Class report</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
             "td.n{text-align:right}</style></head><body>",
             "<h1>What the class got wrong</h1>",
             "<p>Counts are students whose submission was graded. A mistake is named as its exercise's "
             "catalogue names it; <em>uncatalogued</em> is a wrong answer no catalogued mistake explains; "
             "<em>not run</em> means the cell did not run (a timeout, a dead kernel, tampering).</p>",
             "<h2>The five most common mistakes</h2><table><tr><th>share</th><th>students</th>"
             "<th>assignment</th><th>exercise</th><th>mistake</th></tr>"]
    for share, k, total, assignment, exercise, outcome in _top_mistakes(counts):
        parts.append(f"<tr><td class='n'>{share:.0%}</td><td class='n'>{k} of {total}</td><td>{e(assignment)}</td>"
                     f"<td>{e(exercise)}</td><td>{e(outcome)}</td></tr>")
    parts.append("</table>")
    by_assignment = collections.defaultdict(list)
    for (assignment, exercise), counter in sorted(counts.items()):
        by_assignment[assignment].append((exercise, counter))
    for assignment, items in by_assignment.items():
        parts.append(f"<h2>{e(assignment)}</h2>")
        parts.append(f"<img alt='outcomes of {e(assignment)}' src='data:image/png;base64,{_chart(assignment, items)}'>")
        parts.append("<table><tr><th>exercise</th><th>outcome</th><th>students</th><th>share</th></tr>")
        for exercise, counter in items:
            total = sum(counter.values())
            for outcome in sorted(counter, key=lambda o: (o != PASSED, -counter[o], o)):
                parts.append(f"<tr><td>{e(exercise)}</td><td>{e(outcome)}</td><td class='n'>{counter[outcome]}</td>"
                             f"<td class='n'>{counter[outcome] / total:.0%}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write(results, out_dir, load=load_catalogue):
    """Write mistakes.csv and report.html into out_dir; returns the paths written."""
    counts = tally(results, load)
    csv_path, html_path = os.path.join(out_dir, "mistakes.csv"), os.path.join(out_dir, "report.html")
    for path, text in ((csv_path, None), (html_path, _html(counts))):
        tmp = path + ".tmp"
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            if text is None:
                writer = csv.writer(fh, lineterminator="\n")
                writer.writerow(["assignment", "exercise", "outcome", "students", "share"])
                writer.writerows(_rows(counts))
            else:
                fh.write(text)
        os.replace(tmp, path)
    return [csv_path, html_path]
