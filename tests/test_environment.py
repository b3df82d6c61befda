"""The two ways to install the course must install the same thing."""
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pyproject_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        pins += extra
    return pins


def environment_pins(text=None):
    text = (ROOT / "environment.yml").read_text() if text is None else text
    return re.findall(r"^\s+- ([A-Za-z0-9_.\-]+==[^\s#]+)\s*$", text, flags=re.M)


def test_every_dependency_is_pinned_exactly():
    loose = [pin for pin in pyproject_pins() if "==" not in pin]
    assert not loose, f"pin these exactly in pyproject.toml: {loose}"


def test_environment_yml_matches_pyproject():
    assert sorted(environment_pins()) == sorted(pyproject_pins())


def test_python_version_agrees():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11,<3.12"
    assert re.search(r"^\s+- python=3\.11\s*$", (ROOT / "environment.yml").read_text(), flags=re.M)


def test_torch_is_the_cpu_wheel_pin():
    # An unpinned or newer torch pulls gigabytes of CUDA packages.
    assert "torch==2.13.0" in pyproject_pins()


def test_a_drifted_pin_is_noticed():
    drifted = (ROOT / "environment.yml").read_text().replace("numpy==", "numpy==0.")
    assert sorted(environment_pins(drifted)) != sorted(pyproject_pins())
