"""tests/ mirrors the package (docs/layout.md): a folder per concept folder of ``evalrun`` and
per top-level folder of the design card, the watermark folder's two sub-packages mirrored too,
and no test folder that names no package."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
#: package folders with nothing to test on their own, and why
NO_TESTS = {"assets": "data only: the embedded model and the unlearning data, loaded by the model's tests"}
#: test folders that hold data or scripts' tests rather than a package's
NOT_PACKAGES = {"data": "stores written by earlier releases", "benchmarks": "the scripts in benchmarks/"}


def _packages(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}


def test_every_concept_folder_has_its_test_folder() -> None:
    wanted = (_packages(REPO / "evalrun") | {"plugins", "kernels", "report", "packs"}) - set(NO_TESTS)
    missing = sorted(name for name in wanted if not (TESTS / name).is_dir())
    assert not missing, f"no tests/<folder> for {missing} (add one, or list the folder in NO_TESTS with a reason)"


def test_the_watermark_sub_packages_are_mirrored() -> None:
    for sub in _packages(REPO / "evalrun" / "watermark"):
        assert (TESTS / "watermark" / sub).is_dir(), f"tests/watermark/{sub} is missing"


def test_every_test_folder_names_a_package() -> None:
    known = _packages(REPO / "evalrun") | {"plugins", "kernels", "report", "packs"} | set(NOT_PACKAGES)
    orphans = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in known
                     and not p.name.startswith((".", "__")))
    assert not orphans, f"tests/{orphans} mirror no package"
