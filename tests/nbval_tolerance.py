"""Numeric tolerance for nbval: stored outputs that come out of training validate on any CPU.

Why: PyTorch picks other kernels on other CPUs (AVX2, AVX-512, AMX, Apple silicon) and other
thread counts, so a loss or an accuracy printed after training moves in the 4th decimal. nbval
compares outputs character by character and has no numeric tolerance; its sanitizers are
regex replacements applied to each side alone, so they can only blank numbers out, and a
blanked number no longer catches a model that trains 2 % worse. pytest-notebook has the same
limitation (its diff ignores paths, it does not compare numbers). `# NBVAL_IGNORE_OUTPUT` plus a
separate check would run every notebook twice. So we keep nbval (its kernel handling, its cell
reports) and add one thing: before nbval compares a cell that carries the metadata

    "nbval_tolerance": {"abs": 0.005, "rel": 0.0, "integers": false}

each number of the new output that is within |new - stored| <= abs + rel * |stored| of the
number at the same place of the stored output is replaced by the stored text. Everything else is
compared by nbval exactly as before: the words around the numbers, their count, integers (unless
"integers" is true), and every number outside the tolerance, which nbval then shows in its diff.
A cell without the metadata is compared exactly.
"""
import math
import re

KEY = "nbval_tolerance"

# A number as printed: optional sign, digits with an optional fraction, optional exponent.
# Integers are matched too, so that "3" and "3.5" split the text the same way on both sides.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def _is_integer(token):
    return not any(c in token for c in ".eE")


def within(new, stored, abs_tol=0.0, rel_tol=0.0, integers=False):
    """True if the printed number `new` may stand for the printed number `stored`."""
    if new == stored:
        return True
    if (_is_integer(new) or _is_integer(stored)) and not integers:
        return False
    a, b = float(new), float(stored)
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= abs_tol + rel_tol * abs(b)


def align(new_text, stored_text, spec):
    """new_text with each number that is within tolerance of the stored one replaced by the stored
    text; returned unchanged where the two texts do not have the same words around their numbers."""
    new_parts, stored_parts = NUMBER.split(new_text), NUMBER.split(stored_text)
    new_numbers, stored_numbers = NUMBER.findall(new_text), NUMBER.findall(stored_text)
    if len(new_numbers) != len(stored_numbers) or new_parts != stored_parts:
        return new_text
    out = [new_parts[0]]
    for new, stored, text in zip(new_numbers, stored_numbers, new_parts[1:]):
        keep_stored = within(new, stored, float(spec.get("abs", 0.0)), float(spec.get("rel", 0.0)),
                             bool(spec.get("integers", False)))
        out += [stored if keep_stored else new, text]
    return "".join(out)


def _texts(output):
    """(container, key) pairs of an output's text fields, as nbval's compare sees them."""
    if output.get("output_type") == "stream":
        return [(output, "text")] if isinstance(output.get("text"), str) else []
    data = output.get("data") or {}
    return [(data, k) for k in ("text/plain", "text/html", "text/markdown") if isinstance(data.get(k), str)]


def apply(test_outputs, stored_outputs, spec):
    """Align the text of each new output with the stored output at the same place; in place."""
    for new, stored in zip(test_outputs, stored_outputs):
        if (new.get("output_type"), new.get("name")) != (stored.get("output_type"), stored.get("name")):
            continue
        stored_texts = dict((key, container[key]) for container, key in _texts(stored))
        for container, key in _texts(new):
            if key in stored_texts:
                container[key] = align(container[key], stored_texts[key], spec)


def validate_spec(spec, where):
    """A clear error for a malformed tolerance, instead of a silent exact comparison."""
    allowed = {"abs", "rel", "integers"}
    if not isinstance(spec, dict) or not spec or set(spec) - allowed:
        raise ValueError(f"{where}: cell metadata '{KEY}' must be a dict with keys from {sorted(allowed)}, "
                         f"got {spec!r}")
    for key in ("abs", "rel"):
        if key in spec and not (isinstance(spec[key], (int, float)) and 0 <= spec[key] < 1e6):
            raise ValueError(f"{where}: '{KEY}.{key}' must be a non-negative number, got {spec[key]!r}")


def install():
    """Wrap nbval's IPyNbCell.compare_outputs (called by the root conftest)."""
    from nbval import plugin

    original = plugin.IPyNbCell.compare_outputs
    if getattr(original, "_with_tolerance", False):
        return

    def compare_outputs(self, test, ref, skip_compare=None):
        spec = self.cell.get("metadata", {}).get(KEY)
        if spec is not None:
            validate_spec(spec, f"{self.fspath}::Cell {self.cell_num}")
            apply(test, ref, spec)  # edits only the new outputs, never the stored ones
        return original(self, test, ref, skip_compare)

    compare_outputs._with_tolerance = True
    plugin.IPyNbCell.compare_outputs = compare_outputs


def pytest_configure(config):
    """Also usable as a plugin on its own: `pytest -p tests.nbval_tolerance --nbval ...`."""
    install()
