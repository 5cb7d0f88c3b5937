"""The wheel is the product: built from a copy of the source tree, it carries the profiles, the
Ansible collection (found by `fleet` from the installed package) and the GPU check pack builder,
complete metadata (MIT, classifiers, URLs, Requires-Python) and the version of
tfgpu_install.__version__. Installed beside a distribution whose import name is `installer` (PyPA's
wheel installer), both work: our import name is our own. The collection's galaxy tarball is built
from the same files."""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest
import yaml

import tfgpu_install
from tests.support.wheelhouse import WheelSpec, build_wheel

pytestmark = pytest.mark.e2e  # builds the tool's wheel and installs it into fresh venvs

REPO = Path(__file__).resolve().parents[1]
COLLECTION = REPO / "ansible_collections" / "tfgpu" / "install"


def _source_files() -> list[str]:
    """What a release is built from: the files git tracks (the working tree's version of each)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and (REPO / p).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel and what the build printed."""
    src = tmp_path_factory.mktemp("src")
    for rel in _source_files():
        if rel.startswith("tests/"):
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    dest = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-w", str(dest), str(src)],
                          check=True, capture_output=True, text=True)
    (found,) = dest.glob("tfgpu_install-*.whl")
    return found, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(built: tuple[Path, str]) -> Path:
    return built[0]


def test_the_build_says_nothing_about_our_packages(built: tuple[Path, str]) -> None:
    """#43: setuptools warned 16 times that the collection's directories (tfgpu_install.share.
    ansible_collections.tfgpu.install.*) were importable packages missing from `packages`: data
    picked up through include-package-data. The data is named in package-data only."""
    log = built[1]
    assert "absent from the `packages` configuration" not in log, log[:2000]
    assert "tfgpu_install.share.ansible_collections" not in log, log[:2000]


def _metadata(whl: Path) -> email.message.Message:
    with zipfile.ZipFile(whl) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_the_wheel_carries_the_collection_the_pack_builder_and_the_profiles(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        script = z.getinfo("tfgpu_install/share/scripts/gpu-check.sh")
    share = "tfgpu_install/share/"
    wanted = {share + "ansible_collections/tfgpu/install/" + str(p.relative_to(COLLECTION))
              for p in COLLECTION.rglob("*") if p.is_file() and "__pycache__" not in p.parts
              and not p.name.startswith(".")  # lint config and .gitignore: not part of what runs
              and "output" not in p.relative_to(COLLECTION).parts[1:2]}  # ansible-test's own scratch
    assert share + "ansible_collections/tfgpu/install/playbooks/site.yml" in wanted
    assert wanted <= names, sorted(wanted - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert script.external_attr >> 16 & 0o111, "gpu-check.sh must stay executable"
    for profile in ("stable", "latest", "legacy", "matrix", "gpus", "drivers"):
        assert f"tfgpu_install/profiles/{profile}.yaml" in names
    assert "tfgpu_install/py.typed" in names


def test_only_our_own_top_level_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    version = tfgpu_install.__version__
    # .data: the man page, share/man/man1/tfgpu-install.1 (#37)
    assert tops == {"tfgpu_install", f"tfgpu_install-{version}.dist-info", f"tfgpu_install-{version}.data"}


def test_metadata_is_complete_and_the_version_has_one_source(wheel: Path) -> None:
    meta = _metadata(wheel)
    assert meta["Name"] == "tfgpu-install"
    assert meta["Version"] == tfgpu_install.__version__
    assert wheel.name.startswith(f"tfgpu_install-{tfgpu_install.__version__}-")
    assert meta["License-Expression"] == "MIT"
    assert meta["Requires-Python"] == ">=3.9"
    classifiers = meta.get_all("Classifier") or []
    assert "Operating System :: POSIX :: Linux" in classifiers and "Environment :: GPU :: NVIDIA CUDA" in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Changelog", "Issues"} <= set(urls)
    with zipfile.ZipFile(wheel) as z:
        (lic,) = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(lic).decode().startswith("MIT License")
    galaxy = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    assert galaxy["license"] == ["MIT"] and galaxy["version"] == tfgpu_install.__version__


def test_beside_pypa_installer_both_work_and_fleet_finds_the_collection(wheel: Path, tmp_path: Path) -> None:
    # PyPA's `installer` as it is laid out: a top-level package named `installer` with a __main__.
    theirs = build_wheel(WheelSpec("installer", "0.7.0", files={
        "installer/__init__.py": b'"""A library for installing Python wheels."""\n__version__ = "0.7.0"\n',
        "installer/__main__.py": b'print("installer.__main__ of PyPA")\n',
    }), tmp_path / "theirs")
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    # both wheels into one env, in the order that used to merge them into one directory
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(theirs), str(wheel)], check=True, capture_output=True)
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path)}

    def run(*argv: str) -> str:
        done = subprocess.run(argv, capture_output=True, text=True, env=clean, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert run(str(py), "-m", "tfgpu_install", "--version") == f"tfgpu-install {tfgpu_install.__version__}"
    assert run(str(env / "bin" / "tfgpu-install"), "--version") == f"tfgpu-install {tfgpu_install.__version__}"
    assert run(str(py), "-m", "installer") == "installer.__main__ of PyPA"
    assert run(str(py), "-c", "import installer; print(installer.__version__)") == "0.7.0"
    site = run(str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    found = run(str(py), "-c", "from tfgpu_install.fleet.playbook import collections_root; print(collections_root({}))")
    assert found == str(Path(site) / "tfgpu_install" / "share")
    assert (Path(found) / "ansible_collections" / "tfgpu" / "install" / "playbooks" / "site.yml").is_file()
    assert (Path(found) / "scripts" / "gpu-check.sh").stat().st_mode & 0o111


def test_the_galaxy_tarball_is_built_from_the_same_source(tmp_path: Path) -> None:
    galaxy = shutil.which("ansible-galaxy", path=str(Path(sys.executable).parent))
    if galaxy is None:
        pytest.skip("ansible-galaxy is not installed (pip install '.[fleet]')")
    env = {**os.environ, "PATH": f"{Path(galaxy).parent}:{os.environ.get('PATH', '')}"}
    done = subprocess.run([str(REPO / "scripts" / "build-collection"), str(tmp_path)], capture_output=True,
                          text=True, env=env)
    assert done.returncode == 0, done.stderr
    tarball = Path(done.stdout.strip())
    assert tarball == tmp_path / f"tfgpu-install-{tfgpu_install.__version__}.tar.gz"
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        for rel in ("playbooks/site.yml", "plugins/modules/tfgpu_install.py", "roles/node/tasks/main.yml"):
            data = tar.extractfile(members[rel])
            assert data is not None and data.read() == (COLLECTION / rel).read_bytes()
    assert "MANIFEST.json" in members


def test_the_pack_builder_runs_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    """`gpu-check.sh --pack` from site-packages (no checkout): it finds the tool's files in the
    installed package and repacks them into the tool's wheel; offline (PIP_NO_INDEX) the dependency
    download then stops it with exit 2, after the parts that locate files were done."""
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    py = env / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True)
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    script = site / "tfgpu_install" / "share" / "scripts" / "gpu-check.sh"
    pack = tmp_path / "pack"
    clean = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "PYTHON": sys.executable,
             "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    done = subprocess.run(["bash", str(script), "--pack", str(pack)], capture_output=True, text=True, env=clean,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and "downloading the dependencies" in done.stderr, done.stdout + done.stderr
    assert "source checkout" not in done.stderr
    (repacked,) = (pack / "wheels").glob("tfgpu_install-*.whl")
    assert repacked.name == wheel.name
    with zipfile.ZipFile(wheel) as a, zipfile.ZipFile(repacked) as b:
        assert set(a.namelist()) == set(b.namelist())
        assert b.testzip() is None
        assert b.getinfo("tfgpu_install/share/scripts/gpu-check.sh").external_attr >> 16 & 0o111
    assert (pack / "gpu-check.sh").stat().st_mode & 0o111 and (pack / "gpu_check_summary.py").is_file()
    # the repacked wheel is a wheel pip installs (RECORD hashes checked), and the tool in it runs
    again = tmp_path / "again"
    venv.create(again, with_pip=False)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(again / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-index", "--disable-pip-version-check", str(repacked)],
                   check=True, capture_output=True)
    ran = subprocess.run([str(again / "bin" / "tfgpu-install"), "--version"], capture_output=True, text=True,
                         env={"PATH": clean["PATH"], "HOME": str(tmp_path)}, cwd=tmp_path)
    assert ran.stdout.strip() == f"tfgpu-install {tfgpu_install.__version__}", ran.stderr


def test_the_wheel_ships_the_man_page_generated_from_the_parser(wheel: Path) -> None:
    """`tfgpu-install.1` lands in <prefix>/share/man/man1 (the wheel's data files), byte for byte the page
    scripts/docs_reference.py generates (tests/docs/test_reference_fresh.py holds that page fresh)."""
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".data/data/share/man/man1/tfgpu-install.1")]
        shipped = z.read(name)
    assert shipped == (REPO / "docs" / "man" / "tfgpu-install.1").read_bytes()
    assert shipped.startswith(b'.\\" generated by scripts/docs_reference.py') and b".SH EXIT STATUS" in shipped
